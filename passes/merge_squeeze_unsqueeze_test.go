package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// squeezeNode adds a Squeeze or Unsqueeze with axes as an input (opset
// 13) or an attribute (before); nil axes are omitted.
func squeezeNode(b *cleanupModel, name, op string, in *graph.Value, opset int64, axes ...int64) *graph.Node {
	switch {
	case axes == nil:
		return b.node(name, op, in)
	case opset >= 13:
		return b.node(name, op, in, b.i64(name+"_axes", axes...))
	}
	n := b.node(name, op, in)
	n.SetAttr(clInts("axes", axes...))
	return n
}

func TestMergeSqueezeUnsqueeze(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opset       int64
		dims        []int64
		first, then string
		a1, a2      []int64
	}{
		{"squeeze then unsqueeze, opset 13", 13, []int64{2, 1, 3, 1}, "Squeeze", "Unsqueeze", []int64{3, 1}, []int64{1, 3}},
		{"squeeze then unsqueeze, opset 11", 11, []int64{2, 1, 3, 1}, "Squeeze", "Unsqueeze", []int64{1, 3}, []int64{1, 3}},
		{"negative axes, unknown rank", 13, nil, "Squeeze", "Unsqueeze", []int64{-1}, []int64{-1}},
		{"negative against positive, known rank", 13, []int64{2, 1, 3, 1}, "Squeeze", "Unsqueeze", []int64{-1, 1}, []int64{3, -3}},
		{"squeeze without axes", 13, []int64{2, 1, 3}, "Squeeze", "Unsqueeze", nil, []int64{1}},
		{"unsqueeze then squeeze", 13, []int64{2, 3}, "Unsqueeze", "Squeeze", []int64{0, 3}, []int64{0, 3}},
		{"unsqueeze then squeeze, mixed signs", 13, []int64{2, 3}, "Unsqueeze", "Squeeze", []int64{0, -1}, []int64{3, 0}},
		{"unsqueeze then squeeze, opset 11", 11, []int64{2, 3}, "Unsqueeze", "Squeeze", []int64{1}, []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, tc.opset)
			x := b.input("x", graph.Float, tc.dims...)
			if tc.dims == nil {
				x.Type.Shape = nil
			}
			relu := b.node("relu", "Relu", x)
			relu.Output(0).Type = x.Type.Clone()
			first := squeezeNode(b, "first", tc.first, relu.Output(0), tc.opset, tc.a1...)
			second := squeezeNode(b, "second", tc.then, first.Output(0), tc.opset, tc.a2...)
			neg := b.node("neg", "Neg", second.Output(0))
			b.output(neg.Output(0), graph.Float)
			neg.Output(0).Type.Shape = nil
			if tc.dims == nil { // random data needs a shape; the pass does not see it
				b.Model.Graph.Inputs[0].Type.Shape = clShape([]int64{2, 1})
				relu.Output(0).Type.Shape = nil
			}
			clRewrites(t, b.Model, mergeSqueezeUnsqueeze, Stats{Removed: 2})
			if neg.Input(0) != relu.Output(0) {
				t.Fatalf("neg reads %q", neg.Input(0).Name)
			}
		})
	}
}

func TestMergeSqueezeUnsqueezeLeavesAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dims        []int64
		first, then string
		a1, a2      []int64
	}{
		{"different axes", []int64{2, 1, 3, 1}, "Squeeze", "Unsqueeze", []int64{1}, []int64{2}},
		{"different counts", []int64{2, 1, 3, 1}, "Squeeze", "Unsqueeze", []int64{1, 3}, []int64{1}},
		{"signs differ, rank unknown", nil, "Unsqueeze", "Squeeze", []int64{-1}, []int64{2}},
		{"squeeze without axes, dims unknown", []int64{2, -1, 3}, "Squeeze", "Unsqueeze", nil, []int64{1}},
		{"unsqueeze then squeeze without axes", []int64{2, 3}, "Unsqueeze", "Squeeze", []int64{0}, nil},
		{"squeeze then squeeze", []int64{1, 1, 3}, "Squeeze", "Squeeze", []int64{0}, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, 13)
			x := b.input("x", graph.Float, tc.dims...)
			if tc.dims == nil {
				x.Type.Shape = nil
			}
			first := squeezeNode(b, "first", tc.first, x, 13, tc.a1...)
			second := squeezeNode(b, "second", tc.then, first.Output(0), 13, tc.a2...)
			b.output(second.Output(0), graph.Float)
			second.Output(0).Type.Shape = nil
			clUnchanged(t, b.Model, mergeSqueezeUnsqueeze)
		})
	}
}

// TestMergeSqueezeUnsqueezeCounterpartHasReader leaves the pair when
// something else reads the first node's output.
func TestMergeSqueezeUnsqueezeCounterpartHasReader(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 1)
	first := squeezeNode(b, "first", "Squeeze", x, 13, 1)
	second := squeezeNode(b, "second", "Unsqueeze", first.Output(0), 13, 1)
	b.output(second.Output(0), graph.Float, 2, 1)
	neg := b.node("neg", "Neg", first.Output(0))
	b.output(neg.Output(0), graph.Float, 2)
	clUnchanged(t, b.Model, mergeSqueezeUnsqueeze)
}
