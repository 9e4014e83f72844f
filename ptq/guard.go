package ptq

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
)

// The accuracy guard is on by default: every INT8 model is measured
// against the float model on held-out samples and must keep
//
//   - with labels: the accuracy drop at most GuardMaxDrop points
//     (Options.MaxAccuracyDrop replaces the limit);
//   - without labels, on every classifier-like output (2-D [N, C] with
//     C >= 2, as compare counts top-1 agreement): cosine at least
//     GuardMinCosine (Options.MinCosine replaces it) and top-1 agreement
//     at least GuardMinTop1;
//   - with Options.MinCosine set: that cosine on every output, classifier
//     or not (the explicit criterion of --min-cosine).
//
// When the first INT8 model misses a check, the accuracy control
// (fallBack) keeps the most sensitive layers float; when no such model
// passes, Run writes nothing and returns a *GuardError, unless
// Options.AllowAccuracyLoss.
const (
	GuardMaxDrop   = 1.0  // points
	GuardMinCosine = 0.99 // classifier-like outputs, without labels
	GuardMinTop1   = 0.99 // classifier-like outputs, without labels
)

// Check is one guard criterion and what was measured.
type Check struct {
	Metric string `json:"metric"` // "accuracy drop", "cosine", "top-1 agreement" or "NaN/Inf values where float is finite"
	Output string `json:"output,omitempty"`
	// Limit is a maximum for the accuracy drop (points) and a minimum for
	// cosine and top-1 agreement (fractions).
	Limit float64 `json:"limit"`
	// Measured is NaN for a cosine with no finite pair (encoded as
	// report.json encodes non-finite values).
	Measured jsonfloat.Float `json:"measured"`
	Pass     bool            `json:"pass"`
}

func (c Check) String() string {
	on := ""
	if c.Output != "" {
		on = " of " + c.Output
	}
	if c.Metric == "accuracy drop" {
		rel := "within"
		if !c.Pass {
			rel = "over"
		}
		return fmt.Sprintf("accuracy drop%s %.2f points, %s the %.2f allowed", on, c.Measured, rel, c.Limit)
	}
	rel := "at least"
	if !c.Pass {
		rel = "below"
	}
	if c.Metric == "NaN/Inf values where float is finite" {
		return fmt.Sprintf("%.0f NaN/Inf values%s where float is finite (none allowed)", c.Measured, on)
	}
	if c.Limit == 0 && c.Pass {
		return fmt.Sprintf("%s%s %.4g", c.Metric, on, float64(c.Measured))
	}
	if c.Metric == "top-1 agreement" {
		return fmt.Sprintf("top-1 agreement%s %.2f%%, %s the %.2f%% required", on, 100*c.Measured, rel, 100*c.Limit)
	}
	return fmt.Sprintf("%s%s %.5f, %s the %.5f required", c.Metric, on, c.Measured, rel, c.Limit)
}

// Guard is what the accuracy guard measured and decided.
type Guard struct {
	// Checks are the written (or refused) model's; empty when nothing
	// could be measured (Note says why).
	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
	// Data is what the checks ran on and HeldOut whether it is disjoint
	// from the calibration samples.
	Data    string `json:"data,omitempty"`
	HeldOut bool   `json:"held_out"`
	// First is the fully quantized model's checks when it failed and the
	// accuracy control ran.
	First []Check `json:"first,omitempty"`
	// Allowed: the guard failed and --allow-accuracy-loss wrote the model
	// anyway; it is not recommended.
	Allowed bool `json:"allowed_accuracy_loss,omitempty"`
	// Fallback says what the accuracy control did when it ran.
	Fallback string `json:"fallback,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Failed lists the checks that failed.
func (g *Guard) Failed() []Check {
	var out []Check
	for _, c := range g.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

// GuardError is Run's error when the INT8 model misses the accuracy guard
// even after the accuracy control: nothing was written.
type GuardError struct {
	Guard *Guard
	// Dynamic: the model was dynamic INT8, which has no accuracy control.
	Dynamic bool
}

func (e *GuardError) Error() string {
	var why []string
	for _, c := range e.Guard.Failed() {
		why = append(why, c.String())
	}
	if e.Dynamic {
		return fmt.Sprintf("accuracy guard failed: %s; no dynamic INT8 model was written (keep layers float with --exclude, or --allow-accuracy-loss to keep it anyway)",
			strings.Join(why, "; "))
	}
	return fmt.Sprintf("accuracy guard failed: %s; no INT8 model was written (keeping the most sensitive layers float did not recover it; try another --method, or --allow-accuracy-loss to keep it anyway)",
		strings.Join(why, "; "))
}

// IsGuardError reports whether err is (or wraps) a *GuardError.
func IsGuardError(err error) bool {
	var g *GuardError
	return errors.As(err, &g)
}

// checks measures r against the guard's criteria (see the constants).
func (o Options) checks(r *compare.Result) []Check {
	if r == nil {
		return nil
	}
	var cs []Check
	if a := r.Accuracy; a != nil {
		limit := o.MaxAccuracyDrop
		if limit <= 0 {
			limit = GuardMaxDrop
		}
		cs = append(cs, Check{Metric: "accuracy drop", Output: a.Output, Limit: limit, Measured: jsonfloat.Float(a.DropPoints), Pass: a.DropPoints <= limit})
	}
	for _, s := range r.Outputs {
		if s.NewNonFinite > 0 {
			// NaN/Inf where float is finite fails whatever else holds.
			cs = append(cs, Check{Metric: "NaN/Inf values where float is finite", Output: s.Name, Measured: jsonfloat.Float(s.NewNonFinite)})
		}
		cos := o.MinCosine
		if cos <= 0 && r.Accuracy == nil && (s.Classifier || o.Dynamic) {
			// Dynamic INT8 is for encoders and language models, whose
			// outputs are hidden states and logits, not [N, C] scores:
			// every output is held to the cosine.
			cos = GuardMinCosine
		}
		if cos > 0 {
			// NaN (no finite pair) fails.
			cs = append(cs, Check{Metric: "cosine", Output: s.Name, Limit: cos, Measured: s.Cosine, Pass: float64(s.Cosine) >= cos})
		}
		switch {
		case r.Accuracy == nil && s.Classifier && o.evalIsRandom():
			// A classifier on noise gives near-ties: which class wins is
			// not a decision, so agreement is reported, not enforced.
			cs = append(cs, Check{Metric: "top-1 agreement (random inputs: reported, not enforced)", Output: s.Name, Measured: jsonfloat.Float(s.Top1Agree), Pass: true})
		case r.Accuracy == nil && s.Classifier:
			cs = append(cs, Check{Metric: "top-1 agreement", Output: s.Name, Limit: GuardMinTop1, Measured: jsonfloat.Float(s.Top1Agree), Pass: s.Top1Agree >= GuardMinTop1})
		}
	}
	return cs
}

func passed(cs []Check) bool {
	for _, c := range cs {
		if !c.Pass {
			return false
		}
	}
	return true
}

// evalIsRandom reports whether the guard measures on random inputs.
func (o Options) evalIsRandom() bool {
	return o.EvalData == "random" || (o.EvalData == "" && o.CalibData == "random")
}

// meets reports whether a measurement passes the guard.
func (o Options) meets(r *compare.Result) bool { return r != nil && passed(o.checks(r)) }

// minHoldOut is the fewest samples the guard holds out of a single data
// source; smaller sources are checked on the calibration data.
const minHoldOut = 32

// holdOut splits the calibration data when there is no evaluation data:
// with --calib-samples N the samples calibration does not draw (the same
// seeded order continued), else a quarter of the samples drawn with the
// seed (calibration takes the rest). It returns the evaluation source and
// whether it is held out; without a split the guard runs on the
// calibration data itself and says so.
func holdOut(opts *Options, inputs []data.Input) (string, data.Options, bool) {
	spec := opts.CalibData
	if spec == "" {
		return spec, opts.CalibOpts, false
	}
	if spec == "random" {
		// Fresh draws: another seed, and enough of them that one flipped
		// near-tie is not a 12-point drop in agreement.
		ev := opts.CalibOpts
		ev.Seed ^= 0x686f6c64 // "hold"
		ev.Samples = max(ev.Samples, 2*minHoldOut)
		return spec, ev, true
	}
	ev := opts.CalibOpts
	ev.Shapes = nil
	if opts.CalibOpts.Samples > 0 {
		ev.Skip, ev.Samples, ev.Shuffle = opts.CalibOpts.Samples, 0, opts.CalibOpts.Shuffle
		if n, err := countSamples(spec, inputs, ev); err == nil && n >= minHoldOut {
			return spec, ev, true
		}
		return spec, opts.CalibOpts, false
	}
	n, err := countSamples(spec, inputs, ev)
	if err != nil || n < 4*minHoldOut {
		return spec, opts.CalibOpts, false
	}
	keep := n - n/4
	for _, shuffle := range []bool{true, false} {
		ev.Shuffle, ev.Skip = shuffle, keep
		if m, err := countSamples(spec, inputs, ev); err == nil && m == n-keep {
			opts.CalibOpts.Samples, opts.CalibOpts.Shuffle = keep, shuffle
			return spec, ev, true
		}
	}
	return spec, opts.CalibOpts, false
}

// countSamples reads a source to the end and counts its samples.
func countSamples(spec string, inputs []data.Input, opts data.Options) (int, error) {
	src, err := data.Open(spec, inputs, opts)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	n := 0
	for {
		b, err := src.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		n += b.Samples
	}
}

// guard measures the INT8 model, runs the accuracy control when it fails,
// and records the outcome in res.Guard. It returns the model to write.
func guard(opts Options, float graph.Serialized, plain map[string][2]float64, res *Result,
	q *graph.Model, int8Model graph.Serialized, measure, quick func(graph.Serialized) (*compare.Result, error)) (*graph.Model, graph.Serialized, error) {
	g := res.Guard
	if res.Accuracy == nil {
		g.Note = "not measured: no evaluation or calibration data to run on"
		g.Pass = true
		return q, int8Model, nil
	}
	g.Checks = opts.checks(res.Accuracy)
	if len(g.Checks) == 0 {
		g.Note = "nothing to check: no labels and no classifier-like output ([N, C] with C >= 2); give --eval-labels or --min-cosine"
		g.Pass = true
		return q, int8Model, nil
	}
	if g.Pass = passed(g.Checks); g.Pass {
		return q, int8Model, nil
	}
	g.First = g.Checks
	opts.progress("the accuracy guard failed (%s): keeping the most sensitive layers float", FailedChecks(g.Checks))
	fq, fb, err := fallBack(opts, float, plain, res, measure, quick)
	switch {
	case err == nil:
		g.Checks, g.Pass = opts.checks(res.Accuracy), true
		return fq, fb, nil
	case !errors.Is(err, errNoRecovery):
		return nil, graph.Serialized{}, err
	}
	if !opts.AllowAccuracyLoss {
		return nil, graph.Serialized{}, &GuardError{Guard: g}
	}
	g.Allowed = true
	return q, int8Model, nil
}

// FailedChecks names each failed check with its limit and value.
func FailedChecks(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.Pass {
			out = append(out, c.String())
		}
	}
	return strings.Join(out, "; ")
}
