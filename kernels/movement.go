package kernels

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Operators that move elements without computing on them: any element
// type with a whole-byte size.

func gatherKernel(c *call) ([]*graph.Tensor, error) {
	data, indices, err := c.pair()
	if err != nil {
		return nil, err
	}
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return nil, err
	}
	if len(data.Dims) == 0 {
		return nil, c.invalid("scalar data")
	}
	ax, err := c.axis(a, len(data.Dims), false)
	if err != nil {
		return nil, err
	}
	if indices.DType != graph.Int64 && indices.DType != graph.Int32 {
		return nil, c.unsupported("indices of type %s", indices.DType)
	}
	dims := slices.Concat(data.Dims[:ax], indices.Dims, data.Dims[ax+1:])
	if err := c.reserve(data.DType, dims); err != nil {
		return nil, err
	}
	idx, err := ints(indices)
	if err != nil {
		return nil, err
	}
	n := data.Dims[ax]
	for i, v := range idx {
		if v < 0 && c.opset < 11 {
			return nil, c.unsupported("negative indices before opset 11")
		}
		if v < 0 {
			v += n
		}
		if v < 0 || v >= n {
			return nil, c.invalid("index %d out of range for axis of size %d", idx[i], n)
		}
		idx[i] = v
	}
	outer, inner := count(data.Dims[:ax]), int64(count(data.Dims[ax+1:]))
	tables := [][]int64{make([]int64, outer), make([]int64, len(idx)), make([]int64, inner)}
	for o := range tables[0] {
		tables[0][o] = int64(o) * n * inner
	}
	for j, v := range idx {
		tables[1][j] = v * inner
	}
	for i := range tables[2] {
		tables[2][i] = int64(i)
	}
	return one(moveElements(data, dims, indexMap(tables, 0)))
}

func concatKernel(c *call) ([]*graph.Tensor, error) {
	if len(c.in) == 0 {
		return nil, c.invalid("no inputs")
	}
	first, err := c.need(0)
	if err != nil {
		return nil, err
	}
	a, err := c.attrInt("axis", 1)
	if err != nil {
		return nil, err
	}
	if c.attr("axis") == nil && c.opset >= 4 {
		return nil, c.invalid("no axis")
	}
	if a < 0 && c.opset < 11 {
		return nil, c.unsupported("negative axis before opset 11")
	}
	ax, err := c.axis(a, len(first.Dims), false)
	if err != nil {
		return nil, err
	}
	dims := slices.Clone(first.Dims)
	dims[ax] = 0
	for i := range c.in {
		t, err := c.need(i)
		if err != nil {
			return nil, err
		}
		if t.DType != first.DType || len(t.Dims) != len(dims) {
			return nil, c.invalid("input %d is %s%v, input 0 is %s%v", i, t.DType, t.Dims, first.DType, first.Dims)
		}
		for d := range dims {
			if d != ax && t.Dims[d] != dims[d] {
				return nil, c.invalid("input %d has shape %v, input 0 %v", i, t.Dims, first.Dims)
			}
		}
		dims[ax] += t.Dims[ax]
	}
	if err := c.reserve(first.DType, dims); err != nil {
		return nil, err
	}
	size := elemSize(first.DType)
	inner := count(dims[ax+1:]) * size
	out := make([]byte, 0, count(dims)*size)
	parts := make([][]byte, len(c.in))
	for i, t := range c.in {
		if parts[i], err = dataOf(t); err != nil {
			return nil, err
		}
	}
	for o := range count(dims[:ax]) {
		for i, t := range c.in {
			block := int(t.Dims[ax]) * inner
			out = append(out, parts[i][o*block:(o+1)*block]...)
		}
	}
	return one(graph.NewTensor("", first.DType, dims, out))
}

func sliceKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	var starts, ends, axes, steps []int64
	if c.opset < 10 {
		var ok1, ok2 bool
		starts, ok1, err = c.attrInts("starts")
		if err != nil {
			return nil, err
		}
		ends, ok2, err = c.attrInts("ends")
		if err != nil {
			return nil, err
		}
		if !ok1 || !ok2 {
			return nil, c.invalid("starts and ends are required")
		}
		if axes, _, err = c.attrInts("axes"); err != nil {
			return nil, err
		}
	} else {
		lists := []*[]int64{&starts, &ends, &axes, &steps}
		for i, l := range lists {
			t := c.input(i + 1)
			if t == nil {
				if i < 2 {
					return nil, c.invalid("starts and ends are required")
				}
				continue
			}
			if *l, err = c.intList(t, "slice parameter"); err != nil {
				return nil, err
			}
		}
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, c.invalid("starts %v, ends %v, axes %v, steps %v differ in length", starts, ends, axes, steps)
	}
	if err := c.checkNegativeAxes(axes); err != nil {
		return nil, err
	}
	set, err := c.axesSet(axes, len(x.Dims))
	if err != nil {
		return nil, err
	}
	inSt := strides(x.Dims)
	dims := slices.Clone(x.Dims)
	st := slices.Clone(inSt)
	base := int64(0)
	for i, a := range set {
		first, n, err := c.sliceAxis(x.Dims[a], starts[i], ends[i], steps[i])
		if err != nil {
			return nil, err
		}
		dims[a] = n
		st[a] = inSt[a] * steps[i]
		base += first * inSt[a]
	}
	if err := c.reserve(x.DType, dims); err != nil {
		return nil, err
	}
	return one(moveElements(x, dims, stridedIndex(dims, st, base)))
}

// sliceAxis clamps a slice of an axis of size dim as ONNX specifies and
// returns the first index read and the number of elements.
func (c *call) sliceAxis(dim, start, end, step int64) (first, n int64, err error) {
	if step == 0 {
		return 0, 0, c.invalid("step 0")
	}
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	if step > 0 {
		start, end = min(max(start, 0), dim), min(max(end, 0), dim)
		if end <= start {
			return 0, 0, nil
		}
		return start, (end - start + step - 1) / step, nil
	}
	start, end = min(max(start, 0), dim-1), min(max(end, -1), dim-1)
	if end >= start {
		return 0, 0, nil
	}
	return start, (start - end - step - 1) / -step, nil
}

func transposeKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	rank := len(x.Dims)
	perm, given, err := c.attrInts("perm")
	if err != nil {
		return nil, err
	}
	if !given {
		for i := rank - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	seen := make([]bool, rank)
	if len(perm) != rank {
		return nil, c.invalid("perm %v for rank %d", perm, rank)
	}
	for _, p := range perm {
		if p < 0 || p >= int64(rank) || seen[p] {
			return nil, c.invalid("perm %v is not a permutation", perm)
		}
		seen[p] = true
	}
	inSt := strides(x.Dims)
	dims := make([]int64, rank)
	st := make([]int64, rank)
	for i, p := range perm {
		dims[i], st[i] = x.Dims[p], inSt[p]
	}
	if err := c.reserve(x.DType, dims); err != nil {
		return nil, err
	}
	return one(moveElements(x, dims, stridedIndex(dims, st, 0)))
}

// dataAndList is input 0 and the integers of input 1, a list called what
// (Expand's shape, Tile's repeats).
func (c *call) dataAndList(what string) (*graph.Tensor, []int64, error) {
	x, l, err := c.pair()
	if err != nil {
		return nil, nil, err
	}
	list, err := c.intList(l, what)
	if err != nil {
		return nil, nil, err
	}
	return x, list, nil
}

func expandKernel(c *call) ([]*graph.Tensor, error) {
	x, shape, err := c.dataAndList("shape")
	if err != nil {
		return nil, err
	}
	dims, err := broadcast(x.Dims, shape)
	if err != nil {
		return nil, c.invalid("%v", err)
	}
	if err := c.reserve(x.DType, dims); err != nil {
		return nil, err
	}
	return one(moveElements(x, dims, broadcastIndex(x.Dims, dims)))
}

func tileKernel(c *call) ([]*graph.Tensor, error) {
	if c.opset < 6 {
		return nil, c.unsupported("tiles and axis inputs")
	}
	x, repeats, err := c.dataAndList("repeats")
	if err != nil {
		return nil, err
	}
	if len(repeats) != len(x.Dims) {
		return nil, c.invalid("repeats %v for shape %v", repeats, x.Dims)
	}
	dims := make([]int64, len(x.Dims))
	for i, d := range x.Dims {
		if repeats[i] < 0 {
			return nil, c.invalid("negative repeats %v", repeats)
		}
		dims[i] = d * repeats[i]
	}
	if err := c.reserve(x.DType, dims); err != nil {
		return nil, err
	}
	inSt := strides(x.Dims)
	tables := make([][]int64, len(dims))
	for i, d := range dims {
		tables[i] = make([]int64, d)
		for j := range tables[i] {
			tables[i][j] = int64(j) % x.Dims[i] * inSt[i]
		}
	}
	return one(moveElements(x, dims, indexMap(tables, 0)))
}
