package ptq

import (
	"fmt"
	"slices"
	"time"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// guardTries are the technique sets the accuracy control tries, in order,
// when the INT8 model misses the guard and before it keeps layers float:
// each costs a run or two over the calibration data and one measurement,
// little next to measuring every layer alone, and keeps the model INT8.
// SmoothQuant is not among them: it recalibrates.
var guardTries = [][]schema.Technique{
	{quantize.TechniqueBiasCorrection},
	{quantize.TechniqueGPTQ, quantize.TechniqueBiasCorrection},
}

// tryTechniques measures the INT8 model with each of guardTries that adds
// something to opts.Techniques, keeping each that measures better than
// the best so far (see improves): opts.Quant, res.Quantize, res.Accuracy
// and res.Techniques then say so. It stops at the first that meets the
// guard and returns the best model kept, or nil when none helped.
func tryTechniques(opts *Options, float graph.Serialized, plain map[string][2]float64, res *Result,
	measure func(graph.Serialized) (*compare.Result, error), started time.Time) (*graph.Model, graph.Serialized, error) {
	var best *graph.Model
	var bestBytes graph.Serialized
	stop, tries := opts.stops.loop("guard tries"), 0
	var deadline time.Time
	if opts.FallbackBudget > 0 {
		deadline = started.Add(opts.FallbackBudget)
	}
	for _, set := range guardTries {
		var missing []schema.Technique
		for _, t := range set {
			if !slices.Contains(opts.Techniques, t) {
				missing = append(missing, t)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if stop(tries, deadline) {
			res.Guard.Note = fmt.Sprintf("%s before trying %s", opts.stopReason(fmt.Sprintf("the accuracy control's %s budget ran out", opts.FallbackBudget.Round(time.Second))), schema.JoinTechniques(set))
			break
		}
		tries++
		opts.progress("the accuracy guard failed (%s): trying %s", schema.FailedChecks(opts.checks(res.Accuracy)), schema.JoinTechniques(set))
		try := *opts
		rep := &schema.TechniquesReport{}
		if slices.Contains(missing, quantize.TechniqueGPTQ) {
			rounded, g, err := gptqRounding(try, float, plain, GuardGPTQMaxDim, deadline)
			if err != nil {
				return nil, graph.Serialized{}, err
			}
			try.Quant.Rounded, rep.GPTQ = rounded, g
		}
		if slices.Contains(set, quantize.TechniqueBiasCorrection) {
			// Measured on the weights as this set rounds them.
			shifts, b, err := biasCorrection(try, float, plain)
			if err != nil {
				return nil, graph.Serialized{}, err
			}
			try.Quant.BiasShift, rep.Bias = shifts, b
		}
		q, b, qrep, err := quantizeWith(float, plain, try.Quant)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		r, err := measure(b)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		t := schema.TechniqueTry{Techniques: set, Checks: opts.checks(r), Pass: opts.meets(r), Kept: improves(r, res.Accuracy)}
		res.Guard.Tried = append(res.Guard.Tried, t)
		if !t.Kept {
			continue
		}
		opts.Quant = try.Quant
		res.Quantize, res.Accuracy = qrep, r
		if res.Techniques == nil {
			res.Techniques = &schema.TechniquesReport{}
		}
		for _, m := range missing {
			if !slices.Contains(res.Techniques.Applied, m) {
				res.Techniques.Applied = append(res.Techniques.Applied, m)
			}
		}
		slices.SortFunc(res.Techniques.Applied, func(a, b schema.Technique) int {
			return slices.Index(quantize.Techniques, a) - slices.Index(quantize.Techniques, b)
		})
		if rep.GPTQ != nil {
			res.Techniques.GPTQ = rep.GPTQ
		}
		if rep.Bias != nil {
			res.Techniques.Bias = rep.Bias
		}
		res.Techniques.ByGuard = true
		best, bestBytes = q, b
		if t.Pass {
			break
		}
	}
	return best, bestBytes, nil
}

// improves says whether b measures better than a: the headline figure
// when there is one (the task's drop, else top-1's), else the worst
// cosine.
func improves(b, a *compare.Result) bool {
	switch {
	case b.Task != nil && a.Task != nil:
		return b.Task.DropPoints < a.Task.DropPoints
	case b.Accuracy != nil && a.Accuracy != nil:
		return b.Accuracy.DropPoints < a.Accuracy.DropPoints
	}
	return minCosine(b) > minCosine(a)
}
