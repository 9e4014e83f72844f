package ptq

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
)

// The accuracy guard is on by default: every INT8 model is measured
// against the float model on held-out samples, and every output it shares
// with the float model is judged (compare's per-sample figures):
//
//   - NaN/Inf where the float model is finite fails, always;
//   - the output labels score (with --eval-labels): the accuracy drop at
//     most GuardMaxDrop points (Options.MaxAccuracyDrop replaces it);
//     with a task plug-in (--eval-task ctc, text-detection,
//     segmentation), the drop of its headline figure (sequence
//     accuracy, hmean, mIoU) the same way;
//   - every other output of compare.SmallOutput elements a sample or more
//     (a feature map, a mask, a spectrogram, logits, hidden states): the
//     worst sample's cosine at least GuardMinCosine (Options.MinCosine)
//     and the worst sample's relative error at most GuardMaxRelError
//     (Options.MaxRelError);
//   - smaller outputs (a score, two class probabilities), where a cosine
//     means nothing: the relative error over all samples at most
//     GuardMaxRelError;
//   - [N, C] scores and [B, T, V] logits (outputs named *logits*): top-1
//     agreement at least GuardMinTop1 on the rows clear of near-ties
//     (compare.ClearMargin), when at least GuardMinClearRows are.
//
// When the first INT8 model misses a check, the accuracy control
// (fallBack) keeps the most sensitive layers float; when no such model
// passes, Run writes nothing and returns a *GuardError, unless
// Options.AllowAccuracyLoss. Options.NoGuard turns the guard off by name:
// the figures are still measured and reported.
const (
	GuardMaxDrop      = 1.0  // points
	GuardMinCosine    = 0.99 // the worst sample's
	GuardMaxRelError  = 0.15 // RMS error over the RMS deviation of float from its mean (about what a cosine of 0.99 allows)
	GuardMinTop1      = 0.99 // on the rows clear of near-ties
	GuardMinClearRows = 8
)

// GuardError is Run's error when the INT8 model misses the accuracy guard
// even after the accuracy control: nothing was written.
type GuardError struct {
	Guard *schema.Guard
	// Dynamic: the model was dynamic INT8, which has no accuracy control.
	Dynamic bool
	// Stops is where the budget ended the quantization (Result.Stops).
	Stops Stops
}

func (e *GuardError) Error() string {
	why := schema.FailedChecks(e.Guard.Checks)
	if e.Dynamic {
		return fmt.Sprintf("accuracy guard refused the dynamic INT8 model: %s; nothing was written (keep layers float with --exclude, or --allow-accuracy-loss to keep it anyway)", why)
	}
	hint := "try another --method, or --allow-accuracy-loss to keep it anyway"
	if e.Guard.Data == "random" {
		hint = "measured on random inputs, a smoke test: calibrate and check on data like the deployment's (--calib-data, --eval-data) before judging the model"
	}
	return fmt.Sprintf("accuracy guard refused the INT8 model: %s; nothing was written (%s; %s)",
		why, FallbackWords(e.Guard), hint)
}

// FallbackWords says in a few words what the accuracy control did: how a
// refusal's fallback ended.
func FallbackWords(g *schema.Guard) string {
	if g.Fallback == "" {
		return "keeping the most sensitive layers float did not recover it"
	}
	return g.Fallback
}

// IsGuardError reports whether err is (or wraps) a *GuardError.
func IsGuardError(err error) bool {
	var g *GuardError
	return errors.As(err, &g)
}

// Limits replace the guard's defaults where set (> 0).
type Limits struct {
	MaxAccuracyDrop, MinCosine, MaxRelError float64
}

// limits are the guard's limits under o.
func (o Options) limits() Limits {
	return Limits{MaxAccuracyDrop: o.MaxAccuracyDrop, MinCosine: o.MinCosine, MaxRelError: o.MaxRelError}
}

// checks measures r against the guard's criteria (see the constants).
func (o Options) checks(r *compare.Result) []schema.Check { return Judge(r, o.limits()) }

// Judge holds a comparison (A the reference, B the model judged) to the
// accuracy guard's criteria, every output: the guard's verdict on an INT8
// model and a build's on every artifact it checks.
func Judge(r *compare.Result, l Limits) []schema.Check {
	if r == nil {
		return nil
	}
	var cs []schema.Check
	labelled := ""
	maxDrop := l.MaxAccuracyDrop
	if maxDrop <= 0 {
		maxDrop = GuardMaxDrop
	}
	if a := r.Accuracy; a != nil {
		limit := maxDrop
		labelled = a.Output
		cs = append(cs, schema.Check{Metric: schema.MetricDrop, Output: a.Output, Limit: limit, Measured: jsonfloat.Float(a.DropPoints), Pass: a.DropPoints <= limit})
	}
	if f := r.Task; f != nil {
		limit := maxDrop
		labelled = f.Output
		cs = append(cs, schema.Check{Metric: schema.MetricTaskDrop, Output: f.Output, Limit: limit, Measured: jsonfloat.Float(f.DropPoints), Pass: f.DropPoints <= limit,
			Detail: fmt.Sprintf("%s %s: %.2f%% float, %.2f%% quantized, on %d samples", f.Task, f.Metric, f.A, f.B, f.Samples)})
	}
	minCos, maxRel := GuardMinCosine, GuardMaxRelError
	if l.MinCosine > 0 {
		minCos = l.MinCosine
	}
	if l.MaxRelError > 0 {
		maxRel = l.MaxRelError
	}
	for _, s := range r.Outputs {
		if s.NewNonFinite > 0 {
			// NaN/Inf where float is finite fails whatever else holds.
			cs = append(cs, schema.Check{Metric: schema.MetricNonFinite, Output: s.Name, Measured: jsonfloat.Float(s.NewNonFinite)})
		}
		byTask := r.Task != nil && r.Task.Judges(s.Name)
		if s.ShapeMismatches > 0 && !byTask {
			// A data-dependent dim differs from float's, and no task
			// metric (detections matched by IoU) judges the output.
			cs = append(cs, schema.Check{Metric: schema.MetricShape, Output: s.Name, Measured: jsonfloat.Float(s.ShapeMismatches), Detail: "first: " + s.FirstMismatch})
		}
		if s.Name == labelled || byTask || s.Total == 0 {
			continue // judged by its task metric; or empty in both models (compare checks the shapes agree)
		}
		if s.SampleElements >= compare.SmallOutput {
			cs = append(cs,
				schema.Check{Metric: schema.MetricCosine, Output: s.Name, Limit: minCos, Measured: s.MinSampleCosine,
					Pass: float64(s.MinSampleCosine) >= minCos, Detail: worstSample(s.WorstCosineSample, s.SamplesCompared)},
				schema.Check{Metric: schema.MetricSampleRel, Output: s.Name, Limit: maxRel, Measured: s.MaxSampleRelError,
					Pass: float64(s.MaxSampleRelError) <= maxRel, Detail: worstSample(s.WorstRelSample, s.SamplesCompared)})
		} else {
			cs = append(cs, schema.Check{Metric: schema.MetricRelError, Output: s.Name, Limit: maxRel, Measured: s.RelError,
				Pass: float64(s.RelError) <= maxRel, Detail: fmt.Sprintf("%d values a sample: over all %d samples", s.SampleElements, s.SamplesCompared)})
		}
		if c, ok := top1Check(s); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// top1Check is the top-1 agreement of an [N, C] output, or of a [B, T, V]
// output named as logits, on its rows clear of near-ties.
func top1Check(s *compare.OutputStats) (schema.Check, bool) {
	t := s.Top1
	if t == nil || (t.Per != "sample" && !strings.Contains(strings.ToLower(s.Name), "logits")) {
		return schema.Check{}, false
	}
	detail := fmt.Sprintf("%.2f%% over all %d %ss; %d clear of near-ties", 100*t.Agreement, t.Rows, t.Per, t.ClearRows)
	if t.ClearRows < GuardMinClearRows {
		return schema.Check{Metric: schema.MetricTop1Report, Output: s.Name, Measured: jsonfloat.Float(t.Agreement), Pass: true,
			Detail: fmt.Sprintf("only %d of %d %ss clear of near-ties", t.ClearRows, t.Rows, t.Per)}, true
	}
	return schema.Check{Metric: schema.MetricTop1, Output: s.Name, Limit: GuardMinTop1, Measured: jsonfloat.Float(t.ClearAgree),
		Pass: t.ClearAgree >= GuardMinTop1, Detail: detail}, true
}

// worstSample names the sample a worst figure came from.
func worstSample(i, n int64) string {
	if i < 0 || n <= 1 {
		return ""
	}
	return fmt.Sprintf("sample %d of %d", i, n)
}

// Passed reports whether every check passed.
func Passed(cs []schema.Check) bool { return passed(cs) }

func passed(cs []schema.Check) bool {
	for _, c := range cs {
		if !c.Pass {
			return false
		}
	}
	return true
}

// meets reports whether a measurement passes the guard.
func (o Options) meets(r *compare.Result) bool { return r != nil && passed(o.checks(r)) }

// minHoldOut is the fewest random samples a check draws: one flipped
// near-tie is then not a 12-point drop in agreement.
const minHoldOut = 32

// holdOut splits the calibration data when there is no evaluation data:
// with --calib-samples N the samples calibration does not draw (the same
// seeded order continued), else data.HeldOut of the samples drawn with the
// seed (calibration takes the rest). It returns the evaluation source and
// whether it is held out; a source too small to split (data.MinSplit) is
// checked on the calibration data itself, and the caveats say so.
func holdOut(opts *Options, inputs []data.Input) (string, data.Options, bool) {
	spec := opts.CalibData
	if spec == "" {
		return spec, opts.CalibOpts, false
	}
	if spec == "random" {
		// Fresh draws: another seed, and enough of them.
		ev := opts.CalibOpts
		ev.Seed ^= randomSeedOffset
		ev.Samples = max(ev.Samples, 2*minHoldOut)
		return spec, ev, true
	}
	ev := opts.CalibOpts
	ev.Shapes = nil
	if opts.CalibOpts.Samples > 0 {
		ev.Skip, ev.Samples, ev.Shuffle = opts.CalibOpts.Samples, 0, opts.CalibOpts.Shuffle
		if n, err := data.CountSamples(spec, inputs, ev); err == nil && n > 0 {
			return spec, ev, true
		}
		return spec, opts.CalibOpts, false
	}
	keep, _, shuffle, ok := data.Split(spec, inputs, ev)
	if !ok {
		return spec, opts.CalibOpts, false
	}
	opts.CalibOpts.Samples, opts.CalibOpts.Shuffle = keep, shuffle
	ev.Skip, ev.Shuffle = keep, shuffle
	return spec, ev, true
}

// guard measures the INT8 model, runs the accuracy control when it fails,
// and records the outcome in res.Guard. It returns the model to write.
func guard(opts *Options, float graph.Serialized, plain map[string][2]float64, res *Result,
	q *graph.Model, int8Model graph.Serialized, ms measures) (*graph.Model, graph.Serialized, error) {
	g := res.Guard
	if res.Accuracy == nil {
		g.Note = "not measured: no evaluation or calibration data to run on"
		g.Pass = true
		return q, int8Model, nil
	}
	g.Checks = opts.checks(res.Accuracy)
	if len(g.Checks) == 0 {
		// Every output is judged: none means none could be compared.
		return nil, graph.Serialized{}, fmt.Errorf("accuracy guard: no output of the model could be compared with float (%s); --no-guard writes the model unjudged", strings.Join(res.Accuracy.Skipped, "; "))
	}
	if opts.NoGuard {
		g.Off, g.Pass = true, true
		g.Note = "the accuracy guard is off (--no-guard): the checks are reported, not enforced"
		return q, int8Model, nil
	}
	if g.Pass = passed(g.Checks); g.Pass {
		return q, int8Model, nil
	}
	g.First = g.Checks
	// The techniques' tries and the layer fallback share the accuracy
	// control's budget.
	started := time.Now()
	if opts.CalibData != "" {
		tq, tb, err := tryTechniques(opts, float, plain, res, ms.full, started)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		if tq != nil {
			q, int8Model = tq, tb
			if g.Checks = opts.checks(res.Accuracy); passed(g.Checks) {
				g.Pass = true
				g.Fallback = schema.JoinTechniques(res.Techniques.Applied)
				return q, int8Model, nil
			}
		}
	}
	opts.progress("the accuracy guard failed (%s): keeping the most sensitive layers float", schema.FailedChecks(g.Checks))
	fo := *opts
	if fo.FallbackBudget > 0 {
		// At least a nanosecond: 0 would mean no bound.
		fo.FallbackBudget = max(fo.FallbackBudget-time.Since(started), time.Nanosecond)
	}
	fq, fb, err := fallBack(fo, float, plain, res, ms)
	if res.Techniques != nil && res.Techniques.ByGuard && g.Fallback != "" {
		g.Fallback = schema.JoinTechniques(res.Techniques.Applied) + ", then " + g.Fallback
	}
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
