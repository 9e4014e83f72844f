package passes

import (
	"github.com/optc-dev/optc/graph"
)

// fuseSkipLayerNorm folds the residual Add before a LayerNormalization
// into ONNX Runtime's com.microsoft SkipLayerNormalization, one kernel for
// both, as Transformer encoders write them (post-norm BERT: LN(x + f(x));
// pre-norm ViT: the sum also feeds the next residual). ONNX has no such
// operator, so the pass runs only with Context.ORTContrib. It follows
// fuse-layernorm in the table, so that LayerNorms that pass wrote fuse in
// the same round.
//
// Match, anchored at the LayerNormalization (default domain): float32
// input; axis the last one (-1, or rank-1), stash_type float, only output
// Y used; scale (and bias, when given) float32 constant vectors of the
// last dim; its input an Add of the same graph (one output, no attributes)
// whose two operands have provably the same shape, rank 3 (static dims
// equal, symbolic dims with the same name; no broadcast), the last dim
// static and equal to the scale's length. When the sum has other readers
// or is returned, SkipLayerNormalization's fourth output
// (input_skip_bias_sum) produces it.
//
// Rewrite: SkipLayerNormalization(a, b, scale[, bias]) with the LN's
// epsilon, producing the LN's output value (and the Add's as output 3
// where needed); both nodes go; the com.microsoft opset is imported.
var fuseSkipLayerNorm = &Pass{
	Name:   "fuse-skip-layernorm",
	Doc:    "fold the residual Add before LayerNormalization into com.microsoft SkipLayerNormalization (ORT-only output)",
	Level:  2,
	Form:   LocalRule,
	Shapes: InferredShapes,
	After: []Follows{
		{"fuse-layernorm", "it folds the Add before a LayerNormalization, which fuse-layernorm makes from the decomposed ReduceMean/Sub/Pow form"},
	},
	Run: runFuseSkipLayerNorm,
}

func runFuseSkipLayerNorm(c *Context) (Stats, error) {
	if !c.ORTContrib || !hasOp(c.Model, "LayerNormalization") {
		return Stats{}, nil
	}
	shapes := c.Shapes()
	match := func(_ *graphEdit, ln *graph.Node) (*skipLayerNorm, bool) { return matchSkipLayerNorm(ln, shapes) }
	st, err := Rule[*skipLayerNorm]{OpTypes: []string{"LayerNormalization"}, Match: match, Apply: func(_ *graphEdit, p *skipLayerNorm) (Stats, error) { return p.rewrite() }}.apply(c.Model)
	if err == nil && st.Added > 0 {
		importDomain(c.Model, msDomain)
	}
	return st, err
}

// skipLayerNorm is a matched Add -> LayerNormalization pair.
type skipLayerNorm struct {
	add, ln *graph.Node
	// sumUsed says the Add's result has readers besides the LN.
	sumUsed bool
}

func matchSkipLayerNorm(ln *graph.Node, shapes valueShapes) (*skipLayerNorm, bool) {
	if !isOp(ln, "LayerNormalization") || !singleOutput(ln) || len(ln.Inputs()) < 2 || len(ln.Inputs()) > 3 ||
		ln.AttrInt("stash_type", 1) != 1 {
		return nil, false
	}
	g := ln.Graph()
	sum := ln.Input(0)
	add := producedBy(sum, g, "Add")
	if add == nil || len(add.Inputs()) != 2 || len(add.Attrs) != 0 || add.Input(0) == nil || add.Input(1) == nil {
		return nil, false
	}
	a, b := shapes.Get(add.Input(0)), shapes.Get(add.Input(1))
	if a == nil || b == nil || a.Kind != graph.KindTensor || b.Kind != graph.KindTensor ||
		a.Elem != graph.Float || b.Elem != graph.Float || len(a.Shape) != 3 || len(b.Shape) != 3 {
		return nil, false
	}
	for i := range a.Shape {
		da, db := a.Shape[i], b.Shape[i]
		same := da.Kind == graph.DimStatic && db.Kind == graph.DimStatic && da.Value == db.Value ||
			da.Kind == graph.DimSymbolic && db.Kind == graph.DimSymbolic && da.Param != "" && da.Param == db.Param
		if !same {
			return nil, false
		}
	}
	hidden := a.Shape[2]
	if hidden.Kind != graph.DimStatic {
		return nil, false
	}
	if axis := ln.AttrInt("axis", -1); axis != -1 && axis != 2 {
		return nil, false
	}
	if _, ok := vectorConst(ln.Input(1), hidden.Value); !ok {
		return nil, false
	}
	if beta := ln.Input(2); beta != nil {
		if _, ok := vectorConst(beta, hidden.Value); !ok {
			return nil, false
		}
	}
	p := &skipLayerNorm{add: add, ln: ln, sumUsed: sum.IsReturned() || len(sum.Uses()) > 1}
	return p, true
}

func (p *skipLayerNorm) rewrite() (Stats, error) {
	g := p.ln.Graph()
	out, err := takeOutput(p.ln)
	if err != nil {
		return Stats{}, err
	}
	outs := []*graph.Value{out}
	if p.sumUsed {
		sum, err := takeOutput(p.add)
		if err != nil {
			return Stats{}, err
		}
		outs = []*graph.Value{out, nil, nil, sum}
	}
	ins := []*graph.Value{p.add.Input(0), p.add.Input(1), p.ln.Input(1)}
	if beta := p.ln.Input(2); beta != nil {
		ins = append(ins, beta)
	}
	// Insert before the Add: the sum's other readers may come before the LN.
	n, err := g.InsertNodeBefore(p.add, "SkipLayerNormalization", ins, outs)
	if err != nil {
		return Stats{}, errf(p.ln, "%v", err)
	}
	n.Name, n.Domain = p.ln.Name, msDomain
	n.SetAttr(&graph.Attr{Name: "epsilon", Type: graph.AttrFloat, Float: p.ln.AttrFloat("epsilon", 1e-5)})
	if err := g.RemoveNodes([]*graph.Node{p.add, p.ln}); err != nil {
		return Stats{}, errf(n, "%v", err)
	}
	// Scale and bias from Constant nodes placed after the Add move up.
	for _, v := range ins[2:] {
		if v.Producer() != nil {
			if err := g.TopoSort(); err != nil {
				return Stats{}, errf(n, "%v", err)
			}
			break
		}
	}
	return Stats{Removed: 2, Added: 1}, nil
}
