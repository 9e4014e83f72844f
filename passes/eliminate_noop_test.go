package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// noopCase builds x -> Relu -> (the node under test) -> Neg -> output, so
// the node sits between two others, and returns the node.
type noopCase struct {
	name  string
	opset int64
	dims  []int64 // x's shape; -1 is symbolic
	build func(b *cleanupModel, in *graph.Value) *graph.Node
}

func (c noopCase) model(t *testing.T) (*cleanupModel, *graph.Node, *graph.Node) {
	opset := c.opset
	if opset == 0 {
		opset = 13
	}
	b := newCleanupModel(t, opset)
	x := b.input("x", graph.Float, c.dims...)
	relu := b.node("relu", "Relu", x)
	relu.Output(0).Type = x.Type.Clone()
	b.Graph.ValueInfo = append(b.Graph.ValueInfo, relu.Output(0))
	n := c.build(b, relu.Output(0))
	neg := b.node("neg", "Neg", n.Output(0))
	b.output(neg.Output(0), graph.Float)
	neg.Output(0).Type.Shape = nil
	return b, relu, neg
}

func TestEliminateNoop(t *testing.T) {
	cases := []noopCase{
		{"reshape to the same shape", 13, []int64{2, 3, 4}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", 2, 3, 4))
		}},
		{"reshape with 0 and -1 on symbolic dims", 13, []int64{-1, 3, 4}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", -1, 0, 4))
		}},
		{"reshape copying every dim", 13, []int64{-1, -1}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", 0, 0))
		}},
		{"transpose identity", 13, []int64{2, 3, 4}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Transpose", in)
			n.SetAttr(clInts("perm", 0, 1, 2))
			return n
		}},
		{"transpose of rank 1 without perm", 13, []int64{5}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Transpose", in)
		}},
		{"cast to the same type", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Cast", in)
			n.SetAttr(clInt("to", int64(graph.Float)))
			return n
		}},
		{"castlike to the same type", 15, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "CastLike", in, b.f32("like", []int64{1}, 0))
		}},
		{"pad with zero pads", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Pad", in, b.i64("pads", 0, 0, 0, 0))
		}},
		{"pad with zero pads, reflect", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Pad", in, b.i64("pads", 0, 0, 0, 0))
			n.SetAttr(clStr("mode", "reflect"))
			return n
		}},
		{"pad attribute, opset 10", 10, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Pad", in)
			n.SetAttr(clInts("pads", 0, 0, 0, 0))
			return n
		}},
		{"slice of everything", 13, []int64{2, 3, 4}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Slice", in, b.i64("starts", 0, -3), b.i64("ends", 3, clMaxInt64), b.i64("axes", -2, 0), b.i64("steps", 1, 1))
		}},
		{"slice to int64 max on a symbolic dim", 13, []int64{-1, 4}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Slice", in, b.i64("starts", 0), b.i64("ends", clMaxInt64))
		}},
		{"slice attributes, opset 9", 9, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Slice", in)
			n.SetAttr(clInts("starts", 0))
			n.SetAttr(clInts("ends", 100))
			n.SetAttr(clInts("axes", 1))
			return n
		}},
		{"concat of one input", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Concat", in)
			n.SetAttr(clInt("axis", 1))
			return n
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, relu, neg := c.model(t)
			clRewrites(t, b.Model, eliminateNoop, Stats{Removed: 1})
			if neg.Input(0) != relu.Output(0) {
				t.Fatalf("neg reads %q, want relu's output", neg.Input(0).Name)
			}
		})
	}
}

func TestEliminateNoopLeavesAlone(t *testing.T) {
	cases := []noopCase{
		{"reshape of unknown rank", 13, nil, func(b *cleanupModel, in *graph.Value) *graph.Node {
			in.Type.Shape = nil
			return b.node("op", "Reshape", in, b.i64("shape", 2, 3))
		}},
		{"reshape to another shape", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", 3, 2))
		}},
		{"reshape with -1 beside a symbolic dim", 13, []int64{-1, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", 0, -1))
		}},
		{"reshape to a static dim the input may not have", 13, []int64{-1, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.i64("shape", 2, 3))
		}},
		{"reshape by a computed shape", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Reshape", in, b.node("shape", "Shape", in).Output(0))
		}},
		{"transpose that permutes", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Transpose", in)
			n.SetAttr(clInts("perm", 1, 0))
			return n
		}},
		{"transpose without perm of rank 2", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Transpose", in)
		}},
		{"cast of unknown type", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			in.Type = nil
			b.Graph.ValueInfo = b.Graph.ValueInfo[:0]
			n := b.node("op", "Cast", in)
			n.SetAttr(clInt("to", int64(graph.Float)))
			return n
		}},
		{"cast to another type and back", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Cast", in)
			n.SetAttr(clInt("to", int64(graph.Float16)))
			back := b.node("back", "Cast", n.Output(0))
			back.SetAttr(clInt("to", int64(graph.Float)))
			return back
		}},
		{"pad with pads", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Pad", in, b.i64("pads", 0, 1, 0, 0))
		}},
		{"pad with computed pads", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			pads := b.node("pads", "Concat", b.i64("p0", 0, 0), b.i64("p1", 0, 0))
			pads.SetAttr(clInt("axis", 0))
			return b.node("op", "Pad", in, pads.Output(0))
		}},
		{"slice that drops the first row", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Slice", in, b.i64("starts", 1), b.i64("ends", clMaxInt64))
		}},
		{"slice to a bound of a symbolic dim", 13, []int64{-1, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Slice", in, b.i64("starts", 0), b.i64("ends", 1000))
		}},
		{"slice with step 2", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			return b.node("op", "Slice", in, b.i64("starts", 0), b.i64("ends", 3), b.i64("axes", 1), b.i64("steps", 2))
		}},
		{"slice with a negative axis of unknown rank", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			in.Type.Shape = nil
			return b.node("op", "Slice", in, b.i64("starts", 0), b.i64("ends", clMaxInt64), b.i64("axes", -1))
		}},
		{"concat of two inputs", 13, []int64{2, 3}, func(b *cleanupModel, in *graph.Value) *graph.Node {
			n := b.node("op", "Concat", in, in)
			n.SetAttr(clInt("axis", 1))
			return n
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _, _ := c.model(t)
			clUnchanged(t, b.Model, eliminateNoop)
		})
	}
}

// TestEliminateNoopOutputs keeps the model's output names: the node's
// input takes the output's name when it can, otherwise the node stays.
func TestEliminateNoopOutputs(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	relu := b.node("relu", "Relu", x)
	relu.Output(0).Type = x.Type.Clone()
	r := b.node("reshape", "Reshape", relu.Output(0), b.i64("shape", 0, 3))
	b.output(r.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, eliminateNoop, Stats{Removed: 1})
	clWantOutputs(t, b.Graph, "reshape_out")
	if b.Graph.Outputs[0] != relu.Output(0) || b.Graph.Outputs[0].Type.Shape.String() != "[2,3]" {
		t.Fatalf("relu should now produce the output reshape_out, typed")
	}

	b = newCleanupModel(t, 13)
	x = b.input("x", graph.Float, 2, 3)
	r = b.node("reshape", "Reshape", x, b.i64("shape", 0, 3))
	b.output(r.Output(0), graph.Float, 2, 3)
	clUnchanged(t, b.Model, eliminateNoop)
}
