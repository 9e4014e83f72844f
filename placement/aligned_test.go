package placement

import (
	"bytes"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// Conv channel alignment on the zoo's mobilenet_v3_small (72-, 88- and
// 120-channel depthwise convs): the padded float model computes what the
// float model does; all-INT8 quantized from it has every quantized
// depthwise conv at a multiple of ort.Int8ChannelAlign channels (what
// ORT's symmetric INT8 kernels need) and about all-INT8's error (the same
// ranges and weights). The search records its timing of the two; when it
// chose the padded model, the model returned is quantized from it, FP32
// is still timed as the model given, and a replay of the file rebuilds
// the model byte for byte.
func TestAlignedChannels(t *testing.T) {
	ortenv.Require(t)
	channels, m := unalignedModel(t)
	spec := data.Spec{Shapes: map[string][]int64{"input": {1, 3, 64, 64}}}
	float, ranges := preparedOn(t, m, spec)
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	opts := Options{Float: float, Ranges: ranges, Quant: quantize.Options{Target: quantize.TargetORT},
		Session: sess, Inputs: spec, Budget: 20 * time.Second, Batches: []int{1, 8}}
	fm, err := float.Parse()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inputs(fm, spec, 8)
	if err != nil {
		t.Fatal(err)
	}

	padded, convs, err := aligned(opts, channels)
	if err != nil {
		t.Fatal(err)
	}
	if convs == 0 {
		t.Fatal("no conv padded: mobilenet_v3_small has 72-, 88- and 120-channel layers")
	}
	want, got := run(t, float, in), run(t, padded.Float, in)
	var worst float64
	for i := range want {
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("the padded float model differs from the float model by %g", worst)
	}
	q, err := quantizeKeeping(padded.Float, padded.Ranges, padded.Quant, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := quantizedDepthwise(t, q.model, channels); n == 0 {
		t.Fatal("no quantized depthwise conv in the padded all-INT8 model")
	}
	all, err := quantizeKeeping(float, ranges, opts.Quant, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, alignedErr := rmsError(t, opts, run(t, all.serialized, in)), rmsError(t, opts, run(t, q.serialized, in))
	t.Logf("RMS error against FP32: all-INT8 %.4g, padded all-INT8 %.4g (%d convs padded)", base, alignedErr, convs)
	if alignedErr > 1.25*base || alignedErr < base/1.25 {
		t.Errorf("the padded model's INT8 error %.4g is not about all-INT8's %.4g", alignedErr, base)
	}

	f, model, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Aligned
	if a == nil {
		if !f.BudgetExhausted {
			t.Fatalf("alignment not tried: %+v", f)
		}
		return
	}
	t.Logf("%s", a)
	if a.Channels != channels || a.Convs != convs || len(a.Timings) != len(opts.Batches) {
		t.Errorf("alignment record %+v", a)
	}
	mean, worst := 0.0, math.Inf(1)
	for i, tm := range a.Timings {
		if tm.Batch != opts.Batches[i] || tm.BeforeMs <= 0 || tm.AfterMs <= 0 || tm.Runs == 0 {
			t.Errorf("alignment timing %+v", tm)
		}
		mean += tm.BeforeMs / tm.AfterMs / float64(len(a.Timings))
		worst = min(worst, tm.BeforeMs/tm.AfterMs)
	}
	if a.Chosen != wins(mean, worst) {
		t.Errorf("chosen %v with timings %+v", a.Chosen, a.Timings)
	}
	for _, tm := range f.Timings {
		if ms := tm.P50Ms[schema.CandidateFP32]; ms <= 0 {
			t.Errorf("batch %d: FP32 not timed: %v", tm.Batch, tm.P50Ms)
		}
	}
	qm, err := model.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if n := quantizedDepthwise(t, qm, channels); a.Chosen && n == 0 {
		t.Error("the padded model was chosen, but the model returned has no quantized depthwise conv")
	}
	replaysTo(t, opts, f, model, "replaying the file did not rebuild the model the search returned")
	// Forced the other way, replay follows the file.
	flipped := *f
	other := *a
	other.Chosen = !a.Chosen
	flipped.Aligned = &other
	_, replayed, err := Replay(opts, &flipped)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := replayed.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got := quantizedDepthwise(t, rm, channels) > 0; got != other.Chosen {
		t.Errorf("replaying a file with aligned channels %v: aligned depthwise convs %v", other.Chosen, got)
	}
}

// quantizedDepthwise counts q's quantized depthwise convs (QDQ: a weight
// read through DequantizeLinear; or QLinearConv), or returns 0 when one of them has a channel
// count that is not a multiple of channels.
func quantizedDepthwise(t *testing.T, q *graph.Model, channels int) int {
	t.Helper()
	n := 0
	for _, node := range q.Graph.Nodes {
		c := node.AttrInt("group", 1)
		switch {
		case c == 1:
			continue
		case node.OpType == "QLinearConv":
		case node.OpType == "Conv":
			if w := node.Input(1).Producer(); w == nil || w.OpType != "DequantizeLinear" {
				continue // left float
			}
		default:
			continue
		}
		if c%int64(channels) != 0 {
			return 0
		}
		n++
	}
	return n
}

// Node indices move in the padded graph: a KeepFloat index becomes an
// exclusion by the node's name, and a model whose kept-float node has no
// name is not padded at all.
func TestAlignedKeepFloatByName(t *testing.T) {
	channels, m := unalignedModel(t)
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Float: float, Quant: quantize.Options{KeepFloat: []int{0}}}
	padded, convs, err := aligned(opts, channels)
	if err != nil {
		t.Fatal(err)
	}
	want := "^" + regexp.QuoteMeta(m.Graph.Nodes[0].Name) + "$"
	if convs == 0 || padded.Quant.KeepFloat != nil || len(padded.Quant.Exclude) != 1 || padded.Quant.Exclude[0] != want {
		t.Errorf("padded %d convs, quantization options %+v; want KeepFloat as the exclusion %s", convs, padded.Quant, want)
	}
	// GPTQ's weights and bias correction's shifts are per channel of the
	// model as given: a model carrying them is not padded (it would lose
	// them, and the guard's accuracy with them).
	for _, c := range []quantize.Options{{BiasShift: map[string][]float32{"x": {0}}}, {Rounded: map[string][]float32{"x": {0}}}} {
		if _, convs, err := aligned(Options{Float: float, Quant: c}, channels); err != nil || convs != 0 {
			t.Errorf("corrections %+v: %d convs padded, err %v", c, convs, err)
		}
	}
	m.Graph.Nodes[0].Name = ""
	if opts.Float, err = graph.MarshalReferencing(m); err != nil {
		t.Fatal(err)
	}
	same, convs, err := aligned(opts, channels)
	if err != nil || convs != 0 || !bytes.Equal(same.Float.Bytes, opts.Float.Bytes) {
		t.Errorf("an unnamed kept-float node: %d convs padded, err %v", convs, err)
	}
}

// unalignedModel is ort.Int8ChannelAlign (the test is skipped on a CPU
// without those kernels) and the zoo's mobilenet_v3_small, whose 72-,
// 88- and 120-channel convs are not aligned.
func unalignedModel(t *testing.T) (int, *graph.Model) {
	t.Helper()
	channels := ort.Int8ChannelAlign()
	if channels == 0 {
		t.Skip("no symmetric INT8 conv kernels to align for on this CPU")
	}
	m, err := graph.LoadFile(testenv.Data(t, "zoo/mobilenet_v3_small/dynbatch.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return channels, m
}
