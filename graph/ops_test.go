package graph_test

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// TestOpCensus follows the census through every kind of edit: nodes added,
// inserted in a batch, removed, an op type changed, and a model with
// subgraphs, whose nodes count too. Verify holds it to the nodes after
// each step, and reports an op type written around SetOpType.
func TestOpCensus(t *testing.T) {
	s := newSimple(t)
	has := func(want bool, ops ...string) {
		t.Helper()
		if got := s.g.HasOp(ops...); got != want {
			t.Errorf("HasOp(%q) = %v, want %v", ops, got, want)
		}
		mustVerify(t, s.m)
	}
	has(true, "Relu")
	has(true, "Conv", "Add")
	has(false, "Conv", "Gemm")

	neg := mustValue(t, s.g, "n")
	mustNode(t, s.g, "neg", "Neg", []*graph.Value{s.a}, []*graph.Value{neg})
	has(true, "Neg")

	s.g.BeginBatch()
	sig := mustValue(t, s.g, "sig")
	in, err := s.g.InsertNodeBefore(s.add, "Sigmoid", []*graph.Value{s.a}, []*graph.Value{sig})
	if err != nil {
		t.Fatal(err)
	}
	in.Name = "sig"
	if !s.g.HasOp("Sigmoid") {
		t.Errorf("a node inserted in an open batch is not counted")
	}
	if err := s.g.RemoveNodes([]*graph.Node{in}); err != nil {
		t.Fatal(err)
	}
	s.g.EndBatch()
	has(false, "Sigmoid")

	s.add.SetOpType("Mul")
	has(false, "Add")
	has(true, "Mul")

	if err := s.g.RemoveNode(s.g.Nodes[len(s.g.Nodes)-1]); err != nil { // neg
		t.Fatal(err)
	}
	has(false, "Neg")

	s.relu.OpType = "Sigmoid" // around SetOpType: the census is wrong
	wantVerifyErr(t, s.m, "op census counts 1 Relu nodes, the graphs have 0")

	// Walks: a model the census knows has no subgraphs is walked without
	// looking at its nodes, until a node takes a graph attribute.
	s = newSimple(t)
	walked := func() (n int) {
		s.g.Walk(func(*graph.Graph) { n++ })
		return n
	}
	if s.g.HasOp("If") || walked() != 1 {
		t.Fatalf("a model without subgraphs walks %d graphs", walked())
	}
	sub := graph.NewGraph("body")
	s.add.SetAttr(&graph.Attr{Name: "body", Type: graph.AttrGraph, Graph: sub})
	sub.Parent, sub.Owner = s.g, s.add
	if got := walked(); got != 2 {
		t.Errorf("after SetAttr of a graph, Walk visits %d graphs, want 2", got)
	}
	s.g.HasOp("Relu") // the census again
	behind := graph.NewGraph("behind")
	behind.Parent, behind.Owner = s.g, s.relu
	s.relu.Attrs = append(s.relu.Attrs, &graph.Attr{Name: "g", Type: graph.AttrGraph, Graph: behind})
	wantVerifyErr(t, s.m, "op census counts 1 nodes holding subgraphs, the graphs have 2")

	// The same behind the back of a census that knows of no subgraph: its
	// own walks would skip the new one, Verify's count does not.
	s = newSimple(t)
	s.g.HasOp("Relu")
	hidden := graph.NewGraph("hidden")
	hidden.Parent, hidden.Owner = s.g, s.relu
	s.relu.Attrs = append(s.relu.Attrs, &graph.Attr{Name: "g", Type: graph.AttrGraph, Graph: hidden})
	wantVerifyErr(t, s.m, "op census counts 0 nodes holding subgraphs, the graphs have 1")

	m := parseProto(t, ifModelProto())
	for op, want := range map[string]bool{"If": true, "Identity": true, "Mul": true, "Relu": true, "Add": false} {
		if got := m.Graph.HasOp(op); got != want {
			t.Errorf("model with branches: HasOp(%q) = %v, want %v", op, got, want)
		}
	}
	mustVerify(t, m)
}
