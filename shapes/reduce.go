package shapes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Reductions: the reduced axes become 1 (keepdims) or go. Axes are an
// attribute before opset 13 for ReduceSum and before opset 18 for the
// others, an input after.

func reduce(c *ctx) []*graph.Type {
	in := c.shape(0)
	elem := c.elem(0)
	keep := c.n.AttrInt("keepdims", 1) != 0
	since := int64(18)
	if c.n.OpType == "ReduceSum" {
		since = 13
	}
	axes, _, known := c.intsArg("axes", since, 1)
	if in == nil {
		return one(elem, nil)
	}
	if !known {
		if keep {
			return one(elem, unknownShape(len(in)))
		}
		return one(elem, nil)
	}
	if len(axes) == 0 {
		if c.opset >= since && c.n.AttrInt("noop_with_empty_axes", 0) != 0 {
			return one(elem, cloneShape(in))
		}
		for i := range in {
			axes = append(axes, int64(i))
		}
	}
	norm, ok := c.fitAxes(axes, len(in))
	if !ok {
		return one(elem, nil)
	}
	return one(elem, reduced(in, norm, keep))
}

// reduced is in with the given axes made 1 or removed.
func reduced(in graph.Shape, axes []int, keep bool) graph.Shape {
	out := graph.Shape{}
	for i, d := range in {
		switch {
		case !slices.Contains(axes, i):
			out = append(out, bare(d))
		case keep:
			out = append(out, static(1))
		}
	}
	return out
}

// argReduce (ArgMax, ArgMin) reduces one axis to int64 indices.
func argReduce(c *ctx) []*graph.Type {
	in := c.shape(0)
	if in == nil {
		return one(graph.Int64, nil)
	}
	axis, ok := normAxis(c.n.AttrInt("axis", 0), len(in))
	if !ok {
		c.problem("axis %d does not fit rank %d", c.n.AttrInt("axis", 0), len(in))
		return one(graph.Int64, nil)
	}
	return one(graph.Int64, reduced(in, []int{axis}, c.n.AttrInt("keepdims", 1) != 0))
}

// topK keeps K elements along axis: values and int64 indices.
func topK(c *ctx) []*graph.Type {
	in := c.shape(0)
	var out graph.Shape
	if in != nil {
		if axis, ok := normAxis(c.n.AttrInt("axis", -1), len(in)); ok {
			out = cloneShape(in)
			out[axis] = graph.Dim{}
			if c.opset < 10 {
				if a := c.n.Attr("k"); a != nil && a.Type == graph.AttrInt {
					out[axis] = static(a.Int)
				}
			} else if k, ok := c.dims(1); ok && len(k) == 1 {
				out[axis] = asShape(k)[0]
			}
		}
	}
	return []*graph.Type{tensor(c.elem(0), out), tensor(graph.Int64, cloneShape(out))}
}
