package passes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// fuseGelu recognises GELU written out with Erf or Tanh, how exporters
// before ONNX's Gelu (opset 20) write nn.GELU, and replaces it with one
// node:
//
//	erf:  x · 0.5 · (1 + Erf(x / √2))                       → Gelu
//	tanh: x · 0.5 · (1 + Tanh(√(2/π) · (x + 0.044715·x³)))  → Gelu approximate="tanh"
//
// ONNX's Gelu from opset 20; below 20 only with Context.ORTContrib, as
// ONNX Runtime's com.microsoft Gelu (erf) or FastGelu (tanh), importing
// that domain. Without either the pattern stays: a model for TensorRT
// never gets an operator of ONNX Runtime's.
//
// Match, anchored at the last Mul: the product of x, a float32 scalar 0.5
// and e = Add(E, 1) in any grouping (torch writes (x·e)·0.5; others
// (x·0.5)·e or x·(e·0.5)) and any operand order, where E is Erf(t) with
// t = Div(x, √2) or Mul(x, 1/√2), or Tanh(Mul(√(2/π), Add(x,
// Mul(0.044715, c)))) with c = Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x,
// x), x); constants float32 scalars within 1e-6 of those values (any rank
// up to x's known rank, so no broadcast grows the result), every
// intermediate read only by the next op and returned by no graph, all in
// the last Mul's graph.
//
// Rewrite: the new node produces the last Mul's output value.
var fuseGelu = &Pass{
	Name:   "fuse-gelu",
	Doc:    "replace the erf and tanh forms of GELU with Gelu (opset >= 20), or ORT-only com.microsoft Gelu/FastGelu below",
	Level:  2,
	Form:   LocalRule,
	Shapes: DeclaredShapes | InferredShapes,
	Run:    runFuseGelu,
}

func runFuseGelu(c *Context) (Stats, error) {
	opset := c.Model.OpsetVersion("")
	if opset < 20 && !c.ORTContrib || opset < 1 || !hasOp(c.Model, "Erf", "Tanh") {
		return Stats{}, nil
	}
	shapes, types := c.Shapes(), c.Declared()
	match := func(_ *graphEdit, last *graph.Node) (*gelu, bool) { return matchGelu(last, shapes, types) }
	rewrite := func(_ *graphEdit, p *gelu) (Stats, error) { return p.rewrite(opset) }
	st, err := Rule[*gelu]{OpTypes: []string{"Mul"}, Match: match, Apply: rewrite}.apply(c.Model)
	if err == nil && opset < 20 && st.Added > 0 {
		importDomain(c.Model, msDomain)
	}
	return st, err
}

// Constants of the two forms, and how far a written constant may be from
// them (torch writes the float32 roundings 1.4142135, 0.7978846).
const (
	geluSqrt2     = math.Sqrt2
	geluSqrt2OvPi = 0.7978845608028654 // √(2/π)
	geluCubic     = 0.044715
	geluTol       = 1e-6
)

// gelu is a matched pattern: x, whether it is the tanh form, and its nodes
// (the last Mul last).
type gelu struct {
	x     *graph.Value
	tanh  bool
	nodes []*graph.Node
}

// geluMatcher accumulates the nodes of a pattern being matched and the
// largest rank of its constants.
type geluMatcher struct {
	g         *graph.Graph
	nodes     []*graph.Node
	constRank int
	types     declaredTypes
}

// step returns v's producer when it is one of ops in the graph, read only
// by reader, and records it.
func (m *geluMatcher) step(v *graph.Value, reader *graph.Node, ops ...string) *graph.Node {
	n := producedBy(v, m.g, ops...)
	if n == nil || onlyReader(v) != reader || len(n.Inputs()) == 0 {
		return nil
	}
	m.nodes = append(m.nodes, n)
	return n
}

// constOperand returns the other input of the two-input n when one input
// is a float32 scalar within geluTol of want, recording its rank.
func (m *geluMatcher) constOperand(n *graph.Node, want float64) *graph.Value {
	v, rank, ok := otherOperand(n, want, geluTol)
	if !ok {
		return nil
	}
	m.constRank = max(m.constRank, rank)
	return v
}

func matchGelu(last *graph.Node, shapes valueShapes, types declaredTypes) (*gelu, bool) {
	if !isOp(last, "Mul") || len(last.Inputs()) != 2 || !singleOutput(last) {
		return nil, false
	}
	m := &geluMatcher{g: last.Graph(), nodes: []*graph.Node{last}, types: types}
	// The three factors: one operand of last, and the two of the Mul
	// (read only by last) that gives the other.
	var factors []*graph.Value
	for i := range 2 {
		in, other := last.Input(i), last.Input(1-i)
		if inner := producedBy(in, m.g, "Mul"); inner != nil && onlyReader(in) == last && len(inner.Inputs()) == 2 {
			factors = []*graph.Value{other, inner.Input(0), inner.Input(1)}
			m.nodes = append(m.nodes, inner)
			if p, ok := m.factors(factors, shapes); ok {
				return p, true
			}
			m.nodes = m.nodes[:1]
			m.constRank = 0
		}
	}
	return nil, false
}

// factors matches x, 0.5 and 1 + Erf/Tanh(...) among three values.
func (m *geluMatcher) factors(fs []*graph.Value, shapes valueShapes) (*gelu, bool) {
	half := -1
	for i, v := range fs {
		if c, r, ok := scalarConst(v); ok && c == 0.5 {
			half, m.constRank = i, r
			break
		}
	}
	if half < 0 {
		return nil, false
	}
	rest := append(append([]*graph.Value{}, fs[:half]...), fs[half+1:]...)
	for i := range 2 {
		x, e := rest[i], rest[1-i]
		if x == nil || e == nil {
			continue
		}
		mark, rank := len(m.nodes), m.constRank
		reader := e.Uses()
		if len(reader) != 1 {
			continue
		}
		add := m.step(e, reader[0].Node, "Add")
		if add == nil || len(add.Inputs()) != 2 {
			m.nodes, m.constRank = m.nodes[:mark], rank
			continue
		}
		if act := m.constOperand(add, 1); act != nil {
			if p, ok := m.activation(act, add, x); ok {
				rank, known := shapes.rank(x)
				if !known {
					rank = m.types.minRank(x, 32)
				}
				if rank >= m.constRank {
					p.nodes = m.nodes
					return p, true
				}
			}
		}
		m.nodes, m.constRank = m.nodes[:mark], rank
	}
	return nil, false
}

// activation matches Erf(x/√2) or Tanh(√(2/π)·(x + 0.044715·x³)) as a,
// read only by add.
func (m *geluMatcher) activation(a *graph.Value, add *graph.Node, x *graph.Value) (*gelu, bool) {
	act := m.step(a, add, "Erf", "Tanh")
	if act == nil || len(act.Inputs()) != 1 {
		return nil, false
	}
	if act.OpType == "Erf" {
		t := m.step(act.Input(0), act, "Div", "Mul")
		if t == nil || len(t.Inputs()) != 2 {
			return nil, false
		}
		var y *graph.Value
		if t.OpType == "Div" {
			if c, r, ok := scalarConst(t.Input(1)); ok && math.Abs(c-geluSqrt2) <= geluTol {
				y, m.constRank = t.Input(0), max(m.constRank, r)
			}
		} else {
			y = m.constOperand(t, 1/geluSqrt2)
		}
		return &gelu{x: x}, y == x && x != nil
	}
	u := m.step(act.Input(0), act, "Mul")
	if u == nil {
		return nil, false
	}
	inner := m.constOperand(u, geluSqrt2OvPi)
	sum := m.step(inner, u, "Add")
	if sum == nil || len(sum.Inputs()) != 2 {
		return nil, false
	}
	for i := range 2 {
		if sum.Input(i) != x {
			continue
		}
		mark, rank := len(m.nodes), m.constRank
		if w := m.step(sum.Input(1-i), sum, "Mul"); w != nil && len(w.Inputs()) == 2 {
			if m.cube(m.constOperand(w, geluCubic), w, x) {
				return &gelu{x: x, tanh: true}, true
			}
		}
		m.nodes, m.constRank = m.nodes[:mark], rank
	}
	return nil, false
}

// cube matches c = Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x), read
// only by reader.
func (m *geluMatcher) cube(c *graph.Value, reader *graph.Node, x *graph.Value) bool {
	n := m.step(c, reader, "Pow", "Mul")
	if n == nil || len(n.Inputs()) != 2 {
		return false
	}
	if n.OpType == "Pow" {
		e, r, ok := scalarConst(n.Input(1))
		m.constRank = max(m.constRank, r)
		return ok && e == 3 && n.Input(0) == x
	}
	for i := range 2 {
		if n.Input(i) != x {
			continue
		}
		mark := len(m.nodes)
		if sq := m.step(n.Input(1-i), n, "Mul"); sq != nil && len(sq.Inputs()) == 2 && sq.Input(0) == x && sq.Input(1) == x {
			return true
		}
		m.nodes = m.nodes[:mark]
	}
	return false
}

func (p *gelu) rewrite(opset int64) (Stats, error) {
	last := p.nodes[0]
	g := last.Graph()
	out, err := takeOutput(last)
	if err != nil {
		return Stats{}, err
	}
	op, domain := "Gelu", ""
	switch {
	case opset < 20 && p.tanh:
		op, domain = "FastGelu", msDomain
	case opset < 20:
		domain = msDomain
	}
	n, err := g.InsertNodeBefore(last, op, []*graph.Value{p.x}, []*graph.Value{out})
	if err != nil {
		return Stats{}, errf(last, "%v", err)
	}
	n.Name, n.Domain = last.Name, domain
	if opset >= 20 && p.tanh {
		n.SetAttr(&graph.Attr{Name: "approximate", Type: graph.AttrString, String: []byte("tanh")})
	}
	return Stats{Removed: len(p.nodes), Added: 1}, g.RemoveNodes(p.nodes)
}
