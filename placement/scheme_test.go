package placement

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
)

// rmsError is the root mean square of model's output minus the float
// model's on one random batch of 8 (level disable).
func rmsError(t *testing.T, opts Options, model []float32) float64 {
	t.Helper()
	var s float64
	ref := floatOut(t, opts)
	for i, v := range model {
		d := float64(v - ref[i])
		s += d * d
	}
	return math.Sqrt(s / float64(len(ref)))
}

func floatOut(t *testing.T, opts Options) []float32 {
	t.Helper()
	return run(t, opts.Float, batchOf8(t, opts))
}

// batchOf8 is the batch of 8 inputs every model of the scheme tests runs
// on (the float reference and each variant alike).
func batchOf8(t *testing.T, opts Options) []*graph.Tensor {
	t.Helper()
	m, err := opts.Float.Parse()
	if err != nil {
		t.Fatal(err)
	}
	in, err := inputs(m, opts.Inputs, 8)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// The scheme variants on MNIST, with a real accuracy check: a candidate
// is accepted when its output error against the float model is within
// 1.5x that of the static INT8 model (u8s8, per-channel). per-tensor
// misses it honestly: the output channels of MNIST's weights differ in
// range, and one scale per tensor (7 bits here, as on any CPU without
// VNNI, pinned so on every CPU) leaves the small channels few levels
// (measured: 1.7x the error).
// Every variant is built and timed beside the others at every batch size
// measured; accuracy is checked lazily, fastest first, so per-tensor is
// checked, rejected and passed over exactly when the timing ranks it above
// the candidate chosen (checkLazyChoice); the scheme of each candidate
// built is in the file, and the chosen one's too. Each
// variant's model is rebuilt byte for byte (Build, twice), and a file
// that chose it replays to that model.
func TestSchemeVariants(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	opts.Budget = 20 * time.Second
	// 7-bit weights on every CPU: with VNNI's full 8 bits per-tensor's
	// error stays within the budget (measured 0.87x static INT8's), and
	// the rejection this test is about does not happen.
	reduce := true
	opts.Quant.ReduceRange = &reduce
	in := batchOf8(t, opts)
	all, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := rmsError(t, opts, run(t, all.serialized, in))
	errs := map[string]float64{}
	for _, name := range []string{CandidateS8S8, CandidatePerTensor, CandidateQOperator} {
		q, _, err := Build(name, opts.Float, opts.Ranges, opts.Quant)
		if err != nil {
			t.Fatal(err)
		}
		b, err := graph.MarshalReferencing(q)
		if err != nil {
			t.Fatal(err)
		}
		errs[name] = rmsError(t, opts, run(t, b, in))
	}
	t.Logf("RMS error against FP32: static INT8 %.4g, variants %v", base, errs)
	if errs[CandidatePerTensor] <= 1.5*base {
		t.Fatalf("per-tensor's error %.4g is within 1.5x static INT8's %.4g: the guard miss this test relies on did not happen", errs[CandidatePerTensor], base)
	}
	opts.Accept = func(b graph.Serialized) (bool, error) {
		return rmsError(t, opts, run(t, b, in)) <= 1.5*base, nil
	}
	misses := map[string]bool{CandidatePerTensor: true}
	for name, e := range errs {
		misses[name] = e > 1.5*base
	}

	f, model, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := f.Marshal()
	t.Logf("%s", js)
	checkLazyChoice(t, f, misses)
	if s := f.Schemes[CandidatePerTensor]; s.Activations != "uint8" || s.PerChannel {
		t.Errorf("per-tensor's recorded scheme %+v", s)
	}
	if s := f.Schemes[schema.CandidateAllINT8]; s.Activations != "uint8" || !s.PerChannel || s.Format != "qdq" {
		t.Errorf("all-int8's recorded scheme %+v", s)
	}
	if f.Scheme == nil || *f.Scheme != f.Schemes[f.Chosen] {
		t.Errorf("chosen %s, scheme %+v, want %+v", f.Chosen, f.Scheme, f.Schemes[f.Chosen])
	}
	accepted := map[string]bool{}
	for _, name := range []string{CandidateS8S8, CandidateQOperator} {
		accepted[name] = errs[name] <= 1.5*base
	}
	timed := 0
	for _, tm := range f.Timings {
		if tm.Confirmation || tm.Threads != opts.Session.IntraOpThreads {
			continue
		}
		timed++
		for name, ok := range accepted {
			if _, timedIt := tm.P50Ms[name]; ok && !timedIt && !slices.Contains(f.NotTried, name) {
				t.Errorf("batch %d: %s accepted but not timed: %v", tm.Batch, name, tm.P50Ms)
			}
		}
	}
	if timed == 0 && !f.BudgetExhausted {
		t.Fatalf("nothing timed: %+v", f)
	}
	if s := f.Schemes[CandidateS8S8]; accepted[CandidateS8S8] && (s.Activations != "int8" || !s.PerChannel) {
		t.Errorf("s8s8's recorded scheme %+v", s)
	}
	if s := f.Schemes[CandidateQOperator]; accepted[CandidateQOperator] && s.Format != "qoperator" {
		t.Errorf("qoperator's recorded scheme %+v", s)
	}

	// Every variant rebuilds byte for byte, and a file choosing it
	// replays to it.
	for _, name := range []string{CandidateS8S8, CandidatePerTensor, CandidateQOperator} {
		a, _, err := Build(name, opts.Float, opts.Ranges, opts.Quant)
		if err != nil {
			t.Fatal(err)
		}
		ab, _ := graph.MarshalReferencing(a)
		from := *f
		from.Chosen = name
		_, replayed, err := Replay(opts, &from)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(replayed.Bytes, ab.Bytes) {
			t.Errorf("%s: replay did not rebuild the variant's model", name)
		}
		if name == f.Chosen && !bytes.Equal(model.Bytes, ab.Bytes) {
			t.Errorf("%s chosen, but the model returned is not its model", name)
		}
	}

	// A file that chose a variant of a setting the user now gives
	// explicitly is refused, not replayed as something else.
	from := *f
	from.Chosen = CandidatePerTensor
	off := false
	explicit := opts
	explicit.Quant.PerChannel = &off
	if _, _, err := Replay(explicit, &from); err == nil || !strings.Contains(err.Error(), "do not take") {
		t.Errorf("replaying per-tensor with --per-channel=false given: %v", err)
	}
}

// reduce-range is tried only towards 7 bits, only where auto chose full
// range (a VNNI CPU), and never against an explicit --reduce-range.
func TestReduceRangeVariant(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	_, rep, err := Build(CandidateReduceRange, opts.Float, opts.Ranges, opts.Quant)
	if err != nil {
		t.Fatal(err)
	}
	if quantize.AutoReduceRange() != (rep == nil) {
		t.Errorf("auto reduce-range %v, variant built: %v", quantize.AutoReduceRange(), rep != nil)
	}
	if rep != nil && !rep.ReduceRange {
		t.Errorf("the reduce-range variant has full-range weights: %+v", rep)
	}
	for _, on := range []bool{false, true} {
		explicit := opts.Quant
		explicit.ReduceRange = &on
		if _, rep, err := Build(CandidateReduceRange, opts.Float, opts.Ranges, explicit); err != nil || rep != nil {
			t.Errorf("--reduce-range %v given: variant built %v, %v", on, rep != nil, err)
		}
	}
}

// A later batch size the budget cannot fit every candidate into times
// FP32 and the INT8 candidates within 2x of the fastest at the first.
func TestContenders(t *testing.T) {
	tm := schema.PlacementTiming{P50Ms: map[string]float64{schema.CandidateFP32: 7, schema.CandidateAllINT8: 2.6, CandidateS8S8: 8.7, CandidatePerTensor: 2.4, CandidateDynamic: 4.8}}
	got := contenders(tm, []string{schema.CandidateFP32, schema.CandidateAllINT8, CandidateS8S8, CandidatePerTensor, CandidateDynamic})
	if want := []string{schema.CandidateFP32, schema.CandidateAllINT8, CandidatePerTensor, CandidateDynamic}; !slices.Equal(got, want) {
		t.Errorf("contenders %v, want %v", got, want)
	}
}

// checkLazyChoice: the chosen candidate is the fastest (by the decision's
// geometric mean) of those not rejected; every candidate checked was the
// fastest left when it was checked, so at least as fast as the chosen
// one; the checked ones that miss the budget (misses) are exactly the
// rejected ones; no faster candidate that misses it went unchecked.
func checkLazyChoice(t *testing.T, f *schema.Placement, misses map[string]bool) {
	t.Helper()
	// The decision's timings: the confirmations came after it.
	var searched []schema.PlacementTiming
	for _, tm := range f.Timings {
		if !tm.Confirmation {
			searched = append(searched, tm)
		}
	}
	speedupOf := func(c string) float64 { s, _ := speedup(searched, f.Threads, c); return s }
	chosen := speedupOf(f.Chosen)
	timedEverywhere := func(c string) bool {
		for _, tm := range f.Timings {
			if tm.Threads == f.Threads && !tm.Confirmation && tm.P50Ms[c] == 0 {
				return false
			}
		}
		return true
	}
	for _, c := range f.Checked {
		if s := speedupOf(c); s < chosen {
			t.Errorf("%s checked although slower than the chosen %s (%.3f < %.3f)", c, f.Chosen, s, chosen)
		}
		if rejected := slices.Contains(f.Rejected, c+": misses the accuracy budget"); rejected != misses[c] {
			t.Errorf("%s checked: rejected %v, but misses the budget: %v", c, rejected, misses[c])
		}
	}
	if slices.Contains(f.Rejected, f.Chosen+": misses the accuracy budget") {
		t.Errorf("chose %s, which was rejected", f.Chosen)
	}
	for c, miss := range misses {
		s := speedupOf(c)
		if miss && timedEverywhere(c) && s > chosen && !slices.Contains(f.Checked, c) {
			t.Errorf("%s (%.3fx) is faster than the chosen %s (%.3fx) and misses the budget, but was not checked", c, s, f.Chosen, chosen)
		}
	}
}

// TestLazyAccuracyChecks: with an accuracy check every candidate but
// all-INT8 fails, the search checks the candidates fastest first, rejects
// each, and settles on all-INT8 (the guard's model) without checking it
// again: nothing that missed the budget is chosen.
func TestLazyAccuracyChecks(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	opts.Budget = 20 * time.Second
	calls := 0
	opts.Accept = func(graph.Serialized) (bool, error) { calls++; return false, nil }
	f, _, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	if f.Chosen != schema.CandidateAllINT8 {
		t.Errorf("chose %s, want all-int8 (every other candidate misses the budget)", f.Chosen)
	}
	misses := map[string]bool{}
	for _, tm := range f.Timings {
		for c := range tm.P50Ms {
			misses[c] = c != schema.CandidateFP32 && c != schema.CandidateAllINT8
		}
	}
	checkLazyChoice(t, f, misses)
	if slices.Contains(f.Checked, schema.CandidateAllINT8) {
		t.Errorf("all-int8 checked again: %v", f.Checked)
	}
	if calls < len(f.Checked) {
		t.Errorf("%d accuracy checks, %d recorded", calls, len(f.Checked))
	}
}

// placement.json's summary (schema.Placement.Summary, which report.md and
// optc diff print without this package) tells the whole-model
// alternatives from the placements of the regions as this package's
// table does.
func TestSummaryKnowsTheAlternatives(t *testing.T) {
	regions := []schema.Region{{Decision: schema.DecisionINT8}, {Decision: schema.DecisionFloat}}
	var names []string
	for _, a := range alternatives {
		names = append(names, a.name)
	}
	names = append(names, schema.CandidateFP32, schema.CandidateAllINT8, schema.CandidateGuided, schema.CandidateGreedy, "")
	for _, name := range names {
		got := (&schema.Placement{Chosen: name, Regions: regions}).Summary()
		if whole := strings.Contains(got, "not a placement"); whole != IsAlternative(name) {
			t.Errorf("chosen %q: summary %q, but IsAlternative says %v", name, got, IsAlternative(name))
		}
	}
}
