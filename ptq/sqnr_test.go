package ptq

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
)

// The per-tensor SQNR in one run per batch and in one run per tensor (each
// part computing only what it exposes) is the same, figure for figure.
func TestTensorSQNRSplitIdentical(t *testing.T) {
	ortenv.Require(t)
	opts := stackOptions(t, 8)
	opts.CalibOpts.Samples = 8
	run := func(limit int64) []TensorSQNR {
		t.Helper()
		saved := sqnrRunBytes
		sqnrRunBytes = limit
		defer func() { sqnrRunBytes = saved }()
		res, err := Run(opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.TensorSQNR
	}
	one, split := run(1<<40), run(1)
	if len(one) < 4 {
		t.Fatalf("SQNR of %d tensors, want the conv stack's activations", len(one))
	}
	if len(split) != len(one) {
		t.Fatalf("%d tensors split, %d in one run", len(split), len(one))
	}
	t.Logf("%d tensors, worst %+v", len(one), one[0])
	for i := range one {
		if one[i] != split[i] {
			t.Errorf("tensor %d: %+v in one run, %+v split", i, one[i], split[i])
		}
	}
}

// stackOptions saves an n-conv stack (8 channels, 8x8) and gives the
// options that quantize it with random calibration (16 samples) and
// evaluation data.
func stackOptions(t *testing.T, n int) Options {
	t.Helper()
	m, err := convstack.Layers(8, 8, n)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "convstack.onnx")
	if err := graph.Save(m, in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return Options{Input: in, Output: filepath.Join(dir, "q.onnx"),
		CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 16, Seed: 1},
		EvalData: "random", EvalOpts: data.Options{High: 1, Seed: 2},
		Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
		Session: ort.DefaultOptions(), NoLatency: true}
}

// calibratedStack is stackOptions with a calibration cache, and the cache
// Run wrote.
func calibratedStack(t *testing.T, n int) (Options, *calibrate.Cache) {
	t.Helper()
	opts := stackOptions(t, n)
	opts.CalibCache = filepath.Join(filepath.Dir(opts.Input), "calib.json")
	if _, err := Run(opts); err != nil {
		t.Fatal(err)
	}
	c, err := calibrate.ReadCache(opts.CalibCache)
	if err != nil {
		t.Fatal(err)
	}
	return opts, c
}

// calibratedFloat is calibratedStack's options, float model and ranges.
func calibratedFloat(t *testing.T, n int) (Options, graph.Serialized, map[string][2]float64) {
	t.Helper()
	opts, c := calibratedStack(t, n)
	m, err := graph.LoadFile(opts.Input)
	if err != nil {
		t.Fatal(err)
	}
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string][2]float64{}
	for _, r := range c.Tensors {
		ranges[r.Name] = [2]float64{r.Min, r.Max}
	}
	return opts, float, ranges
}

// clippedStack is a 12-conv stack whose calibration cache gives relu5
// (conv6's input) a tenth of the range measured: conv6's input is
// clipped, every other layer is quantized as calibrated.
func clippedStack(t *testing.T) Options {
	t.Helper()
	opts, c := calibratedStack(t, 12)
	found := false
	for i := range c.Tensors {
		if c.Tensors[i].Name == "relu5" {
			c.Tensors[i].Max /= 10
			found = true
		}
	}
	if !found {
		t.Fatal("no range for relu5 in the calibration cache")
	}
	opts.CalibCache = filepath.Join(filepath.Dir(opts.CalibCache), "clipped.json")
	if err := calibrate.WriteCache(opts.CalibCache, c); err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestFallbackRanksByOwnError: with more layers than the ranking
// measures, the layer whose input is clipped has the worst own error, is
// among the candidates measured kept float, and is the one kept float; a
// QOperator model is probed in its QDQ form.
func TestFallbackRanksByOwnError(t *testing.T) {
	ortenv.Require(t)
	base := clippedStack(t)
	saved := sensitivityCandidates
	sensitivityCandidates = 4
	defer func() { sensitivityCandidates = saved }()
	for _, format := range []quantize.Format{quantize.FormatQDQ, quantize.FormatQOperator} {
		t.Run(string(format), func(t *testing.T) {
			opts := base
			opts.Quant.Format = format
			// Twelve INT8 layers of 8 channels measure a worst cosine of
			// about 0.985 with conv6 float, the clipped model about 0.68.
			opts.MinCosine, opts.MaxRelError = 0.97, 0.5
			res, err := Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("sensitivity %+v; kept float %v; guard %s", res.Sensitivity, res.FellBack, res.Guard.Fallback)
			if len(res.LayerSQNR) != 12 {
				t.Fatalf("own error of %d layers, want 12: %+v", len(res.LayerSQNR), res.LayerSQNR)
			}
			worst := res.LayerSQNR[0]
			t.Logf("worst own error %s %.1f dB, next %s %.1f dB", worst.Node, worst.SQNRdB, res.LayerSQNR[1].Node, res.LayerSQNR[1].SQNRdB)
			if worst.Node != "conv6" || !(worst.SQNRdB+10 < res.LayerSQNR[1].SQNRdB) {
				t.Errorf("worst own error: %+v, then %+v; want conv6 (clipped input) 10 dB below every other layer", worst, res.LayerSQNR[1])
			}
			if len(res.Sensitivity) != 4 {
				t.Errorf("ranked %d layers kept float alone, want the 4 candidates", len(res.Sensitivity))
			}
			if len(res.FellBack) != 1 || res.FellBack[0] != "conv6" {
				t.Errorf("kept float %v, want [conv6]", res.FellBack)
			}
		})
	}
}

// TestLayerSQNRAllLayers: without clipping, every layer of the stack has a
// finite own error, and the probe leaves the INT8 model it was given as
// it was (the fallback quantizes its candidates afresh).
func TestLayerSQNRAllLayers(t *testing.T) {
	ortenv.Require(t)
	opts, float, ranges := calibratedFloat(t, 10)
	_, b, _, err := quantizeWith(float, ranges, quantize.Options{Target: quantize.TargetORT})
	if err != nil {
		t.Fatal(err)
	}
	before := string(b.Bytes)
	var layers []string
	for i := range 10 {
		layers = append(layers, fmt.Sprint("conv", i))
	}
	layers = append(layers, "not-a-layer")
	got, err := layerSQNR(opts, float, b, layers, "random", data.Options{High: 1, Seed: 3}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 11 {
		t.Fatalf("%d layers, want 11", len(got))
	}
	for _, s := range got[:10] {
		if s.Node == "not-a-layer" || !(s.SQNRdB > 0 && s.SQNRdB < 60) {
			t.Errorf("%+v: want a quantized layer's finite own error", s)
		}
	}
	if got[10].Node != "not-a-layer" {
		t.Errorf("last %+v, want the layer the INT8 model does not quantize", got[10])
	}
	if string(b.Bytes) != before {
		t.Error("the probe changed the INT8 model it was given")
	}
}

// TestRankingWithoutProbe: when the probe cannot run, the ranking measures
// every layer, as it did before there was one, and records no own error.
func TestRankingWithoutProbe(t *testing.T) {
	ortenv.Require(t)
	opts, float, ranges := calibratedFloat(t, 10)
	var layers []string
	for i := range 10 {
		layers = append(layers, fmt.Sprint("conv", i))
	}
	res := &Result{LayerSQNR: []LayerSQNR{{Node: "stale"}}}
	ms := measures{layers: func(graph.Serialized, []string) ([]LayerSQNR, error) {
		return nil, fmt.Errorf("the probe failed")
	}}
	candidates, rest := rankingCandidates(opts, float, ranges, res, layers, ms)
	if len(candidates) != 10 || len(rest) != 0 || res.LayerSQNR != nil {
		t.Errorf("candidates %v, rest %v, own error %v; want every layer measured, no own error", candidates, rest, res.LayerSQNR)
	}
}
