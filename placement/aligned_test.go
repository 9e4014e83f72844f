package placement

import (
	"bytes"
	"math"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
)

// The aligned-channels candidate on the zoo's mobilenet_v3_small (72-,
// 88- and 120-channel depthwise convs): the padded float model computes
// what the float model does; the candidate's INT8 model is quantized from
// it, so every depthwise conv it quantizes has a multiple of
// ort.Int8ChannelAlign channels (what ORT's symmetric INT8 kernels need),
// and its error against float is about all-INT8's (the same ranges and
// weights); it rebuilds byte for byte, and a file that chose it replays
// to it.
func TestAlignedChannelsCandidate(t *testing.T) {
	ortenv.Require(t)
	align := ort.Int8ChannelAlign()
	if align == 0 {
		t.Skip("no symmetric INT8 conv kernels to align for on this CPU")
	}
	m, err := graph.LoadFile(testenv.Data(t, "zoo/mobilenet_v3_small/dynbatch.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	spec := data.Spec{Shapes: map[string][]int64{"input": {1, 3, 64, 64}}}
	float, ranges := preparedOn(t, m, spec)
	opts := Options{Float: float, Ranges: ranges, Quant: quantize.Options{Target: quantize.TargetORTCPU}, Inputs: spec}
	fm, err := float.Parse()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inputs(fm, spec, 8)
	if err != nil {
		t.Fatal(err)
	}

	padded, n, err := AlignChannels(float)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no conv padded: mobilenet_v3_small has 72-, 88- and 120-channel layers")
	}
	want, got := run(t, float, in), run(t, padded, in)
	var worst float64
	for i := range want {
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("the padded float model differs from the float model by %g", worst)
	}

	q, rep, err := Build(CandidateAlignedChannels, float, ranges, opts.Quant)
	if err != nil {
		t.Fatal(err)
	}
	if rep == nil {
		t.Fatal("aligned-channels does not apply")
	}
	depthwise := 0
	for _, node := range q.Graph.Nodes {
		if node.OpType != "Conv" || node.AttrInt("group", 1) == 1 {
			continue
		}
		w := node.Input(1).Producer()
		if w == nil || w.OpType != "DequantizeLinear" {
			continue // left float
		}
		depthwise++
		if c := node.AttrInt("group", 1); c%int64(align) != 0 {
			t.Errorf("%s: a quantized depthwise conv of %d channels, not a multiple of %d", node.Name, c, align)
		}
	}
	if depthwise == 0 {
		t.Fatal("no quantized depthwise conv in the aligned model")
	}
	b, err := graph.MarshalReferencing(q)
	if err != nil {
		t.Fatal(err)
	}
	all, err := quantizeKeeping(float, ranges, opts.Quant, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, aligned := rmsError(t, opts, run(t, all.serialized, in)), rmsError(t, opts, run(t, b, in))
	t.Logf("RMS error against FP32: all-int8 %.4g, aligned-channels %.4g (%d convs padded)", base, aligned, n)
	if aligned > 1.25*base || aligned < base/1.25 {
		t.Errorf("aligned-channels' error %.4g is not about all-int8's %.4g", aligned, base)
	}

	again, _, err := Build(CandidateAlignedChannels, float, ranges, opts.Quant)
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := graph.MarshalReferencing(again)
	if !bytes.Equal(ab.Bytes, b.Bytes) {
		t.Error("aligned-channels built twice differs")
	}
	f, _, err := AllINT8(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.Chosen = CandidateAlignedChannels
	_, replayed, err := Replay(opts, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(replayed.Bytes, b.Bytes) {
		t.Error("replaying a file that chose aligned-channels did not rebuild its model")
	}
}
