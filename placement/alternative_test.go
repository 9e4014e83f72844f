package placement

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// On the zoo's BERT-like encoder dynamic INT8 is one more whole-model
// candidate: built, accepted, timed beside FP32 and the static
// placements at every batch size, and when chosen it is the model
// returned and what a replay of the file rebuilds, byte for byte.
func TestSearchDynamicCandidate(t *testing.T) {
	ortenv.Require(t)
	m, err := graph.LoadFile(testenv.Data(t, "zoo/bert_tiny/dynamic.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	spec := data.Spec{Shapes: map[string][]int64{"input_ids": {1, 16}, "attention_mask": {1, 16}},
		Ranges: map[string][2]float64{"input_ids": {0, 1000}, "attention_mask": {1, 2}}}
	float, ranges := preparedOn(t, m, spec)
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	opts := Options{Float: float, Ranges: ranges, Quant: quantize.Options{Target: quantize.TargetORT},
		Session: sess, Inputs: spec, Budget: 30 * time.Second}
	f, model, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := f.Marshal()
	t.Logf("%s", js)
	timed := 0
	for _, tm := range f.Timings {
		if !tm.Confirmation && tm.Threads == 1 {
			if tm.P50Ms[CandidateDynamic] <= 0 {
				t.Errorf("batch %d: dynamic INT8 not timed: %v", tm.Batch, tm.P50Ms)
			}
			timed++
		}
	}
	if timed == 0 && !f.BudgetExhausted {
		t.Fatalf("nothing timed: %+v", f)
	}
	if f.Chosen != CandidateDynamic {
		return
	}
	q, err := model.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if testgraph.OpCounts(q.Graph)["MatMulInteger"] == 0 {
		t.Error("dynamic INT8 chosen, but the model returned has no MatMulInteger")
	}
	replaysTo(t, opts, f, model, "replay did not rebuild the dynamic INT8 model")
}

// TestApart: a model leaves a timing window early only when its runs and
// another's have medians more than twice the noise margin apart and
// interquartile ranges that do not overlap.
func TestApart(t *testing.T) {
	spread := func(center float64) []float64 {
		var xs []float64
		for i := range 30 {
			xs = append(xs, center*(0.97+0.002*float64(i))) // center -3% .. +2.8%
		}
		return xs
	}
	cases := []struct {
		name string
		a, b []float64
		want bool
	}{
		{"much slower", spread(1), spread(1.3), true},
		{"much faster", spread(1), spread(0.7), true},
		{"within the margin", spread(1), spread(1.08), false},
		{"same", spread(1), spread(1), false},
		{"far medians, overlapping tails", spread(1), append(spread(1.3)[:20], 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5), false},
		{"no runs", nil, nil, false},
	}
	for _, c := range cases {
		if got := versus(c.a, c.b) != 0; got != c.want {
			t.Errorf("%s: clearly apart = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRetireLosers: an INT8 candidate leaves the A/B window only when it
// is clearly slower than FP32 and than the fastest INT8 candidate; FP32,
// the fastest and the close ones stay.
func TestRetireLosers(t *testing.T) {
	spread := func(center float64) []float64 {
		var xs []float64
		for i := range 30 {
			xs = append(xs, center*(0.97+0.002*float64(i)))
		}
		return xs
	}
	runs := [][]float64{spread(1), spread(0.8), spread(0.85), spread(1.3), spread(0.95), spread(2)}
	active := []bool{true, true, true, true, true, true}
	retireLosers(runs, active)
	// 0.85 is within the margin of the fastest (0.8); 0.95 is not apart
	// from FP32; 1.3 and 2 are slower than both.
	if want := []bool{true, true, true, false, true, false}; !slices.Equal(active, want) {
		t.Errorf("active %v, want %v", active, want)
	}
	// Each greedy step's pair leaves together once apart.
	pair := []bool{true, true}
	if retireDecided([][]float64{spread(1), spread(1.05)}, pair); !pair[0] || !pair[1] {
		t.Errorf("a close step left its window: %v", pair)
	}
	if retireDecided([][]float64{spread(1), spread(1.3)}, pair); pair[0] || pair[1] {
		t.Errorf("a decided step stayed: %v", pair)
	}
}

// TestTimingMemoryBound: when the sessions of a window do not fit
// timingBytes, the models after the first two are left out of it (median
// 0, no runs); the search then times at the later batch sizes the
// fastest candidates first, records the rest as left out, and chooses
// only among candidates timed at every batch size.
func TestTimingMemoryBound(t *testing.T) {
	ortenv.Require(t)
	defer func(b int64) { timingBytes = b }(timingBytes)
	timingBytes = math.MinInt64 / 4 // no third session ever fits
	opts := mnistOptions(t)
	models := []graph.Serialized{opts.Float, opts.Float, opts.Float}
	p50, c, err := timeInterleaved(models, opts.Session, opts.Inputs, 1, time.Now().Add(time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p50[0] <= 0 || p50[1] <= 0 || p50[2] != 0 || c.runs[2] != 0 {
		t.Fatalf("p50 %v, runs %v: want the third model left out", p50, c.runs)
	}

	opts.Budget = 20 * time.Second
	f, _, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range f.Timings {
		if len(tm.P50Ms) != 2 || tm.P50Ms[schema.CandidateFP32] == 0 {
			t.Errorf("batch %d, %d threads: timed %v (left out %v), want FP32 and one candidate", tm.Batch, tm.Threads, tm.P50Ms, tm.LeftOut)
		}
	}
	searched := 0
	for _, tm := range f.Timings {
		if tm.Confirmation || tm.Threads != f.Threads {
			continue
		}
		if searched++; searched > 1 && len(tm.LeftOut) == 0 && len(f.Timings[0].LeftOut) > 0 {
			t.Errorf("batch %d left nothing out: %+v", tm.Batch, tm)
		}
		if tm.P50Ms[f.Chosen] == 0 {
			t.Errorf("chose %s, not timed at batch %d: %v", f.Chosen, tm.Batch, tm.P50Ms)
		}
	}
}

// TestByFirstTiming: FP32 first, then the candidates fastest first at the
// first batch size, the untimed last, ties in their order.
func TestByFirstTiming(t *testing.T) {
	tm := schema.PlacementTiming{P50Ms: map[string]float64{"fp32": 2, "a": 3, "b": 1, "c": 1}}
	got := byFirstTiming(tm, []string{"a", "x", "fp32", "c", "b"})
	if want := []string{"fp32", "c", "b", "a", "x"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
