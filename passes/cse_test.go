package passes

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testgraph"
)

func TestEliminateCSE(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	r1 := b.node("r1", "Relu", x)
	r2 := b.node("r2", "Relu", x)
	c1 := b.constant("c1", testgraph.Float32Tensor(t, []int64{3}, 1, 2, 3))
	c2 := b.constant("c2", testgraph.Float32Tensor(t, []int64{3}, 1, 2, 3))
	a1 := b.node("a1", "Add", r1.Output(0), c1)
	a2 := b.node("a2", "Add", r2.Output(0), c2) // a twin once r2 and c2 are merged
	l1 := b.node("l1", "LeakyRelu", a1.Output(0))
	l1.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 0.2})
	l2 := b.node("l2", "LeakyRelu", a2.Output(0))
	l2.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 0.2})
	sum := b.node("sum", "Sum", l1.Output(0), l2.Output(0))
	b.output(sum.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, eliminateCSE, Stats{Removed: 4})
	clWantOps(t, b.Graph, map[string]int{"Relu": 1, "Constant": 1, "Add": 1, "LeakyRelu": 1, "Sum": 1})
	if sum.Input(0) != l1.Output(0) || sum.Input(1) != l1.Output(0) {
		t.Fatalf("sum should read l1 twice")
	}
}

// TestEliminateCSEAttrOrder merges nodes whose attributes differ only in
// order, and keeps the twin whose output is a graph output's producer.
func TestEliminateCSEAttrOrder(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 1, 2, 4, 4)
	p1 := b.node("p1", "MaxPool", x)
	p1.SetAttr(clInts("kernel_shape", 2, 2))
	p1.SetAttr(clInts("strides", 2, 2))
	b.output(p1.Output(0), graph.Float, 1, 2, 2, 2)
	p2 := b.node("p2", "MaxPool", x)
	p2.SetAttr(clInts("strides", 2, 2))
	p2.SetAttr(clInts("kernel_shape", 2, 2))
	neg := b.node("neg", "Neg", p2.Output(0))
	b.output(neg.Output(0), graph.Float, 1, 2, 2, 2)
	clRewrites(t, b.Model, eliminateCSE, Stats{Removed: 1})
	if neg.Input(0) != p1.Output(0) {
		t.Fatalf("neg reads %q", neg.Input(0).Name)
	}
	clWantOutputs(t, b.Graph, "p1_out", "neg_out")
}

func TestEliminateCSELeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel, x *graph.Value){
		"different attributes": func(b *cleanupModel, x *graph.Value) {
			for i, alpha := range []float32{0.1, 0.2} {
				n := b.node([]string{"l1", "l2"}[i], "LeakyRelu", x)
				n.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: alpha})
				b.output(n.Output(0), graph.Float, 2, 3)
			}
		},
		"attribute present and defaulted": func(b *cleanupModel, x *graph.Value) {
			n := b.node("l1", "LeakyRelu", x)
			n.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 0.01})
			b.output(n.Output(0), graph.Float, 2, 3)
			b.output(b.node("l2", "LeakyRelu", x).Output(0), graph.Float, 2, 3)
		},
		"different inputs": func(b *cleanupModel, x *graph.Value) {
			b.output(b.node("a1", "Add", x, b.f32("w1", []int64{3}, 1, 2, 3)).Output(0), graph.Float, 2, 3)
			b.output(b.node("a2", "Add", x, b.f32("w2", []int64{3}, 1, 2, 4)).Output(0), graph.Float, 2, 3)
		},
		"input order": func(b *cleanupModel, x *graph.Value) {
			r := b.node("r", "Relu", x)
			b.output(b.node("s1", "Sub", x, r.Output(0)).Output(0), graph.Float, 2, 3)
			b.output(b.node("s2", "Sub", r.Output(0), x).Output(0), graph.Float, 2, 3)
		},
		"different constants": func(b *cleanupModel, x *graph.Value) {
			c1 := b.constant("c1", testgraph.Float32Tensor(b.T, []int64{3}, 1, 2, 3))
			c2 := b.constant("c2", testgraph.Float32Tensor(b.T, []int64{1, 3}, 1, 2, 3))
			b.output(b.node("a1", "Add", x, c1).Output(0), graph.Float, 2, 3)
			b.output(b.node("a2", "Add", x, c2).Output(0), graph.Float, 2, 3)
		},
		"random": func(b *cleanupModel, x *graph.Value) {
			b.output(b.node("n1", "RandomNormalLike", x).Output(0), graph.Float, 2, 3)
			b.output(b.node("n2", "RandomNormalLike", x).Output(0), graph.Float, 2, 3)
		},
		"later twin is a graph output": func(b *cleanupModel, x *graph.Value) {
			r1 := b.node("r1", "Relu", x)
			b.output(b.node("neg", "Neg", r1.Output(0)).Output(0), graph.Float, 2, 3)
			b.output(b.node("r2", "Relu", x).Output(0), graph.Float, 2, 3)
		},
		"other domain": func(b *cleanupModel, x *graph.Value) {
			b.Model.Opsets = append(b.Model.Opsets, graph.OpsetImport{Domain: "com.microsoft", Version: 1})
			for _, name := range []string{"g1", "g2"} {
				n := b.node(name, "Gelu", x)
				n.Domain = "com.microsoft"
				b.output(n.Output(0), graph.Float, 2, 3)
			}
		},
		"subgraphs": func(b *cleanupModel, x *graph.Value) {
			cond := b.input("cond", graph.Bool)
			for _, name := range []string{"if1", "if2"} {
				ifn := b.ifNode(name, cond, func(sg *graph.Graph, br string) *graph.Value {
					return b.op(sg, name+br, "Relu", []*graph.Value{x}, name+br+"_out").Output(0)
				})
				b.output(ifn.Output(0), graph.Float, 2, 3)
			}
		},
	}
	clAllUnchanged(t, eliminateCSE, []int64{2, 3}, cases)
}

// TestEliminateCSEInBranch merges twins inside a subgraph, including
// twins reading an outer value.
func TestEliminateCSEInBranch(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	ifn := b.ifNode("if", b.input("cond", graph.Bool), func(sg *graph.Graph, br string) *graph.Value {
		r1 := b.op(sg, br+"_r1", "Relu", []*graph.Value{x}, br+"_r1")
		r2 := b.op(sg, br+"_r2", "Relu", []*graph.Value{x}, br+"_r2")
		return b.op(sg, br+"_add", "Add", []*graph.Value{r1.Output(0), r2.Output(0)}, br+"_out").Output(0)
	})
	b.output(ifn.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, eliminateCSE, Stats{Removed: 2})
}

// TestEliminateCSEMultipleOutputs rewires every output of a twin.
func TestEliminateCSEMultipleOutputs(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 4)
	split := b.i64("split", 1, 3)
	s1 := b.op(b.Graph, "s1", "Split", []*graph.Value{x, split}, "s1_a", "s1_b")
	s2 := b.op(b.Graph, "s2", "Split", []*graph.Value{x, split}, "s2_a", "s2_b")
	for _, n := range []*graph.Node{s1, s2} {
		n.SetAttr(clInt("axis", 1))
	}
	a := b.node("a", "Neg", s2.Output(0))
	c := b.node("c", "Concat", s1.Output(1), s2.Output(1), a.Output(0))
	c.SetAttr(clInt("axis", 1))
	b.output(c.Output(0), graph.Float, 2, 7)
	clRewrites(t, b.Model, eliminateCSE, Stats{Removed: 1})
	if a.Input(0) != s1.Output(0) || c.Input(1) != s1.Output(1) {
		t.Fatalf("readers of s2 should read s1")
	}
}

// TestEliminateCSEWidelyRead merges twins whose only input is read by more
// nodes than the scan looks through (they go by key), and twins found by
// the scan merge into the first of them in graph order.
func TestEliminateCSEWidelyRead(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	var negs []*graph.Node
	for i := range cseScanUses + 1 {
		negs = append(negs, b.node(fmt.Sprintf("n%d", i), "Neg", x))
	}
	// Three twins reading the first Neg's output (one reader each, so
	// the scan finds them).
	s1 := b.node("s1", "Sigmoid", negs[0].Output(0))
	s2 := b.node("s2", "Sigmoid", negs[0].Output(0))
	s3 := b.node("s3", "Sigmoid", negs[0].Output(0))
	sum := b.node("sum", "Sum", s1.Output(0), s2.Output(0), s3.Output(0))
	b.output(sum.Output(0), graph.Float, 2, 3)
	// Every Neg merges into n0 (by key), and s2, s3 into s1 (by scan).
	clRewrites(t, b.Model, eliminateCSE, Stats{Removed: cseScanUses + 2})
	clWantOps(t, b.Graph, map[string]int{"Neg": 1, "Sigmoid": 1, "Sum": 1})
	for i := range 3 {
		if sum.Input(i) != s1.Output(0) {
			t.Fatalf("sum input %d reads %q, want s1's output", i, sum.Input(i).Name)
		}
	}
}
