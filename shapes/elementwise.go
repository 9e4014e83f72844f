package shapes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// Elementwise operators: numpy broadcasting over all inputs, the element
// type of the first (bool for comparisons). Integer arithmetic on known
// shape values is carried out, so that Shape -> Mul -> Reshape resolves.

// legacyBroadcast lists the ops that before opset 7 broadcast B into A
// (attributes broadcast and axis): the output has A's shape.
var legacyBroadcast = map[string]bool{
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true,
	"And": true, "Or": true, "Xor": true, "Equal": true, "Less": true, "Greater": true,
}

// sameElem lists the elementwise ops whose inputs all share the output's
// element type (Pow and BitShift may mix types).
var sameElem = map[string]bool{
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Mod": true,
	"And": true, "Or": true, "Xor": true, "BitwiseAnd": true, "BitwiseOr": true, "BitwiseXor": true,
	"Max": true, "Min": true, "Sum": true, "Mean": true,
}

func elementwise(c *ctx) []*graph.Type {
	s := broadcastInputs(c, 0)
	elem := c.elem(0)
	if elem == graph.Undefined && sameElem[c.n.OpType] {
		for i := range c.n.Inputs() {
			if e := c.elem(i); e != graph.Undefined {
				elem = e
				break
			}
		}
	}
	if elem == graph.Int64 || elem == graph.Int32 {
		arithValues(c, elem)
	}
	return one(elem, s)
}

// broadcastInputs is the output shape of an elementwise node over its
// inputs from index first on.
func broadcastInputs(c *ctx, first int) graph.Shape {
	if c.opset < 7 && legacyBroadcast[c.n.OpType] {
		return cloneShape(c.shape(0))
	}
	var shapes []graph.Shape
	for i := first; i < len(c.n.Inputs()); i++ {
		if c.present(i) {
			shapes = append(shapes, c.shape(i))
		}
	}
	if len(shapes) == 0 {
		return nil
	}
	s, ok := broadcast(shapes...)
	if !ok {
		c.problem("input shapes %v do not broadcast", shapes)
	}
	return s
}

func compare(c *ctx) []*graph.Type {
	if c.n.OpType == "Equal" {
		arithValues(c, graph.Bool)
	}
	return one(graph.Bool, broadcastInputs(c, 0))
}

func isTest(c *ctx) []*graph.Type { return one(graph.Bool, cloneShape(c.shape(0))) }

func where(c *ctx) []*graph.Type {
	elem := c.elem(1)
	if elem == graph.Undefined {
		elem = c.elem(2)
	}
	if cond, ok := c.ints(0); ok {
		x, okx := c.dims(1)
		y, oky := c.dims(2)
		if okx && oky {
			if n, ok := valueLen(len(cond), len(x), len(y)); ok {
				out := make([]graph.Dim, n)
				for i := range out {
					if cond[min(i, len(cond)-1)] != 0 {
						out[i] = x[min(i, len(x)-1)]
					} else {
						out[i] = y[min(i, len(y)-1)]
					}
				}
				c.setValues(0, out)
			}
		}
	}
	return one(elem, broadcastInputs(c, 0))
}

// valueLen is the length of a broadcast of 1-D values: all the same
// length or 1.
func valueLen(ls ...int) (int, bool) {
	n := 1
	for _, l := range ls {
		if l != 1 {
			if n != 1 && n != l {
				return 0, false
			}
			n = l
		}
	}
	return n, true
}

// arithValues computes the values of a binary integer op whose inputs are
// known.
func arithValues(c *ctx, elem graph.DataType) {
	if len(c.n.Inputs()) != 2 {
		return
	}
	a, oka := c.dims(0)
	b, okb := c.dims(1)
	if !oka || !okb {
		return
	}
	n, ok := valueLen(len(a), len(b))
	if !ok {
		return
	}
	out := make([]graph.Dim, n)
	for i := range out {
		out[i] = arith(c.n.OpType, a[min(i, len(a)-1)], b[min(i, len(b)-1)])
		if elem == graph.Int32 && isStatic(out[i]) && (out[i].Value > math.MaxInt32 || out[i].Value < math.MinInt32) {
			out[i] = graph.Dim{}
		}
	}
	c.setValues(0, out)
}

// arith applies op to two known elements; symbols survive x+0, x*1, x/1
// and x-0.
func arith(op string, x, y graph.Dim) graph.Dim {
	if isStatic(x) && isStatic(y) {
		a, b := x.Value, y.Value
		switch op {
		case "Add":
			return static(a + b)
		case "Sub":
			return static(a - b)
		case "Mul":
			return static(a * b)
		case "Div":
			if b != 0 {
				return static(a / b)
			}
		case "Max":
			return static(max(a, b))
		case "Min":
			return static(min(a, b))
		case "Equal":
			if a == b {
				return static(1)
			}
			return static(0)
		}
		return graph.Dim{}
	}
	switch {
	case (op == "Add" || op == "Sub") && isValue(y, 0),
		(op == "Mul" || op == "Div") && isValue(y, 1):
		return bare(x)
	case op == "Add" && isValue(x, 0), op == "Mul" && isValue(x, 1):
		return bare(y)
	case (op == "Max" || op == "Min") && sameDim(x, y):
		return bare(x)
	case op == "Equal" && sameDim(x, y):
		return static(1)
	}
	return graph.Dim{}
}

// unaryValues (Neg, Abs) keeps the type and follows known values.
func unaryValues(c *ctx) []*graph.Type {
	if d, ok := c.ints(0); ok {
		out := make([]graph.Dim, len(d))
		for i, x := range d {
			if c.n.OpType == "Neg" || x < 0 {
				x = -x
			}
			out[i] = static(x)
		}
		c.setValues(0, out)
	}
	return same(c)
}

func cast(c *ctx) []*graph.Type {
	to := graph.DataType(c.n.AttrInt("to", 0))
	if d, ok := c.dims(0); ok && (to == graph.Int64 || to == graph.Int32) && isInt(c.elem(0)) {
		c.setValues(0, d)
	}
	return one(to, cloneShape(c.shape(0)))
}

func castLike(c *ctx) []*graph.Type { return one(c.elem(1), cloneShape(c.shape(0))) }

func identity(c *ctx) []*graph.Type {
	if d, ok := c.dims(0); ok {
		c.setValues(0, d)
	}
	return same(c)
}

// dropout passes its input through; the mask is bool from opset 10 on,
// of the input's type before.
func dropout(c *ctx) []*graph.Type {
	maskElem := graph.Bool
	if c.opset < 10 {
		maskElem = c.elem(0)
	}
	return []*graph.Type{tensor(c.elem(0), cloneShape(c.shape(0))), tensor(maskElem, cloneShape(c.shape(0)))}
}

// layerNorm: Y like X; Mean and InvStdDev keep the dims before axis and
// make the rest 1, in the stash type.
func layerNorm(c *ctx) []*graph.Type {
	x := c.shape(0)
	out := []*graph.Type{tensor(c.elem(0), cloneShape(x))}
	stash := graph.DataType(c.n.AttrInt("stash_type", int64(graph.Float)))
	var stats graph.Shape
	if x != nil {
		if axis, ok := normAxis(c.n.AttrInt("axis", -1), len(x)); ok {
			stats = cloneShape(x)
			for i := axis; i < len(stats); i++ {
				stats[i] = static(1)
			}
		}
	}
	return append(out, tensor(stash, stats), tensor(stash, cloneShape(stats)))
}

// batchNorm: Y like X; the optional training outputs (running and saved
// statistics) are per channel.
func batchNorm(c *ctx) []*graph.Type {
	x := c.shape(0)
	out := []*graph.Type{tensor(c.elem(0), cloneShape(x))}
	var ch graph.Shape
	if len(x) >= 2 {
		ch = graph.Shape{bare(x[1])}
	} else if s := c.shape(1); len(s) == 1 {
		ch = cloneShape(s)
	}
	elem := c.elem(3)
	for i := 1; i < len(c.n.Outputs()); i++ {
		out = append(out, tensor(elem, cloneShape(ch)))
	}
	return out
}

// quantize: the element type is the zero point's, else output_dtype,
// else uint8.
func quantize(c *ctx) []*graph.Type {
	elem := c.elem(2)
	if !c.present(2) {
		elem = graph.DataType(c.n.AttrInt("output_dtype", 0))
		if elem == graph.Undefined {
			elem = graph.Uint8
		}
	}
	return one(elem, cloneShape(c.shape(0)))
}

// dequantize: the element type is output_dtype, else the scale's (float
// before opset 19).
func dequantize(c *ctx) []*graph.Type {
	elem := graph.DataType(c.n.AttrInt("output_dtype", 0))
	if elem == graph.Undefined {
		elem = c.elem(1)
	}
	if elem == graph.Undefined && c.opset < 19 {
		elem = graph.Float
	}
	return one(elem, cloneShape(c.shape(0)))
}

func dynamicQuantize(c *ctx) []*graph.Type {
	return []*graph.Type{
		tensor(graph.Uint8, cloneShape(c.shape(0))),
		tensor(graph.Float, graph.Shape{}),
		tensor(graph.Uint8, graph.Shape{}),
	}
}
