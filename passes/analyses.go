package passes

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
)

// The analyses a pass reads of value types, handed out by the driver
// (Context.Declared, Context.Shapes) to a pass that declares them in
// Pass.Shapes: another's asking fails its run, naming it. This file and
// the shape provider (infer_shapes.go) are the only code of the package
// that reads a value's declared type (TestTypesThroughTheDriver), so a
// pass cannot read one without asking.

// Declared is the types declared on the current model's values (and
// constants' own). The driver hands it out only to a pass that declares
// DeclaredShapes.
func (c *Context) Declared() declaredTypes {
	c.ask(DeclaredShapes, "declared types (Context.Declared)")
	return declaredTypes{}
}

// Shapes is the inferred types and shapes of the current model's values
// (nil where inference failed), computed once until a pass changes the
// model (the driver then calls shapesChanged). The driver hands it out
// only to a pass that declares InferredShapes.
func (c *Context) Shapes() valueShapes {
	c.ask(InferredShapes, "inferred shapes (Context.Shapes)")
	if !c.shapesValid {
		c.shapes, c.shapesValid = inferShapesOf(c.Model), true
	}
	return c.shapes
}

// runPass runs p as the driver does: handing it only the analyses it
// declares, and failing its run when it asked for another.
func (c *Context) runPass(p *Pass) (Stats, error) {
	c.running, c.undeclared = p, ""
	st, err := p.Run(c)
	c.running = nil
	if err != nil {
		return st, fmt.Errorf("pass %s: %w", p.Name, err)
	}
	if c.undeclared != "" {
		return st, fmt.Errorf("pass %s asked the driver for %s without declaring it in its table entry (Pass.Shapes): a bug in optc", p.Name, c.undeclared)
	}
	return st, nil
}

// ask records that the running pass asked for an analysis, and the first
// one it asked for without declaring it (the driver fails its run).
func (c *Context) ask(a ShapeUse, what string) {
	p := c.running
	if p == nil {
		return
	}
	if p.Shapes&a == 0 && c.undeclared == "" {
		c.undeclared = what
	}
	if analysisAsked != nil {
		analysisAsked(p, a)
	}
}

// analysisAsked, when set (by the package's tests), hears every analysis
// a running pass asks for: the tests check that each pass asks for what
// it declares.
var analysisAsked func(p *Pass, a ShapeUse)

// shapesChanged drops the inference Shapes keeps.
func (c *Context) shapesChanged() { c.shapes, c.shapesValid = valueShapes{}, false }

// declaredTypes reads the types declared on values, and constants' own
// dims and element types.
type declaredTypes struct{}

// typ is v's declared type (nil when none, or no v).
func (declaredTypes) typ(v *graph.Value) *graph.Type {
	if v == nil {
		return nil
	}
	return v.Type
}

// admits reports whether t fits v's declared type (any tensor fits a
// value with none).
func (declaredTypes) admits(v *graph.Value, t *graph.Tensor) bool { return v.Type.Admits(t) }

// floatTensor reports whether v is declared a float32 tensor.
func (declaredTypes) floatTensor(v *graph.Value) bool {
	return v.Type != nil && v.Type.Kind == graph.KindTensor && v.Type.Elem == graph.Float
}

// dims returns v's dims, -1 for an unknown or symbolic one, from its
// constant contents or its declared tensor type; false when even the rank
// is unknown.
func (declaredTypes) dims(v *graph.Value) ([]int64, bool) {
	if v == nil {
		return nil, false
	}
	if t := v.ConstantTensor(); t != nil {
		return t.Dims, true
	}
	if v.Type == nil || v.Type.Kind != graph.KindTensor || v.Type.Shape == nil {
		return nil, false
	}
	return v.Type.Shape.Dims(), true
}

// elem returns v's element type from its constant contents or its
// declared tensor type.
func (declaredTypes) elem(v *graph.Value) (graph.DataType, bool) {
	if v == nil {
		return graph.Undefined, false
	}
	if t := v.ConstantTensor(); t != nil {
		return t.DType, true
	}
	if v.Type == nil || v.Type.Kind != graph.KindTensor || v.Type.Elem == graph.Undefined {
		return graph.Undefined, false
	}
	return v.Type.Elem, true
}

// rank returns v's rank when it is certain: a declared shape, a
// constant, or the output of an op whose result rank is fixed (Flatten and
// Gemm give 2-D results). ok is false when unknown.
func (declaredTypes) rank(v *graph.Value) (int, bool) {
	if v.Type != nil && v.Type.Kind == graph.KindTensor && v.Type.Shape != nil {
		return len(v.Type.Shape), true
	}
	if t := v.ConstantTensor(); t != nil {
		return len(t.Dims), true
	}
	if p := v.Producer(); isOp(p, "Flatten", "Gemm") && p.Output(0) == v {
		return 2, true
	}
	return 0, false
}

// minRank returns a lower bound of v's rank (0 when nothing is known),
// from declared shapes and constants, following rank-preserving and
// broadcasting ops back up to depth steps.
func (d declaredTypes) minRank(v *graph.Value, depth int) int {
	if v == nil {
		return 0
	}
	if r, ok := d.rank(v); ok {
		return r
	}
	p := v.Producer()
	if p == nil || depth <= 0 || p.Output(0) != v {
		return 0
	}
	switch {
	case isOp(p, spatialOps...):
		return 3
	case isOp(p, rankKeepingOps...):
		return d.minRank(p.Input(0), depth-1)
	case isOp(p, broadcastOps...):
		r := 0
		for _, in := range p.Inputs() {
			r = max(r, d.minRank(in, depth-1))
		}
		return r
	}
	return 0
}

// valueShapes is what shape inference knows of a model's values, for the
// fusions that need static dims (nil when inference failed: then only
// declarations and constants count, which the inference starts from).
// Take it before rewriting: values a rewrite keeps keep their shapes.
type valueShapes struct{ *graph.ValueTable[*graph.Type] }

func inferShapesOf(m *graph.Model) valueShapes {
	res, err := shapes.Infer(m)
	if err != nil {
		return valueShapes{}
	}
	return valueShapes{res.Types}
}

// dims returns v's dims, -1 where not static; ok is false when even the
// rank is unknown.
func (s valueShapes) dims(v *graph.Value) ([]int64, bool) {
	if t := s.Get(v); t != nil && t.Kind == graph.KindTensor && t.Shape != nil {
		return t.Shape.Dims(), true
	}
	return declaredTypes{}.dims(v)
}

// rank returns v's rank when known.
func (s valueShapes) rank(v *graph.Value) (int, bool) {
	d, ok := s.dims(v)
	return len(d), ok
}
