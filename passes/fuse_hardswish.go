package passes

import (
	"github.com/optc-dev/optc/graph"
)

// fuseHardSwish recognises HardSwish written out as four ops,
// x * Clip(x + 3, 0, 6) / 6 (how PaddleOCR's exporter writes it), and
// replaces them with one HardSwish (opset 14 on) or with
// x * HardSigmoid(x) (alpha 1/6, beta 0.5; opsets 6 to 13): fewer ops,
// and kernels runtimes fuse further.
//
// Match: Div(Mul(x, c), 6) or Mul(Mul(x, c), 1/6) where c =
// Clip(Add(x, 3)) with bounds 0 and 6 (attributes before opset 11,
// constant inputs after), every constant a float32 scalar (any rank, each
// at most x's known rank, so the result's shape is x's), the Add, Clip and
// inner Mul in the same graph, each result read only by the next op and
// returned by no graph. Commutative operands may come in either order.
//
// Rewrite: the new nodes produce the last op's output value, so its name
// and readers stay.
var fuseHardSwish = &Pass{
	Name:   "fuse-hardswish",
	Doc:    "replace x*Clip(x+3,0,6)/6 with HardSwish (opset >= 14) or x*HardSigmoid(x)",
	Level:  2,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runFuseHardSwish,
}

func runFuseHardSwish(c *Context) (Stats, error) {
	opset := c.Model.OpsetVersion("")
	if opset < 6 {
		return Stats{}, nil // HardSigmoid as used here is opset 6's
	}
	types := c.Declared()
	match := func(_ *graphEdit, last *graph.Node) (*hardSwish, bool) { return matchHardSwish(last, opset, types) }
	rewrite := func(_ *graphEdit, p *hardSwish) (Stats, error) { return p.rewrite(opset) }
	return Rule[*hardSwish]{OpTypes: []string{"Div", "Mul"}, Match: match, Apply: rewrite}.apply(c.Model)
}

// hardSwish is a matched pattern: x and the Add, Clip, Mul and last
// (Div or Mul) nodes.
type hardSwish struct {
	x     *graph.Value
	nodes []*graph.Node
}

func matchHardSwish(last *graph.Node, opset int64, types declaredTypes) (*hardSwish, bool) {
	g := last.Graph()
	var prod *graph.Value
	var rank int // the rank of the constant 6 or 1/6
	switch {
	case isOp(last, "Div") && len(last.Inputs()) == 2:
		c, r, ok := scalarConst(last.Input(1))
		if !ok || c != 6 {
			return nil, false
		}
		prod, rank = last.Input(0), r
	case isOp(last, "Mul"):
		var ok bool
		if prod, rank, ok = otherOperand(last, 1.0/6, 1e-7); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	mul := producedBy(prod, g, "Mul")
	if mul == nil || onlyReader(prod) != last || len(mul.Inputs()) != 2 {
		return nil, false
	}
	for i := range 2 {
		x, c := mul.Input(i), mul.Input(1-i)
		clip := producedBy(c, g, "Clip")
		if x == nil || clip == nil || onlyReader(c) != mul {
			continue
		}
		if lo, hi, ok := clipBounds(clip, opset); !ok || lo != 0 || hi != 6 {
			continue
		}
		a := clip.Input(0)
		add := producedBy(a, g, "Add")
		if add == nil || onlyReader(a) != clip {
			continue
		}
		y, rank3, ok := otherOperand(add, 3, 0)
		if !ok || y != x || types.minRank(x, 32) < max(rank, rank3) {
			continue
		}
		return &hardSwish{x: x, nodes: []*graph.Node{add, clip, mul, last}}, true
	}
	return nil, false
}

func (p *hardSwish) rewrite(opset int64) (Stats, error) {
	last := p.nodes[len(p.nodes)-1]
	g := last.Graph()
	out, err := takeOutput(last)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Removed: len(p.nodes)}
	if opset >= 14 {
		n, err := g.InsertNodeBefore(last, "HardSwish", []*graph.Value{p.x}, []*graph.Value{out})
		if err != nil {
			return Stats{}, err
		}
		n.Name = last.Name
		st.Added = 1
	} else {
		hs, err := g.NewValue(g.UniqueName(out.Name + "_hardsigmoid"))
		if err != nil {
			return Stats{}, err
		}
		sig, err := g.InsertNodeBefore(last, "HardSigmoid", []*graph.Value{p.x}, []*graph.Value{hs})
		if err != nil {
			return Stats{}, err
		}
		if last.Name != "" {
			sig.Name = uniqueNodeName(g, last.Name+"_hardsigmoid")
		}
		sig.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 1.0 / 6})
		sig.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: 0.5})
		mul, err := g.InsertNodeBefore(last, "Mul", []*graph.Value{p.x, hs}, []*graph.Value{out})
		if err != nil {
			return Stats{}, err
		}
		mul.Name = last.Name
		st.Added = 2
	}
	return st, g.RemoveNodes(p.nodes)
}
