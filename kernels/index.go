package kernels

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// broadcast returns the numpy (multidirectional) broadcast of shapes.
func broadcast(shapes ...[]int64) ([]int64, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			switch o := out[off+i]; {
			case d == o || d == 1:
			case o == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}

// strides returns the row-major element strides of dims.
func strides(dims []int64) []int64 {
	st := make([]int64, len(dims))
	s := int64(1)
	for i := len(dims) - 1; i >= 0; i-- {
		st[i] = s
		s *= dims[i]
	}
	return st
}

// indexMap walks an array of shape len(table[i]) per dimension in
// row-major order and returns, for each element, base plus the sum of
// table[i][coord[i]]: the flat index of the element it reads. Transpose,
// Slice, broadcasting, Tile and the reductions are all such maps.
func indexMap(tables [][]int64, base int64) []int {
	out := make([]int64, len(tables))
	for i, t := range tables {
		out[i] = int64(len(t))
	}
	idx := make([]int, count(out))
	if len(idx) == 0 {
		return idx
	}
	coord := make([]int, len(tables))
	at := base
	for _, t := range tables {
		at += t[0]
	}
	for k := range idx {
		idx[k] = int(at)
		for d := len(tables) - 1; d >= 0; d-- {
			t := tables[d]
			at -= t[coord[d]]
			coord[d]++
			if coord[d] < len(t) {
				at += t[coord[d]]
				break
			}
			coord[d] = 0
			at += t[0]
		}
	}
	return idx
}

// stridedIndex is indexMap for coord[i] * st[i] over shape out.
func stridedIndex(out, st []int64, base int64) []int {
	tables := make([][]int64, len(out))
	for i, d := range out {
		tables[i] = make([]int64, d)
		for c := range tables[i] {
			tables[i][c] = int64(c) * st[i]
		}
	}
	return indexMap(tables, base)
}

// broadcastIndex maps each element of shape out to the element of an
// array of shape in (which broadcasts to out) that it reads.
func broadcastIndex(in, out []int64) []int {
	st := make([]int64, len(out))
	inSt := strides(in)
	off := len(out) - len(in)
	for i, d := range in {
		if d != 1 {
			st[off+i] = inSt[i]
		}
	}
	return stridedIndex(out, st, 0)
}

// broadcastInputs checks that ts broadcast together, reserves an output
// of dtype dt, and returns the output dims and, for each input, the
// element each output element reads.
func (c *call) broadcastInputs(dt graph.DataType, ts ...*graph.Tensor) ([]int64, [][]int, error) {
	shapes := make([][]int64, len(ts))
	for i, t := range ts {
		shapes[i] = t.Dims
	}
	dims, err := broadcast(shapes...)
	if err != nil {
		return nil, nil, c.invalid("%v", err)
	}
	if err := c.reserve(dt, dims); err != nil {
		return nil, nil, err
	}
	idx := make([][]int, len(ts))
	for i, t := range ts {
		idx[i] = broadcastIndex(t.Dims, dims)
	}
	return dims, idx, nil
}

// gatherBytes returns the elements of data (of size bytes each) at idx.
func gatherBytes(data []byte, size int, idx []int) []byte {
	out := make([]byte, len(idx)*size)
	for k, i := range idx {
		copy(out[k*size:(k+1)*size], data[i*size:(i+1)*size])
	}
	return out
}

// moveElements builds a tensor of dims from the elements of t at idx.
func moveElements(t *graph.Tensor, dims []int64, idx []int) (*graph.Tensor, error) {
	b, err := dataOf(t)
	if err != nil {
		return nil, err
	}
	return graph.NewTensor("", t.DType, dims, gatherBytes(b, elemSize(t.DType), idx))
}

// axis normalizes an axis in [-rank, rank), or in [-rank, rank] with
// inclusive (Flatten's axis); a negative axis counts from the end.
func (c *call) axis(a int64, rank int, inclusive bool) (int, error) {
	hi := int64(rank)
	if inclusive {
		hi++
	}
	if a < -int64(rank) || a >= hi {
		return 0, c.invalid("axis %d out of range for rank %d", a, rank)
	}
	if a < 0 {
		a += int64(rank)
	}
	return int(a), nil
}

// axesSet normalizes a list of axes for rank, refusing repeats.
func (c *call) axesSet(axes []int64, rank int) ([]int, error) {
	out := make([]int, 0, len(axes))
	for _, a := range axes {
		n, err := c.axis(a, rank, false)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, n) {
			return nil, c.invalid("axis %d repeated in %v", a, axes)
		}
		out = append(out, n)
	}
	return out, nil
}

// intList reads a 1-D (or scalar) integer tensor of int32 or int64, as
// shape, axes, indices and repeats inputs are.
func (c *call) intList(t *graph.Tensor, what string) ([]int64, error) {
	if t.DType != graph.Int64 && t.DType != graph.Int32 {
		return nil, c.unsupported("%s of type %s", what, t.DType)
	}
	if len(t.Dims) > 1 {
		return nil, c.invalid("%s must be 1-D, got shape %v", what, t.Dims)
	}
	return ints(t)
}
