package passes

import (
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

func transposeNode(b *cleanupModel, name string, in *graph.Value, perm ...int64) *graph.Node {
	n := b.node(name, "Transpose", in)
	if perm != nil {
		n.SetAttr(clInts("perm", perm...))
	}
	return n
}

func TestMergeTransposesCancel(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 1, 2, 3, 4)
	relu := b.node("relu", "Relu", x)
	t1 := transposeNode(b, "nhwc", relu.Output(0), 0, 2, 3, 1)
	t2 := transposeNode(b, "nchw", t1.Output(0), 0, 3, 1, 2)
	neg := b.node("neg", "Neg", t2.Output(0))
	b.output(neg.Output(0), graph.Float, 1, 2, 3, 4)
	clRewrites(t, b.Model, mergeTransposes, Stats{Removed: 2})
	clWantOps(t, b.Graph, map[string]int{"Relu": 1, "Neg": 1})
	if neg.Input(0) != relu.Output(0) {
		t.Fatalf("neg reads %q", neg.Input(0).Name)
	}
}

func TestMergeTransposesCompose(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3, 4, 5)
	t1 := transposeNode(b, "t1", x, 1, 0, 2, 3)
	t2 := transposeNode(b, "t2", t1.Output(0), 0, 2, 3, 1)
	t3 := transposeNode(b, "t3", t2.Output(0)) // no perm: reverse
	b.output(t3.Output(0), graph.Float, 2, 5, 4, 3)
	clRewrites(t, b.Model, mergeTransposes, Stats{Removed: 2, Rewritten: 2})
	clWantOps(t, b.Graph, map[string]int{"Transpose": 1})
	// x[a,b,c,d] -> t1 [b,a,c,d] -> t2 [b,c,d,a] -> reverse [a,d,c,b].
	if got := t3.AttrInts("perm"); t3.Input(0) != x || !slices.Equal(got, []int64{0, 3, 2, 1}) {
		t.Fatalf("t3 reads %q with perm %v, want x with [0 3 2 1]", t3.Input(0).Name, got)
	}
	clWantOutputs(t, b.Graph, "t3_out")
}

func TestMergeTransposesLeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel, x *graph.Value){
		"first has another reader": func(b *cleanupModel, x *graph.Value) {
			t1 := transposeNode(b, "t1", x, 1, 0)
			t2 := transposeNode(b, "t2", t1.Output(0), 1, 0)
			b.output(t2.Output(0), graph.Float, 2, 3)
			neg := b.node("neg", "Neg", t1.Output(0))
			b.output(neg.Output(0), graph.Float, 3, 2)
		},
		"first is an output": func(b *cleanupModel, x *graph.Value) {
			t1 := transposeNode(b, "t1", x, 1, 0)
			b.output(t1.Output(0), graph.Float, 3, 2)
			t2 := transposeNode(b, "t2", t1.Output(0), 1, 0)
			b.output(t2.Output(0), graph.Float, 2, 3)
		},
		"perms of different ranks": func(b *cleanupModel, x *graph.Value) {
			t1 := transposeNode(b, "t1", x, 1, 0)
			t2 := transposeNode(b, "t2", t1.Output(0), 0, 2, 1)
			b.output(t2.Output(0), graph.Float)
			t2.Output(0).Type.Shape = nil
		},
		"not a permutation": func(b *cleanupModel, x *graph.Value) {
			t1 := transposeNode(b, "t1", x, 1, 1)
			t2 := transposeNode(b, "t2", t1.Output(0), 1, 0)
			b.output(t2.Output(0), graph.Float)
			t2.Output(0).Type.Shape = nil
		},
		"no perms and unknown rank": func(b *cleanupModel, x *graph.Value) {
			x.Type.Shape = nil
			t1 := transposeNode(b, "t1", x)
			t2 := transposeNode(b, "t2", t1.Output(0))
			b.output(t2.Output(0), graph.Float)
			t2.Output(0).Type.Shape = nil
		},
	}
	clAllUnchanged(t, mergeTransposes, []int64{2, 3}, cases)
}

// TestMergeTransposesKeepsInterface: a cancelling pair between a graph
// input and a graph output leaves one identity Transpose, since the input
// cannot take the output's name.
func TestMergeTransposesKeepsInterface(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	t1 := transposeNode(b, "t1", x, 1, 0)
	t2 := transposeNode(b, "t2", t1.Output(0), 1, 0)
	b.output(t2.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, mergeTransposes, Stats{Removed: 1, Rewritten: 1})
	if len(b.Graph.Nodes) != 1 || !slices.Equal(t2.AttrInts("perm"), []int64{0, 1}) || t2.Input(0) != x {
		t.Fatalf("want one identity Transpose of x")
	}
	clWantOutputs(t, b.Graph, "t2_out")
}
