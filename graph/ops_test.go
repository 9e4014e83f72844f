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

	m := parseProto(t, ifModelProto())
	for op, want := range map[string]bool{"If": true, "Identity": true, "Mul": true, "Relu": true, "Add": false} {
		if got := m.Graph.HasOp(op); got != want {
			t.Errorf("model with branches: HasOp(%q) = %v, want %v", op, got, want)
		}
	}
	mustVerify(t, m)
}
