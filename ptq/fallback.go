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

// Sensitivity is what quantizing one layer alone costs.
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
// sensitivity is measured on (the models kept are measured on all).
const sensitivitySamples = 256

// fallBack measures every named weighted layer quantized alone (quick:
// on at most sensitivitySamples samples), then keeps the most sensitive
// layers float: the fewest that make the criteria hold, found by
// bisection over the count (keeping more layers float rarely costs
// accuracy; each candidate is measured on all the evaluation data). When
// even all but the least sensitive layer kept float misses them it
// returns errNoRecovery.
func fallBack(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result,
	measure, quick func(graph.Serialized) (*compare.Result, error)) (*graph.Model, graph.Serialized, error) {
	m, err := float.Parse()
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	var layers []string
	for _, n := range m.Graph.Nodes {
		if n.Name != "" && slices.Contains([]string{"Conv", "ConvTranspose", "Gemm", "MatMul"}, n.OpType) {
			layers = append(layers, n.Name)
		}
	}
	exclude := func(names []string) quantize.Options { return excluding(opts.Quant, names) }
	var deadline time.Time
	if opts.FallbackBudget > 0 {
		deadline = time.Now().Add(opts.FallbackBudget)
	}
	// When even every weighted layer kept float misses the criteria, the
	// loss is in the ranges of the ops between them (pass-through Q/DQ):
	// no choice of layers can recover it, so say so at the cost of one run.
	// Not so with bias correction: a layer kept float loses its
	// correction, which also made up for the clipping of its input, so
	// more layers float can measure worse.
	if _, b, _, err := quantizeWith(float, ranges, exclude(layers)); err == nil && opts.Quant.BiasShift == nil {
		r, err := measure(b)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		if !opts.meets(r) {
			res.Guard.Fallback = fmt.Sprintf("even with all %d weighted layers kept float the model misses the guard: the loss is in the activation ranges between them, which falling back layers cannot fix", len(layers))
			res.Guard.FallbackChecks = opts.checks(r)
			return nil, graph.Serialized{}, errNoRecovery
		}
	}
	order, err := rankLayers(opts, float, ranges, res, layers, quick, deadline)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	type try struct {
		q    *graph.Model
		b    graph.Serialized
		rep  *quantize.Report
		r    *compare.Result
		kept []string
	}
	attempt := func(k int) (*try, error) {
		var kept []string
		for _, s := range order[:k] {
			kept = append(kept, s.Node)
		}
		q, b, rep, err := quantizeWith(float, ranges, exclude(kept))
		if err != nil {
			return nil, err
		}
		r, err := measure(b)
		if err != nil {
			return nil, err
		}
		return &try{q, b, rep, r, kept}, nil
	}
	if len(order) < 2 {
		return nil, graph.Serialized{}, errNoRecovery
	}
	best, err := attempt(len(order) - 1)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	if !opts.meets(best.r) {
		res.Guard.Fallback = fmt.Sprintf("with %d of %d weighted layers kept float the model still misses the guard", len(best.kept), len(layers))
		res.Guard.FallbackChecks = opts.checks(best.r)
		return nil, graph.Serialized{}, errNoRecovery
	}
	// best passes with hi layers float; find the fewest, or the fewest
	// found when the budget's share runs out.
	lo, hi := 0, len(order)-1
	stopped := ""
	searchStop := opts.stops.loop("fallback search")
	for step := 0; hi-lo > 1; step++ {
		if searchStop(step, deadline) {
			stopped = fmt.Sprintf(" (%s: fewer may do)", opts.stopReason(fmt.Sprintf("the search stopped at its %s share of the budget", opts.FallbackBudget.Round(time.Second))))
			break
		}
		mid := (lo + hi) / 2
		t, err := attempt(mid)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		if opts.meets(t.r) {
			best, hi = t, mid
		} else {
			lo = mid
		}
	}
	res.Quantize, res.Accuracy, res.FellBack = best.rep, best.r, best.kept
	res.Guard.Fallback = fmt.Sprintf("%d of %d weighted layers kept float: %s%s", len(best.kept), len(layers), strings.Join(best.kept, ", "), stopped)
	return best.q, best.b, nil
}

// rankLayers measures each weighted layer quantized alone (quick), records
// the sensitivities in res, and returns them most sensitive first: the
// largest accuracy drop, then the lowest cosine (NaN first). A budget
// stop before every layer was measured is errNoRecovery.
func rankLayers(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result, layers []string,
	quick func(graph.Serialized) (*compare.Result, error), deadline time.Time) ([]Sensitivity, error) {
	stop := opts.stops.loop("fallback sensitivity")
	tick := opts.counter("fallback: sensitivity, layers quantized alone", len(layers))
	for i, l := range layers {
		tick(i)
		if stop(i, deadline) {
			res.Guard.Fallback = fmt.Sprintf("%s after measuring %d of %d weighted layers alone, before any model met the guard", opts.stopReason(fmt.Sprintf("stopped at its %s share of the budget", opts.FallbackBudget.Round(time.Second))), i, len(layers))
			return nil, errNoRecovery
		}
		_, b, _, err := quantizeWith(float, ranges, excluding(opts.Quant, without(layers, l)))
		if err != nil {
			return nil, err
		}
		r, err := quick(b)
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
		switch {
		case a.DropPoints != b.DropPoints:
			if a.DropPoints > b.DropPoints {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.MinCosine, b.MinCosine) // NaN first
	})
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

func without(xs []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(xs), func(y string) bool { return y == x })
}
