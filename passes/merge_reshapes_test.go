package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestMergeReshapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(b *cleanupModel, x *graph.Value) *graph.Node
		shape []int64
		allow bool
	}{
		{"reshape", func(b *cleanupModel, x *graph.Value) *graph.Node {
			return b.node("first", "Reshape", x, b.i64("s1", 6, 4))
		}, []int64{3, -1}, false},
		{"reshape by a computed shape", func(b *cleanupModel, x *graph.Value) *graph.Node {
			shape := b.node("shape", "Shape", x)
			return b.node("first", "Reshape", x, shape.Output(0))
		}, []int64{4, 6}, false},
		{"flatten", func(b *cleanupModel, x *graph.Value) *graph.Node {
			n := b.node("first", "Flatten", x)
			n.SetAttr(clInt("axis", 2))
			return n
		}, []int64{24}, false},
		{"squeeze", func(b *cleanupModel, x *graph.Value) *graph.Node {
			u := b.node("unsq", "Unsqueeze", x, b.i64("ax", 0))
			return b.node("first", "Squeeze", u.Output(0), b.i64("ax2", 0))
		}, []int64{2, 12}, false},
		{"unsqueeze", func(b *cleanupModel, x *graph.Value) *graph.Node {
			return b.node("first", "Unsqueeze", x, b.i64("ax", 1))
		}, []int64{2, 3, 4}, false},
		{"allowzero keeps zeros literal", func(b *cleanupModel, x *graph.Value) *graph.Node {
			return b.node("first", "Reshape", x, b.i64("s1", 6, 4))
		}, []int64{1, 24}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, 14)
			x := b.input("x", graph.Float, 2, 3, 4)
			relu := b.node("relu", "Relu", x)
			first := tc.first(b, relu.Output(0))
			second := b.node("second", "Reshape", first.Output(0), b.i64("s2", tc.shape...))
			if tc.allow {
				second.SetAttr(clInt("allowzero", 1))
			}
			b.output(second.Output(0), graph.Float)
			second.Output(0).Type.Shape = nil
			want := first.Input(0)
			clRewrites(t, b.Model, mergeReshapes, Stats{Removed: 1, Rewritten: 1})
			if second.Input(0) != want {
				t.Fatalf("second reads %q", second.Input(0).Name)
			}
		})
	}
}

func TestMergeReshapesChain(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3, 4)
	r1 := b.node("r1", "Reshape", x, b.i64("s1", 6, 4))
	r2 := b.node("r2", "Reshape", r1.Output(0), b.i64("s2", 4, 6))
	r3 := b.node("r3", "Reshape", r2.Output(0), b.i64("s3", 24))
	b.output(r3.Output(0), graph.Float, 24)
	clRewrites(t, b.Model, mergeReshapes, Stats{Removed: 2, Rewritten: 2})
	if len(b.Graph.Nodes) != 1 || r3.Input(0) != x {
		t.Fatalf("want one Reshape of x, have %d nodes", len(b.Graph.Nodes))
	}
}

func TestMergeReshapesLeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel, x *graph.Value){
		"second copies a dim with 0": func(b *cleanupModel, x *graph.Value) {
			r1 := b.node("r1", "Reshape", x, b.i64("s1", 6, 4))
			r2 := b.node("r2", "Reshape", r1.Output(0), b.i64("s2", 0, -1))
			b.output(r2.Output(0), graph.Float, 6, 4)
		},
		"second shape computed": func(b *cleanupModel, x *graph.Value) {
			r1 := b.node("r1", "Reshape", x, b.i64("s1", 6, 4))
			r2 := b.node("r2", "Reshape", r1.Output(0), b.node("shape", "Shape", r1.Output(0)).Output(0))
			b.output(r2.Output(0), graph.Float, 6, 4)
		},
		"first has another reader": func(b *cleanupModel, x *graph.Value) {
			r1 := b.node("r1", "Reshape", x, b.i64("s1", 6, 4))
			r2 := b.node("r2", "Reshape", r1.Output(0), b.i64("s2", 4, 6))
			b.output(r2.Output(0), graph.Float, 4, 6)
			neg := b.node("neg", "Neg", r1.Output(0))
			b.output(neg.Output(0), graph.Float, 6, 4)
		},
		"first is a Transpose": func(b *cleanupModel, x *graph.Value) {
			t1 := transposeNode(b, "t1", x, 2, 1, 0)
			r2 := b.node("r2", "Reshape", t1.Output(0), b.i64("s2", 24))
			b.output(r2.Output(0), graph.Float, 24)
		},
	}
	clAllUnchanged(t, mergeReshapes, []int64{2, 3, 4}, cases)
}
