package passes

import (
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// padConvModel builds x[1,2,5,6] -> Pad -> consumer -> output, with a
// 3x3 conv weight when the consumer is a Conv.
func padConvModel(t *testing.T, opset int64, consumer string, pads []int64, setup func(b *cleanupModel, pad, op *graph.Node)) (*cleanupModel, *graph.Node) {
	b := newCleanupModel(t, opset)
	x := b.input("x", graph.Float, 1, 2, 5, 6)
	var pad *graph.Node
	if opset >= 11 {
		pad = b.node("pad", "Pad", x, b.i64("pads", pads...))
	} else {
		pad = b.node("pad", "Pad", x)
		pad.SetAttr(clInts("pads", pads...))
	}
	var op *graph.Node
	switch consumer {
	case "Conv":
		w := make([]float32, 3*2*3*3)
		for i := range w {
			w[i] = float32(i%7) - 3
		}
		op = b.node("op", "Conv", pad.Output(0), b.f32("w", []int64{3, 2, 3, 3}, w...), b.f32("bias", []int64{3}, 1, 2, 3))
		op.SetAttr(clInts("kernel_shape", 3, 3))
	default:
		op = b.node("op", consumer, pad.Output(0))
		op.SetAttr(clInts("kernel_shape", 2, 2))
	}
	setup(b, pad, op)
	b.output(op.Output(0), graph.Float)
	op.Output(0).Type.Shape = nil
	return b, op
}

func TestFusePadIntoConv(t *testing.T) {
	none := func(b *cleanupModel, pad, op *graph.Node) {}
	for _, tc := range []struct {
		name     string
		opset    int64
		consumer string
		pads     []int64
		setup    func(b *cleanupModel, pad, op *graph.Node)
		want     []int64
	}{
		{"conv, opset 13", 13, "Conv", []int64{0, 0, 1, 2, 0, 0, 3, 0}, none, []int64{1, 2, 3, 0}},
		{"conv with pads and strides", 13, "Conv", []int64{0, 0, 1, 0, 0, 0, 0, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			op.SetAttr(clInts("pads", 1, 1, 1, 1))
			op.SetAttr(clInts("strides", 2, 2))
			op.SetAttr(clStr("auto_pad", "NOTSET"))
		}, []int64{2, 1, 1, 2}},
		{"conv, constant value 0 given", 13, "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			pad.SetInput(2, b.f32("zero", nil, 0))
		}, []int64{1, 1, 1, 1}},
		{"conv, opset 10 attributes", 10, "Conv", []int64{0, 0, 2, 2, 0, 0, 2, 2}, none, []int64{2, 2, 2, 2}},
		{"average pool counting pads", 13, "AveragePool", []int64{0, 0, 1, 1, 0, 0, 0, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			op.SetAttr(clInt("count_include_pad", 1))
		}, []int64{1, 1, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, op := padConvModel(t, tc.opset, tc.consumer, tc.pads, tc.setup)
			clRewrites(t, b.Model, fusePadIntoConv, Stats{Removed: 1, Rewritten: 1})
			if got := op.AttrInts("pads"); op.Input(0) != b.Graph.Inputs[0] || !slices.Equal(got, tc.want) {
				t.Fatalf("op reads %q with pads %v, want x with %v", op.Input(0).Name, got, tc.want)
			}
		})
	}
}

func TestFusePadIntoConvLeavesAlone(t *testing.T) {
	none := func(b *cleanupModel, pad, op *graph.Node) {}
	for _, tc := range []struct {
		name     string
		consumer string
		pads     []int64
		setup    func(b *cleanupModel, pad, op *graph.Node)
	}{
		{"pads the channels", "Conv", []int64{0, 1, 1, 1, 0, 0, 1, 1}, none},
		{"negative pads", "Conv", []int64{0, 0, -1, 0, 0, 0, 0, 0}, none},
		{"reflect", "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			pad.SetAttr(clStr("mode", "reflect"))
		}},
		{"nonzero value", "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			pad.SetInput(2, b.f32("one", nil, 1))
		}},
		{"value not constant", "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			pad.SetInput(2, b.input("v", graph.Float))
		}},
		{"auto_pad", "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			op.SetAttr(clStr("auto_pad", "SAME_UPPER"))
		}},
		{"pad read twice", "Conv", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			b.output(b.node("neg", "Neg", pad.Output(0)).Output(0), graph.Float, 1, 2, 7, 8)
		}},
		{"max pool", "MaxPool", []int64{0, 0, 1, 1, 0, 0, 1, 1}, none},
		{"average pool not counting pads", "AveragePool", []int64{0, 0, 1, 1, 0, 0, 1, 1}, none},
		{"average pool with ceil_mode", "AveragePool", []int64{0, 0, 1, 1, 0, 0, 1, 1}, func(b *cleanupModel, pad, op *graph.Node) {
			op.SetAttr(clInt("count_include_pad", 1))
			op.SetAttr(clInt("ceil_mode", 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := padConvModel(t, 13, tc.consumer, tc.pads, tc.setup)
			clUnchanged(t, b.Model, fusePadIntoConv)
		})
	}
}
