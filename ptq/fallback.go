package ptq

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/quantize"
)

// Sensitivity is how the model measures with one weighted layer kept
// float and every other one quantized: the fallback keeps the layers
// whose float measures best.
type Sensitivity struct {
	Node       string          `json:"node"`
	DropPoints float64         `json:"drop_points"` // 0 without labels
	MinCosine  jsonfloat.Float `json:"min_cosine"`  // over the outputs; NaN when one had no finite pair
}

// minCosine is the worst cosine over the outputs, each output's worst
// sample's (the pooled one for outputs too small for a per-sample
// cosine): NaN (no finite pair) stays NaN, meets no criterion and sorts
// as the most sensitive.
func minCosine(r *compare.Result) jsonfloat.Float {
	c := jsonfloat.Float(1)
	for _, s := range r.Outputs {
		if s.SampleElements >= compare.SmallOutput {
			c = min(c, s.MinSampleCosine)
		} else {
			c = min(c, s.Cosine)
		}
	}
	return c
}

// quantizeWith quantizes a fresh copy of the float model.
func quantizeWith(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, graph.Serialized, *quantize.Report, error) {
	var none graph.Serialized
	q, err := float.Parse()
	if err != nil {
		return nil, none, nil, err
	}
	rep, err := quantize.Apply(q, ranges, opts)
	if err != nil {
		return nil, none, nil, err
	}
	if err := q.Verify(); err != nil {
		return nil, none, nil, fmt.Errorf("quantized model is invalid (a bug in optc): %w", err)
	}
	b, err := graph.MarshalReferencing(q)
	return q, b, rep, err
}

// errNoRecovery: no INT8 model with some layers kept float meets the
// criteria.
var errNoRecovery = errors.New("no INT8 model meets the accuracy criteria with any layer quantized")

// sensitivitySamples bounds the evaluation samples each single-layer
// sensitivity is measured on (the models kept are measured on all): the
// ranking costs a session and this many runs a layer, which for a real
// model's evaluation set is most of the fallback's time; 64 is what a
// random check draws.
const sensitivitySamples = 64

// sensitivityCandidates is how many layers the ranking measures kept
// float, those with the worst own error (LayerSQNR) first: that bounds
// its cost by a constant instead of the layer count (PaddleOCR's
// recognizer: 51 layers, about 5 s each). The rest follow them in the
// order of their own error. A var so a test can bound it lower.
var sensitivityCandidates = 8

// fallBack ranks the named weighted layers (rankLayers), then keeps the
// most sensitive layers float: the fewest that make the criteria hold,
// found by doubling the count from one until a model passes and
// bisecting below it (keeping more layers float rarely costs accuracy;
// each candidate is measured on all the evaluation data). When even all
// but the last-ranked layer kept float misses them it returns
// errNoRecovery.
func fallBack(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, ms measures) (*graph.Model, graph.Serialized, error) {
	layers, err := weightedLayers(float)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	if len(layers) < 2 {
		// Keeping its only weighted layer float quantizes nothing a
		// fallback could keep.
		has := "one weighted layer"
		if len(layers) == 0 {
			has = "no weighted layer"
		}
		res.Guard.Fallback = "no fallback: the model has " + has + " (Conv, ConvTranspose, Gemm, MatMul), and keeping layers float needs at least 2 to leave one quantized"
		return nil, graph.Serialized{}, errNoRecovery
	}
	var deadline time.Time
	if opts.FallbackBudget > 0 {
		deadline = time.Now().Add(opts.FallbackBudget)
	}
	if hopeless, err := allFloatMisses(opts, float, ranges, res, layers, ms.full); err != nil || hopeless {
		if err == nil {
			err = errNoRecovery
		}
		return nil, graph.Serialized{}, err
	}
	order, err := rankLayers(opts, float, ranges, res, layers, ms, deadline)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	attempt := func(k int) (*fallbackTry, error) {
		opts.progress("fallback: measuring with the %d most sensitive of %d weighted layers kept float", k, len(layers))
		t := &fallbackTry{}
		for _, s := range order[:k] {
			t.kept = append(t.kept, s.Node)
		}
		var err error
		if t.q, t.b, t.rep, err = quantizeWith(float, ranges, excluding(opts.Quant, t.kept)); err != nil {
			return nil, err
		}
		t.r, err = ms.full(t.b)
		return t, err
	}
	best, last, stopped, err := fewestFloat(opts, len(order)-1, attempt,
		func(t *fallbackTry) bool { return opts.meets(t.r) }, deadline)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	budget := opts.stopReason(fmt.Sprintf("the search stopped at its %s share of the budget", opts.FallbackBudget.Round(time.Second)))
	switch {
	case best == nil && stopped:
		res.Guard.Fallback = fmt.Sprintf("%s, before any model met the guard (the last kept %d of %d weighted layers float)", budget, len(last.kept), len(layers))
		res.Guard.FallbackChecks = opts.checks(last.r)
		return nil, graph.Serialized{}, errNoRecovery
	case best == nil:
		res.Guard.Fallback = fmt.Sprintf("with %d of %d weighted layers kept float the model still misses the guard", len(last.kept), len(layers))
		res.Guard.FallbackChecks = opts.checks(last.r)
		return nil, graph.Serialized{}, errNoRecovery
	}
	more := ""
	if stopped {
		more = fmt.Sprintf(" (%s: fewer may do)", budget)
	}
	res.Quantize, res.Accuracy, res.FellBack = best.rep, best.r, best.kept
	res.Guard.Fallback = fmt.Sprintf("%d of %d weighted layers kept float: %s%s", len(best.kept), len(layers), strings.Join(best.kept, ", "), more)
	return best.q, best.b, nil
}

// weightedLayers are the float model's named Conv, ConvTranspose, Gemm
// and MatMul nodes, the layers the fallback may keep float.
func weightedLayers(float graph.Serialized) ([]string, error) {
	m, err := float.Parse()
	if err != nil {
		return nil, err
	}
	var layers []string
	for _, n := range m.Graph.Nodes {
		if n.Name != "" && slices.Contains([]string{"Conv", "ConvTranspose", "Gemm", "MatMul"}, n.OpType) {
			layers = append(layers, n.Name)
		}
	}
	return layers, nil
}

// allFloatMisses measures the model with every weighted layer kept float.
// When even that misses the criteria, the loss is in the ranges of the
// ops between them (pass-through Q/DQ): no choice of layers can recover
// it, so it says so at the cost of one run instead of a run per layer.
// Not so with bias correction when the model it made measured better than
// this one: a layer kept float loses its correction, which also made up
// for the clipping of its input, so a few layers float with the rest
// corrected can pass where all float misses (PaddleOCR's recognizer).
func allFloatMisses(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, layers []string,
	measure func(graph.Serialized) (*compare.Result, error)) (bool, error) {
	_, b, _, err := quantizeWith(float, ranges, excluding(opts.Quant, layers))
	if err != nil {
		return false, nil // the layer-by-layer search says what fails
	}
	opts.progress("fallback: measuring with all %d weighted layers kept float", len(layers))
	r, err := measure(b)
	if err != nil || opts.meets(r) {
		return false, err
	}
	if opts.Quant.BiasShift != nil && res.Accuracy != nil && improves(res.Accuracy, r) {
		return false, nil
	}
	res.Guard.Fallback = fmt.Sprintf("even with all %d weighted layers kept float the model misses the guard: the loss is in the activation ranges between them, which falling back layers cannot fix", len(layers))
	res.Guard.FallbackChecks = opts.checks(r)
	return true, nil
}

// fallbackTry is one candidate of the fallback: the k most sensitive
// layers kept float.
type fallbackTry struct {
	q    *graph.Model
	b    graph.Serialized
	rep  *quantize.Report
	r    *compare.Result
	kept []string
}

// fewestFloat finds the fewest layers (of at most most) that make the
// criteria hold: 1, 2, 4, ... until a candidate passes, then bisection
// between the last that missed and it. From below, not from most: with
// bias correction, many layers float can miss where a few pass, and a
// few is what a model that can be recovered usually needs. best is the
// candidate that passed with the fewest (nil when none did, last is then
// the last tried); stopped: the budget's share ended the search first.
func fewestFloat(opts Options, most int, attempt func(int) (*fallbackTry, error), passes func(*fallbackTry) bool, deadline time.Time) (best, last *fallbackTry, stopped bool, err error) {
	searchStop := opts.stops.loop("fallback search")
	step := 0
	try := func(k int) (*fallbackTry, bool, error) {
		// The first candidate always runs: the ranking had its share.
		if step > 0 && searchStop(step-1, deadline) {
			return nil, true, nil
		}
		step++
		t, err := attempt(k)
		return t, false, err
	}
	lo, hi := 0, 0 // lo missed (0: the model that failed the guard), hi passed
	for k := 1; best == nil; k = min(2*k, most) {
		t, stop, err := try(k)
		if err != nil || stop {
			return nil, last, stop, err
		}
		if last = t; passes(t) {
			best, hi = t, k
		} else if lo = k; k == most {
			return nil, last, false, nil
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		t, stop, err := try(mid)
		if err != nil || stop {
			return best, last, stop, err
		}
		if last = t; passes(t) {
			best, hi = t, mid
		} else {
			lo = mid
		}
	}
	return best, last, false, nil
}

// rankLayers orders the weighted layers most sensitive first. It
// measures each candidate layer kept float alone, every other one
// quantized (quick), records the sensitivities in res, and ranks them by
// the smallest accuracy drop, then the highest cosine (NaN last): that is
// the fallback's own question (which layers to keep float), asked of the
// model it falls back from; quantizing a layer alone instead would carry
// every activation Q/DQ between the layers and none of bias correction's
// corrections into each measurement, which then says more about them
// than about the layer. With more than sensitivityCandidates layers, the
// candidates are those with the worst own error in the model it falls
// back from (one pass of a probe model, recorded in res.LayerSQNR), and
// the others follow them in that order. A budget stop before every
// candidate was measured is errNoRecovery.
func rankLayers(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, layers []string,
	ms measures, deadline time.Time) ([]Sensitivity, error) {
	stop := opts.stops.loop("fallback sensitivity")
	stopped := func(i, of int) ([]Sensitivity, error) {
		res.Guard.Fallback = fmt.Sprintf("%s after measuring %d of the %d weighted layers it ranks kept float alone, before any model met the guard", opts.stopReason(fmt.Sprintf("stopped at its %s share of the budget", opts.FallbackBudget.Round(time.Second))), i, of)
		return nil, errNoRecovery
	}
	// The probe only chooses what the loop measures: not when the loop
	// would stop before its first measurement.
	if stop(0, deadline) {
		return stopped(0, min(len(layers), sensitivityCandidates))
	}
	candidates, rest := rankingCandidates(opts, float, ranges, res, layers, ms)
	tick := opts.counter("fallback: sensitivity, layers kept float alone", len(candidates))
	for i, l := range candidates {
		tick(i)
		if stop(i, deadline) {
			return stopped(i, len(candidates))
		}
		_, b, _, err := quantizeWith(float, ranges, excluding(opts.Quant, []string{l}))
		if err != nil {
			return nil, err
		}
		r, err := ms.quick(b)
		if err != nil {
			return nil, err
		}
		s := Sensitivity{Node: l, MinCosine: minCosine(r)}
		if r.Accuracy != nil {
			s.DropPoints = r.Accuracy.DropPoints
		}
		if r.Task != nil {
			s.DropPoints = r.Task.DropPoints
		}
		res.Sensitivity = append(res.Sensitivity, s)
	}
	order := slices.Clone(res.Sensitivity)
	slices.SortStableFunc(order, func(a, b Sensitivity) int {
		if a.DropPoints != b.DropPoints {
			return cmp.Compare(a.DropPoints, b.DropPoints)
		}
		return cmp.Compare(b.MinCosine, a.MinCosine) // NaN last
	})
	for _, l := range rest {
		order = append(order, Sensitivity{Node: l})
	}
	return order, nil
}

// rankingCandidates splits the layers into those the ranking measures and
// the rest, in the order of their own error (worst first), when there
// are more than sensitivityCandidates; else, or when the probe cannot
// run, every layer is a candidate (it says why).
func rankingCandidates(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, layers []string, ms measures) (candidates, rest []string) {
	if len(layers) <= sensitivityCandidates {
		return layers, nil
	}
	order, err := ownErrorOrder(opts, float, ranges, res, layers, ms)
	if err != nil {
		opts.progress("fallback: each layer's own error could not be measured (%v): ranking all %d weighted layers", err, len(layers))
		res.LayerSQNR = nil
		return layers, nil
	}
	return order[:sensitivityCandidates], order[sensitivityCandidates:]
}

// ownErrorOrder is the layers, worst own error first (res.LayerSQNR).
func ownErrorOrder(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, layers []string, ms measures) ([]string, error) {
	// The probe reads Q/DQ pairs: a QOperator model is probed in the QDQ
	// form it computes the same as.
	qdq := opts.Quant
	qdq.Format = quantize.FormatQDQ
	_, b, _, err := quantizeWith(float, ranges, qdq)
	if err != nil {
		return nil, err
	}
	opts.progress("fallback: each of %d weighted layers' own error, in one pass of a probe model", len(layers))
	if res.LayerSQNR, err = ms.layers(b, layers); err != nil {
		return nil, err
	}
	order := make([]string, len(res.LayerSQNR))
	for i, s := range res.LayerSQNR {
		order[i] = s.Node
	}
	return order, nil
}

// excluding is q with the named nodes kept float (exact names).
func excluding(q quantize.Options, names []string) quantize.Options {
	q.Exclude = slices.Clone(q.Exclude)
	for _, n := range names {
		q.Exclude = append(q.Exclude, "^"+regexp.QuoteMeta(n)+"$")
	}
	return q
}
