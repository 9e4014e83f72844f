package shapes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// Operators that make tensors, and the shape-tensor operators whose
// values inference follows: Constant, Shape, Size, ConstantOfShape,
// Range, NonZero.

// tensorValues is the content of a small integer tensor of rank 0 or 1.
func tensorValues(t *graph.Tensor) ([]graph.Dim, bool) {
	if t == nil || !isInt(t.DType) || len(t.Dims) > 1 {
		return nil, false
	}
	if n, err := t.NumElements(); err != nil || n > maxValues {
		return nil, false
	}
	ints, err := t.Int64s()
	if err != nil {
		return nil, false
	}
	return staticDims(ints), true
}

// constant reads whichever value attribute the node has.
func constant(c *ctx) []*graph.Type {
	for _, a := range c.n.Attrs {
		switch a.Name {
		case "value":
			if a.Tensor == nil {
				return nil
			}
			if d, ok := tensorValues(a.Tensor); ok {
				c.setValues(0, d)
			}
			return one(a.Tensor.DType, graph.StaticShape(a.Tensor.Dims...))
		case "value_float":
			return one(graph.Float, graph.Shape{})
		case "value_floats":
			return one(graph.Float, graph.StaticShape(int64(len(a.Floats))))
		case "value_int":
			c.setValues(0, []graph.Dim{static(a.Int)})
			return one(graph.Int64, graph.Shape{})
		case "value_ints":
			c.setValues(0, staticDims(a.Ints))
			return one(graph.Int64, graph.StaticShape(int64(len(a.Ints))))
		case "value_string":
			return one(graph.String, graph.Shape{})
		case "value_strings":
			return one(graph.String, graph.StaticShape(int64(len(a.Strings))))
		}
	}
	return nil
}

// shapeOp returns the input's dims (from start to end, opset 15) as int64
// values: numbers, symbols, unknowns.
func shapeOp(c *ctx) []*graph.Type {
	in := c.shape(0)
	if in == nil {
		return one(graph.Int64, unknownShape(1))
	}
	r := int64(len(in))
	start, end := int64(0), r
	if c.opset >= 15 {
		start, end = c.n.AttrInt("start", 0), c.n.AttrInt("end", r)
	}
	norm := func(x int64) int64 {
		if x < 0 {
			x += r
		}
		return max(0, min(x, r))
	}
	start, end = norm(start), norm(end)
	if end < start {
		end = start
	}
	c.setValues(0, cloneShape(in[start:end]))
	return one(graph.Int64, graph.StaticShape(end-start))
}

// size is the element count, a scalar.
func size(c *ctx) []*graph.Type {
	if in := c.shape(0); in != nil {
		c.setValues(0, []graph.Dim{productDim(in)})
	}
	return one(graph.Int64, graph.Shape{})
}

// constantOfShape makes a tensor of the shape its input holds, filled
// with the value attribute (float32 zero by default).
func constantOfShape(c *ctx) []*graph.Type {
	elem := graph.Float
	var fill *graph.Tensor
	if a := c.n.Attr("value"); a != nil && a.Tensor != nil {
		elem, fill = a.Tensor.DType, a.Tensor
	}
	dims, ok := c.dims(0)
	if !ok {
		if l := c.length(0); l >= 0 {
			return one(elem, unknownShape(l))
		}
		return one(elem, nil)
	}
	out := asShape(dims)
	if len(out) <= 1 && (fill == nil || isInt(fill.DType)) {
		v := []graph.Dim{static(0)}
		if fill != nil {
			v, ok = tensorValues(fill)
		}
		n := int64(1)
		if len(out) == 1 {
			n = out[0].Value
		}
		if ok && len(v) == 1 && (len(out) == 0 || isStatic(out[0])) && n >= 0 && n <= maxValues {
			vals := make([]graph.Dim, n)
			for i := range vals {
				vals[i] = v[0]
			}
			c.setValues(0, vals)
		}
	}
	return one(elem, out)
}

// rangeOp has max(ceil((limit-start)/delta), 0) elements, computed as
// ONNX Runtime does: the difference in the element type, the division in
// float64. Integer ranges are followed as values.
func rangeOp(c *ctx) []*graph.Type {
	elem := c.elem(0)
	out := unknownShape(1)
	switch {
	case isInt(elem):
		s, ok1 := c.ints(0)
		l, ok2 := c.ints(1)
		d, ok3 := c.ints(2)
		if !ok1 || !ok2 || !ok3 || len(s) != 1 || len(l) != 1 || len(d) != 1 || d[0] == 0 {
			break
		}
		n := max(int64(math.Ceil(float64(l[0]-s[0])/float64(d[0]))), 0)
		out[0] = static(n)
		if n <= maxValues {
			vals := make([]graph.Dim, n)
			for i := range vals {
				vals[i] = static(s[0] + int64(i)*d[0])
			}
			c.setValues(0, vals)
		}
	case elem == graph.Float:
		s, ok1 := c.floats(0)
		l, ok2 := c.floats(1)
		d, ok3 := c.floats(2)
		if !ok1 || !ok2 || !ok3 || len(s) != 1 || len(l) != 1 || len(d) != 1 || d[0] == 0 {
			break
		}
		if q := math.Ceil(float64(l[0]-s[0]) / float64(d[0])); q < math.MaxInt32 {
			out[0] = static(max(int64(q), 0))
		}
	}
	return one(elem, out)
}

// nonZero lists the coordinates of the non-zero elements: [rank, ?].
func nonZero(c *ctx) []*graph.Type {
	out := unknownShape(2)
	if r := c.rank(0); r >= 0 {
		out[0] = static(int64(r))
	}
	return one(graph.Int64, out)
}
