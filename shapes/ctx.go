package shapes

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// rule infers the types of a node's outputs, in output order; a nil entry
// (or a short list) leaves an output unknown.
type rule func(c *ctx) []*graph.Type

// ctx is what a rule sees of one node: its input types, the known values
// of its small integer inputs, its attributes and the operator set.
type ctx struct {
	s     *state
	n     *graph.Node
	opset int64
}

// typ is input i's tensor type, nil when absent or unknown.
func (c *ctx) typ(i int) *graph.Type {
	v := c.n.Input(i)
	if v == nil {
		return nil
	}
	t := c.s.res.Types.Get(v)
	if t == nil || t.Kind != graph.KindTensor {
		return nil
	}
	return t
}

func (c *ctx) present(i int) bool { return c.n.Input(i) != nil }

// shape is input i's shape, nil when its rank is unknown.
func (c *ctx) shape(i int) graph.Shape {
	if t := c.typ(i); t != nil {
		return t.Shape
	}
	return nil
}

func (c *ctx) elem(i int) graph.DataType {
	if t := c.typ(i); t != nil {
		return t.Elem
	}
	return graph.Undefined
}

// rank is input i's rank, -1 when unknown.
func (c *ctx) rank(i int) int {
	if s := c.shape(i); s != nil {
		return len(s)
	}
	return -1
}

// length is the number of elements of a 1-D input (a shape or axes
// list), -1 when unknown or larger than a shape can be.
func (c *ctx) length(i int) int {
	if d, ok := c.dims(i); ok {
		return len(d)
	}
	if s := c.shape(i); len(s) == 1 && isStatic(s[0]) && s[0].Value >= 0 && s[0].Value <= maxValues {
		return int(s[0].Value)
	}
	return -1
}

// dims is the known content of a small integer input, element by element
// (numbers, symbols, unknowns).
func (c *ctx) dims(i int) ([]graph.Dim, bool) {
	v := c.n.Input(i)
	if v == nil {
		return nil, false
	}
	d, ok := c.s.values[v]
	return d, ok
}

// ints is the content of a small integer input when every element is a
// known number.
func (c *ctx) ints(i int) ([]int64, bool) {
	d, ok := c.dims(i)
	if !ok {
		return nil, false
	}
	return staticInts(d)
}

// floats is the content of a small constant input of any number type.
func (c *ctx) floats(i int) ([]float32, bool) {
	v := c.n.Input(i)
	if v == nil {
		return nil, false
	}
	t := v.ConstantTensor()
	if t == nil || len(t.Dims) > 1 {
		return nil, false
	}
	if n, err := t.NumElements(); err != nil || n > maxValues {
		return nil, false
	}
	f, err := t.Float32s()
	return f, err == nil
}

// setValues records the known content of output i.
func (c *ctx) setValues(i int, d []graph.Dim) {
	if v := c.n.Output(i); v != nil && len(d) <= maxValues {
		c.s.values[v] = d
	}
}

// attrInts is an integer-list attribute and whether it is present.
func (c *ctx) attrInts(name string) ([]int64, bool) {
	a := c.n.Attr(name)
	if a == nil || a.Type != graph.AttrInts {
		return nil, false
	}
	return a.Ints, true
}

// intsArg is an integer list given as an attribute up to (not including)
// opset since, and as input i from then on: axes, pads, splits.
func (c *ctx) intsArg(name string, since int64, i int) (vals []int64, given, known bool) {
	if c.opset < since {
		v, ok := c.attrInts(name)
		return v, ok, true
	}
	if !c.present(i) {
		return nil, false, true
	}
	v, ok := c.ints(i)
	return v, true, ok
}

func (c *ctx) problem(format string, args ...any) {
	c.s.problem(c.n, format, args...)
}

// same gives output 0 the type of input 0.
func same(c *ctx) []*graph.Type {
	if t := c.typ(0); t != nil && t.Denotation == "" && (t.Elem != graph.Undefined || t.Shape != nil) && !slices.ContainsFunc(t.Shape, denoted) {
		// The input's type itself: types are shared, never changed in
		// place (graph.Type), and a new one per elementwise node was
		// most of what inference allocated.
		return []*graph.Type{t}
	}
	return []*graph.Type{tensor(c.elem(0), cloneShape(c.shape(0)))}
}

// denoted reports whether d carries a denotation, which an inferred dim
// does not (bare).
func denoted(d graph.Dim) bool { return d.Denotation != "" }

// one wraps a single output type.
func one(elem graph.DataType, s graph.Shape) []*graph.Type {
	return []*graph.Type{tensor(elem, s)}
}

func (c *ctx) String() string { return fmt.Sprintf("%s at opset %d", c.n, c.opset) }
