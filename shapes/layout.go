package shapes

import (
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Operators that move, cut, join or repeat data: the output shape comes
// from the input shape and from attributes or constant (or known) inputs.

// reshape: 0 copies the input dim (unless allowzero), -1 takes what is
// left, symbols cancel: [N,C,H,W] to [0,-1] is [N, C*H*W].
func reshape(c *ctx) []*graph.Type {
	elem := c.elem(0)
	var target []graph.Dim
	var known bool
	length := -1
	if c.opset < 5 {
		if ints, ok := c.attrInts("shape"); ok {
			target, known, length = staticDims(ints), true, len(ints)
		}
	} else if target, known = c.dims(1); known {
		length = len(target)
	} else {
		length = c.length(1)
	}
	switch {
	case length < 0:
		return one(elem, nil)
	case !known:
		return one(elem, unknownShape(length))
	}
	allowZero := c.opset >= 14 && c.n.AttrInt("allowzero", 0) != 0
	in := c.shape(0)
	out := make(graph.Shape, length)
	infer := -1
	for i, d := range target {
		switch {
		case isValue(d, 0) && !allowZero:
			if i < len(in) {
				out[i] = bare(in[i])
			}
		case isValue(d, -1):
			if infer >= 0 {
				c.problem("shape %v has two -1 dims", target)
				return one(elem, unknownShape(length))
			}
			infer = i
		case isStatic(d) && d.Value < -1:
			c.problem("shape %v has a negative dim", target)
			return one(elem, unknownShape(length))
		default:
			out[i] = bare(d)
		}
	}
	if infer >= 0 {
		out[infer] = remainingDim(in, out, infer)
	}
	if d, ok := c.dims(0); ok && length <= 1 {
		c.setValues(0, d)
	}
	return one(elem, out)
}

// remainingDim is the -1 dim of a reshape of in into out: the input's
// element count divided by that of the other output dims, symbols
// cancelling.
func remainingDim(in, out graph.Shape, skip int) graph.Dim {
	if in == nil {
		return graph.Dim{}
	}
	nIn, symIn, ok := product(in)
	if !ok {
		return graph.Dim{}
	}
	rest := append(append(graph.Shape{}, out[:skip]...), out[skip+1:]...)
	nOut, symOut, ok := product(rest)
	if !ok || nOut == 0 || nIn%nOut != 0 {
		return graph.Dim{}
	}
	left := slices.Clone(symIn)
	for _, s := range symOut {
		i := slices.Index(left, s)
		if i < 0 {
			return graph.Dim{}
		}
		left = slices.Delete(left, i, i+1)
	}
	k := nIn / nOut
	switch {
	case len(left) == 0:
		return static(k)
	case len(left) == 1 && k == 1:
		return graph.SymbolicDim(left[0])
	}
	return graph.Dim{}
}

// transpose permutes the dims (reversing them without perm).
func transpose(c *ctx) []*graph.Type {
	in := c.shape(0)
	perm, ok := c.attrInts("perm")
	if !ok {
		if in == nil {
			return one(c.elem(0), nil)
		}
		perm = make([]int64, len(in))
		for i := range perm {
			perm[i] = int64(len(in) - 1 - i)
		}
	}
	if in == nil {
		return one(c.elem(0), unknownShape(len(perm)))
	}
	axes, ok := normAxes(perm, len(in))
	if !ok || len(perm) != len(in) {
		c.problem("perm %v does not fit rank %d", perm, len(in))
		return one(c.elem(0), nil)
	}
	out := make(graph.Shape, len(in))
	for i, a := range axes {
		out[i] = bare(in[a])
	}
	return one(c.elem(0), out)
}

// concat joins along axis: that dim is the sum, the others agree.
func concat(c *ctx) []*graph.Type {
	var elem graph.DataType
	r := -1
	for i := range c.n.Inputs() {
		if elem == graph.Undefined {
			elem = c.elem(i)
		}
		if r < 0 {
			r = c.rank(i)
		}
	}
	if r < 0 {
		return one(elem, nil)
	}
	a := c.n.AttrInt("axis", 0)
	if c.opset < 4 && c.n.Attr("axis") == nil {
		a = 1 // the default before opset 4
	}
	axis, ok := normAxis(a, r)
	if !ok {
		c.problem("axis %d does not fit rank %d", a, r)
		return one(elem, unknownShape(r))
	}
	out := unknownShape(r)
	var sum []graph.Dim
	sumKnown := true
	var values []graph.Dim
	valuesKnown := r == 1
	for i := range c.n.Inputs() {
		if !c.present(i) {
			continue
		}
		s := c.shape(i)
		if d, ok := c.dims(i); ok {
			values = append(values, d...)
		} else {
			valuesKnown = false
		}
		if s == nil {
			sumKnown = false
			continue
		}
		if len(s) != r {
			c.problem("inputs of ranks %d and %d", r, len(s))
			return one(elem, unknownShape(r))
		}
		sum = append(sum, s[axis])
		for j, d := range s {
			if j == axis {
				continue
			}
			switch {
			case isStatic(out[j]) && isStatic(d) && out[j].Value != d.Value:
				c.problem("dim %d differs between inputs (%s, %s)", j, out[j], d)
			case !isStatic(out[j]) && d.Kind != graph.DimUnknown:
				if out[j].Kind == graph.DimUnknown || isStatic(d) {
					out[j] = bare(d)
				}
			}
		}
	}
	if sumKnown {
		out[axis] = addDims(sum...)
	}
	if valuesKnown {
		c.setValues(0, values)
	}
	return one(elem, out)
}

// flatten: [prod(dims before axis), prod(dims from axis on)].
func flatten(c *ctx) []*graph.Type {
	in := c.shape(0)
	axis := c.n.AttrInt("axis", 1)
	out := unknownShape(2)
	if in == nil {
		if axis == 0 {
			out[0] = static(1)
		}
		return one(c.elem(0), out)
	}
	if axis < 0 {
		axis += int64(len(in))
	}
	if axis < 0 || axis > int64(len(in)) {
		c.problem("axis %d does not fit rank %d", c.n.AttrInt("axis", 1), len(in))
		return one(c.elem(0), out)
	}
	out[0] = productDim(in[:axis])
	out[1] = productDim(in[axis:])
	return one(c.elem(0), out)
}

// squeeze drops the given axes, or every dim of size 1 (then every dim
// must be a number, or the rank is unknown).
func squeeze(c *ctx) []*graph.Type {
	in := c.shape(0)
	axes, given, known := c.intsArg("axes", 13, 1)
	if in == nil || !known {
		return one(c.elem(0), nil)
	}
	var out graph.Shape
	if !given || len(axes) == 0 {
		out = graph.Shape{}
		for _, d := range in {
			if !isStatic(d) {
				return one(c.elem(0), nil)
			}
			if d.Value != 1 {
				out = append(out, d)
			}
		}
	} else {
		norm, ok := c.fitAxes(axes, len(in))
		if !ok {
			return one(c.elem(0), nil)
		}
		out = graph.Shape{}
		for i, d := range in {
			if !slices.Contains(norm, i) {
				out = append(out, bare(d))
			} else if isStatic(d) && d.Value != 1 {
				c.problem("axis %d has size %d, not 1", i, d.Value)
			}
		}
	}
	if d, ok := c.dims(0); ok && len(out) <= 1 {
		c.setValues(0, d)
	}
	return one(c.elem(0), out)
}

// unsqueeze inserts dims of size 1 at the given axes of the output.
func unsqueeze(c *ctx) []*graph.Type {
	in := c.shape(0)
	axes, given, known := c.intsArg("axes", 13, 1)
	if in == nil || !given {
		return one(c.elem(0), nil)
	}
	if !known {
		if l := c.length(1); l >= 0 {
			return one(c.elem(0), unknownShape(len(in)+l))
		}
		return one(c.elem(0), nil)
	}
	r := len(in) + len(axes)
	norm, ok := c.fitAxes(axes, r)
	if !ok {
		return one(c.elem(0), nil)
	}
	out := make(graph.Shape, r)
	next := 0
	for i := range out {
		if slices.Contains(norm, i) {
			out[i] = static(1)
		} else {
			out[i] = bare(in[next])
			next++
		}
	}
	if d, ok := c.dims(0); ok && r <= 1 {
		c.setValues(0, d)
	}
	return one(c.elem(0), out)
}

// slice cuts [start, end) with step along axes; bounds come from
// attributes before opset 10 and from inputs after.
func slice(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	if in == nil {
		return one(elem, nil)
	}
	var starts, ends, axes, steps []int64
	var ok1, ok2, ok3, ok4 = true, true, true, true
	if c.opset < 10 {
		starts, ok1 = c.attrInts("starts")
		ends, ok2 = c.attrInts("ends")
		axes, ok3 = c.attrInts("axes")
		if !ok3 {
			axes, ok3 = nil, true
		}
	} else {
		starts, ok1 = c.ints(1)
		ends, ok2 = c.ints(2)
		if c.present(3) {
			axes, ok3 = c.ints(3)
		}
		if c.present(4) {
			steps, ok4 = c.ints(4)
		}
	}
	out := cloneShape(in)
	if !ok3 || !ok4 {
		return one(elem, unknownShape(len(in)))
	}
	n := len(starts)
	if !ok1 {
		n = c.length(1)
	}
	if axes == nil && n >= 0 {
		axes = make([]int64, n)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	norm, ok := normAxes(axes, len(in))
	if !ok || n < 0 {
		return one(elem, unknownShape(len(in)))
	}
	if !ok1 || !ok2 {
		for _, a := range norm {
			out[a] = graph.Dim{}
		}
		return one(elem, out)
	}
	if steps == nil {
		steps = ones(len(axes))
	}
	if len(starts) != len(axes) || len(ends) != len(axes) || len(steps) != len(axes) {
		c.problem("starts, ends, axes and steps have different lengths")
		return one(elem, unknownShape(len(in)))
	}
	for j, a := range norm {
		out[a] = sliceDim(in[a], starts[j], ends[j], steps[j])
	}
	if d, ok := c.dims(0); ok && len(in) == 1 && len(norm) == 1 && steps[0] != 0 {
		if start, n, ok := sliceRange(int64(len(d)), starts[0], ends[0], steps[0]); ok {
			vals := make([]graph.Dim, n)
			for i := range vals {
				vals[i] = d[start+int64(i)*steps[0]]
			}
			c.setValues(0, vals)
		}
	}
	return one(elem, out)
}

// sliceDim is the size of dim d after slicing; a symbol survives a slice
// that takes everything.
func sliceDim(d graph.Dim, start, end, step int64) graph.Dim {
	if isStatic(d) {
		if _, n, ok := sliceRange(d.Value, start, end, step); ok {
			return static(n)
		}
		return graph.Dim{}
	}
	if step == 1 && start == 0 && end >= math.MaxInt32 {
		return bare(d)
	}
	return graph.Dim{}
}

// sliceRange is the first index and the count of a slice of a dim of
// size dim, with ONNX's clamping.
func sliceRange(dim, start, end, step int64) (first, n int64, ok bool) {
	if step == 0 {
		return 0, 0, false
	}
	clamp := func(x, lo, hi int64) int64 { return max(lo, min(x, hi)) }
	if start < 0 {
		start = max(start, -dim-1) + dim
	}
	if end < 0 {
		end = max(end, -dim-1) + dim
	}
	if step > 0 {
		start, end = clamp(start, 0, dim), clamp(end, 0, dim)
		if end <= start {
			return start, 0, true
		}
		return start, ceilDiv(end-start, step), true
	}
	start, end = clamp(start, 0, dim-1), clamp(end, -1, dim-1)
	switch {
	case start <= end:
		return start, 0, true
	case step == math.MinInt64:
		return start, 1, true
	}
	return start, ceilDiv(start-end, -step), true
}

// gather: data[:axis] + indices + data[axis+1:].
func gather(c *ctx) []*graph.Type {
	data, idx := c.shape(0), c.shape(1)
	if data == nil || idx == nil {
		return one(c.elem(0), nil)
	}
	axis, ok := normAxis(c.n.AttrInt("axis", 0), len(data))
	if !ok {
		c.problem("axis %d does not fit rank %d", c.n.AttrInt("axis", 0), len(data))
		return one(c.elem(0), nil)
	}
	out := append(append(cloneShape(data[:axis]), cloneShape(idx)...), cloneShape(data[axis+1:])...)
	if d, ok := c.dims(0); ok && len(data) == 1 {
		if is, ok := c.ints(1); ok && len(idx) <= 1 {
			vals := make([]graph.Dim, len(is))
			for i, x := range is {
				if x < 0 {
					x += int64(len(d))
				}
				if x < 0 || x >= int64(len(d)) {
					return one(c.elem(0), out)
				}
				vals[i] = d[x]
			}
			c.setValues(0, vals)
		}
	}
	return one(c.elem(0), out)
}

func gatherElements(c *ctx) []*graph.Type { return one(c.elem(0), cloneShape(c.shape(1))) }

// gatherND: indices[:-1] + data[batch_dims + indices[-1]:].
func gatherND(c *ctx) []*graph.Type {
	data, idx := c.shape(0), c.shape(1)
	if data == nil || len(idx) == 0 || !isStatic(idx[len(idx)-1]) {
		return one(c.elem(0), nil)
	}
	from := c.n.AttrInt("batch_dims", 0) + idx[len(idx)-1].Value
	if from < 0 || from > int64(len(data)) {
		c.problem("indices of shape %v do not fit data of shape %v", idx, data)
		return one(c.elem(0), nil)
	}
	return one(c.elem(0), append(cloneShape(idx[:len(idx)-1]), cloneShape(data[from:])...))
}

// resize (and Upsample): sizes when given, else each dim times its scale,
// rounded down in float32 as ONNX Runtime does.
func resize(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	if in == nil {
		return one(elem, nil)
	}
	r := len(in)
	var scales []float32
	scalesOK := false
	sizesAt := -1
	switch {
	case c.n.OpType == "Upsample" && c.opset < 9:
		a := c.n.Attr("scales")
		if a != nil && a.Type == graph.AttrFloats {
			scales, scalesOK = a.Floats, true
		}
	case c.n.OpType == "Upsample" || c.opset < 11:
		scales, scalesOK = c.floats(1)
	default:
		scales, scalesOK = c.floats(2)
		if s := c.shape(2); !c.present(2) || len(s) == 1 && isValue(s[0], 0) {
			scales, scalesOK = nil, true // absent or empty: sizes decide
		}
		sizesAt = 3
	}
	axes := make([]int64, r)
	for i := range axes {
		axes[i] = int64(i)
	}
	if c.opset >= 18 {
		if a, ok := c.attrInts("axes"); ok {
			axes = a
		}
	}
	norm, ok := normAxes(axes, r)
	if !ok {
		return one(elem, unknownShape(r))
	}
	out := cloneShape(in)
	switch {
	case scalesOK && len(scales) > 0:
		if len(scales) != len(norm) {
			c.problem("%d scales for %d axes", len(scales), len(norm))
			return one(elem, unknownShape(r))
		}
		for j, a := range norm {
			out[a] = scaledDim(in[a], scales[j])
		}
	case sizesAt > 0 && c.present(sizesAt):
		sizes, ok := c.dims(sizesAt)
		policy := c.n.AttrString("keep_aspect_ratio_policy", "stretch")
		if !ok || len(sizes) != len(norm) || c.opset >= 18 && policy != "stretch" {
			for _, a := range norm {
				out[a] = graph.Dim{}
			}
			break
		}
		for j, a := range norm {
			out[a] = asShape(sizes[j : j+1])[0]
		}
	default:
		return one(elem, unknownShape(r))
	}
	return one(elem, out)
}

// scaledDim is trunc(float32(d) * scale), as ONNX Runtime computes it.
func scaledDim(d graph.Dim, scale float32) graph.Dim {
	if isStatic(d) {
		p := float32(d.Value) * scale
		if !(p >= 0 && p <= math.MaxInt32) {
			return graph.Dim{}
		}
		return static(int64(p))
	}
	if scale == 1 {
		return bare(d)
	}
	return graph.Dim{}
}

// pad adds pads[i] before and pads[i+n] after each (given) axis; the pads
// are an attribute before opset 11 ("paddings" in opset 1), an input
// after.
func pad(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	if in == nil {
		return one(elem, nil)
	}
	var pads []int64
	var ok bool
	switch {
	case c.opset < 2:
		pads, ok = c.attrInts("paddings")
	case c.opset < 11:
		pads, ok = c.attrInts("pads")
	default:
		pads, ok = c.ints(1)
	}
	axes := make([]int64, len(in))
	for i := range axes {
		axes[i] = int64(i)
	}
	if c.opset >= 18 && c.present(3) {
		var aok bool
		if axes, aok = c.ints(3); !aok {
			return one(elem, unknownShape(len(in)))
		}
	}
	norm, nok := normAxes(axes, len(in))
	if !ok || !nok || len(pads) != 2*len(norm) {
		return one(elem, unknownShape(len(in)))
	}
	out := cloneShape(in)
	for j, a := range norm {
		out[a] = addDims(in[a], static(pads[j]), static(pads[len(norm)+j]))
	}
	return one(elem, out)
}

// split cuts along axis into the given sizes, or into equal parts (the
// last one smaller with num_outputs, opset 18).
func split(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	k := len(c.n.Outputs())
	outs := make([]*graph.Type, k)
	for i := range outs {
		outs[i] = tensor(elem, nil)
	}
	if in == nil {
		return outs
	}
	axis, ok := normAxis(c.n.AttrInt("axis", 0), len(in))
	if !ok {
		c.problem("axis %d does not fit rank %d", c.n.AttrInt("axis", 0), len(in))
		return outs
	}
	sizes, given, known := c.intsArg("split", 13, 1)
	dims := make([]graph.Dim, k)
	d := in[axis]
	switch {
	case given && known && len(sizes) == k:
		dims = staticDims(sizes)
	case given:
	case k == 1:
		dims[0] = bare(d)
	case isStatic(d) && c.opset >= 18 && c.n.Attr("num_outputs") != nil:
		chunk := ceilDiv(d.Value, int64(k))
		for i := range dims {
			dims[i] = static(max(0, min(chunk, d.Value-int64(i)*chunk)))
		}
	case isStatic(d) && d.Value%int64(k) == 0:
		for i := range dims {
			dims[i] = static(d.Value / int64(k))
		}
	}
	for i := range outs {
		s := cloneShape(in)
		s[axis] = dims[i]
		outs[i] = tensor(elem, s)
	}
	return outs
}

// tile repeats each dim repeats[i] times.
func tile(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	if in == nil || c.opset < 6 {
		return one(elem, nil)
	}
	reps, ok := c.ints(1)
	if !ok || len(reps) != len(in) {
		return one(elem, unknownShape(len(in)))
	}
	out := make(graph.Shape, len(in))
	for i, d := range in {
		out[i] = scaleDim(d, reps[i])
	}
	return one(elem, out)
}

// expand broadcasts the input with the target shape.
func expand(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	target, ok := c.dims(1)
	if !ok {
		if l := c.length(1); l >= 0 {
			target = unknownShape(l)
		} else {
			return one(elem, nil)
		}
	}
	out, ok := broadcast(in, asShape(target))
	if !ok {
		c.problem("shape %v does not expand to %v", in, target)
		return one(elem, nil)
	}
	return one(elem, out)
}

// depthToSpace: [N, C/(b*b), H*b, W*b].
func depthToSpace(c *ctx) []*graph.Type {
	in := c.shape(0)
	b := c.n.AttrInt("blocksize", 0)
	if len(in) != 4 || b <= 0 {
		return one(c.elem(0), nil)
	}
	return one(c.elem(0), graph.Shape{bare(in[0]), divDim(in[1], b*b), scaleDim(in[2], b), scaleDim(in[3], b)})
}

// spaceToDepth: [N, C*b*b, H/b, W/b].
func spaceToDepth(c *ctx) []*graph.Type {
	in := c.shape(0)
	b := c.n.AttrInt("blocksize", 0)
	if len(in) != 4 || b <= 0 {
		return one(c.elem(0), nil)
	}
	return one(c.elem(0), graph.Shape{bare(in[0]), scaleDim(in[1], b*b), divDim(in[2], b), divDim(in[3], b)})
}
