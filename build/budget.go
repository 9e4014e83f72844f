package build

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// Plan is how a build spends its time budget (--budget). Only the stages
// whose length optc chooses are planned: the placement search, the timing
// windows of verify and the Triton sweep. Each gets a share of the budget
// by weight (budgetWeights) and keeps its configured length when that is
// shorter; the rest of the budget is left to the rest of the build, of
// which calibration, the accuracy control and the SQNR stop at parts of it
// (loading, the passes, the checks and the exports are not bounded: the
// model's size and the data decide their cost, and checkBudgetPossible
// refuses a budget they alone would overrun). The plan is printed when
// the build starts and recorded in report.json.
type Plan struct {
	BudgetSeconds float64 `json:"budget_seconds"` // 0: no budget
	// PlacementSeconds bounds the placement search (0 when there is none).
	PlacementSeconds float64 `json:"placement_seconds,omitempty"`
	// TimedModels and TimingWindows are the models verify times (the input
	// and every model artifact ORT runs) and the windows each gets: one per
	// latency batch size and repeat. WindowSeconds is each window's length.
	TimedModels   int     `json:"timed_models"`
	TimingWindows int     `json:"timing_windows"`
	WindowSeconds float64 `json:"window_seconds"`
	// SweepPoints and SweepPointSeconds are the Triton sweep's points and
	// each one's timed window; SweepSeconds bounds the whole sweep, its
	// warm-ups and sessions included (0: no budget). All are 0 when the
	// profile is pinned or there is no Triton target.
	SweepPoints       int     `json:"sweep_points,omitempty"`
	SweepPointSeconds float64 `json:"sweep_point_seconds,omitempty"`
	SweepSeconds      float64 `json:"sweep_seconds,omitempty"`
	// RestSeconds is the share left to what the budget does not bound
	// (loading, passes, calibration, checks, exports); 0 without a budget.
	RestSeconds float64 `json:"rest_seconds,omitempty"`
	// CalibrationSeconds is when calibration stops, counted from the
	// build's start (0 without a budget): at the first batch after it,
	// once ptq.MinBudgetSamples have run; the samples used are recorded
	// (decisions.json) so that a replay calibrates on the same ones.
	CalibrationSeconds float64 `json:"calibration_seconds,omitempty"`
	// FallbackSeconds bounds the accuracy guard's fallback of each INT8
	// quantization: half the rest's share (0 without a budget). When it
	// runs out the fallback keeps the best passing model found, or the
	// guard refuses.
	FallbackSeconds float64 `json:"fallback_seconds,omitempty"`
	// ChecksSeconds is when the artifacts' checks stop, counted from the
	// build's start (0 without a budget): the budget less the timing's
	// and the sweep's shares. A check past it ends at the next batch once
	// it has schema.MinCheckSamples; the samples used are recorded
	// (decisions.json) so that a replay checks on the same ones.
	ChecksSeconds float64 `json:"checks_seconds,omitempty"`
	// Lines are the plan as printed.
	Lines []string `json:"lines"`
}

// budgetWeights share the budget: placement and timing alike, the sweep
// half as much, and the unbounded rest of the build as much as placement
// (it was a third to a half of measured builds: calibration, checks).
var budgetWeights = struct{ placement, timing, sweep, rest float64 }{3, 3, 1.5, 3}

// minWindowRuns is the fewest runs in a timing window, however long they
// take (bench.Options.MinIterations): the window's median is then a
// median; the percentiles they cannot support are not reported.
const minWindowRuns = 3

// plan decides the shares before any stage runs.
func (b *builder) plan() *Plan {
	c := b.c
	p := &Plan{BudgetSeconds: c.Budget.Seconds()}
	placementOn := c.INT8 && b.needs(PlacedScheme) && c.Quantize.Placement == schema.ModeAuto &&
		c.Quantize.Format != string(quantize.FormatQOperator) && b.replay == nil
	p.TimedModels = b.timedModels()
	repeats := max(c.Latency.Repeats, 1)
	p.TimingWindows = p.TimedModels * len(c.Latency.Batches) * repeats
	if b.replay == nil {
		p.SweepPoints = b.cost().SweepPoints
	}
	placementS, windowS, sweepS := c.Quantize.PlacementBudget.Seconds(), c.Latency.Duration.Seconds()/float64(repeats), c.Latency.Duration.Seconds()
	if p.BudgetSeconds > 0 {
		w := budgetWeights
		total := w.timing + w.rest
		if placementOn {
			total += w.placement
		}
		if p.SweepPoints > 0 {
			total += w.sweep
		}
		share := func(weight float64) float64 { return p.BudgetSeconds * weight / total }
		p.RestSeconds = round2(share(w.rest))
		if c.INT8 {
			p.FallbackSeconds = round2(ptq.FallbackShare * p.RestSeconds)
			p.CalibrationSeconds = round2(ptq.CalibrationShare * p.RestSeconds)
		}
		p.ChecksSeconds = round2(share(w.rest))
		if placementOn {
			p.ChecksSeconds = round2(share(w.rest) + share(w.placement))
		}
		placementS = min(placementS, share(w.placement))
		windowS = min(windowS, share(w.timing)/float64(p.TimingWindows))
		if p.SweepPoints > 0 {
			// Half of each point's share is its window, half is left for
			// its warm-up runs and the thread count's session, whose cost
			// the model decides; the sweep skips the points that do not fit.
			p.SweepSeconds = round2(share(w.sweep))
			sweepS = min(sweepS, share(w.sweep)/float64(p.SweepPoints)/2)
		}
		p.Lines = append(p.Lines, fmt.Sprintf("budget %s: placement, timing and the Triton sweep get shares, calibration, the accuracy control (its tries, GPTQ included, and fallback), the per-tensor SQNR and the guard's and the artifacts' checks stop at theirs; loading, passes, sessions and exports are not bounded by time (a build that ends more than %d%% past its budget says so)", c.Budget.Duration, budgetMarginPercent))
		if p.CalibrationSeconds > 0 {
			p.Lines = append(p.Lines, fmt.Sprintf("calibration: stops %s after the build began, once it has %d samples (the samples used are recorded for --replay)", secs(p.CalibrationSeconds), ptq.MinBudgetSamples))
		}
		if p.FallbackSeconds > 0 {
			p.Lines = append(p.Lines, fmt.Sprintf("accuracy guard: its first check stops %s after the build began, once it has %d samples (its tries then compare on as many); its fallback: at most %s per INT8 model (then the best passing model found, or a refusal)",
				secs(ptq.CheckShare*p.RestSeconds), schema.MinCheckSamples, secs(p.FallbackSeconds)))
		}
		p.Lines = append(p.Lines, fmt.Sprintf("checks: stop %s after the build began, each once it has %d samples, every later one on as many (the samples used are recorded for --replay)", secs(p.ChecksSeconds), schema.MinCheckSamples))
	} else {
		p.Lines = append(p.Lines, "no budget (budget: 0): every stage runs as configured")
	}
	if r := b.replay; r != nil {
		p.Lines = append(p.Lines, fmt.Sprintf("replay: %s from %s, none of them timed", strings.Join(r.rec.decided(), ", "), r.path))
	}
	if placementOn {
		p.PlacementSeconds = round2(placementS)
		p.Lines = append(p.Lines, fmt.Sprintf("placement search: %s (a step starts only when it fits; FP32 unless INT8 is confirmed faster within it)", secs(placementS)))
	}
	p.WindowSeconds = windowSeconds(windowS)
	p.Lines = append(p.Lines, fmt.Sprintf("timing: %d models x %d batch sizes x %d repeats, %s windows of at least %d runs (%s in all, more for a model slower than that)",
		p.TimedModels, len(c.Latency.Batches), repeats, secs(windowS), minWindowRuns, secs(windowS*float64(p.TimingWindows))))
	if p.BudgetSeconds > 0 {
		p.Lines[len(p.Lines)-1] += fmt.Sprintf("; a window ends at %d runs; warm-ups of %d runs or a window's time at most", bench.EnoughRuns, bench.DefaultWarmup)
	}
	if p.SweepPoints > 0 {
		p.SweepPointSeconds = windowSeconds(sweepS)
		if p.SweepSeconds > 0 {
			p.Lines = append(p.Lines, fmt.Sprintf("triton sweep: %s for %d points: windows of %s or %d runs (%d where a p99 cannot fit), the rest for their warm-ups (%d runs, or a window's time at most) and the sessions; points that do not fit are skipped (the profiles then say so)",
				secs(p.SweepSeconds), p.SweepPoints, secs(sweepS), bench.EnoughRuns, export.ShortWindowRuns, bench.DefaultWarmup))
		} else {
			p.Lines = append(p.Lines, fmt.Sprintf("triton sweep: %d points, windows of %s, each after %d warm-up runs", p.SweepPoints, secs(sweepS), bench.DefaultWarmup))
		}
	}
	return p
}

// calibrationDeadline is when calibration stops within a budget; zero
// without one.
func (b *builder) calibrationDeadline() time.Time {
	if b.res.Plan.CalibrationSeconds == 0 {
		return time.Time{}
	}
	return b.started.Add(time.Duration(b.res.Plan.CalibrationSeconds * float64(time.Second)))
}

// checkStop is the Stop of the check of one artifact (compare.Options.Stop),
// keyed by what it checks. Within a budget, a check past the plan's
// ChecksSeconds stops at the next batch once it has schema.MinCheckSamples
// samples, and every later check at the same count, so that the
// artifacts' figures stay comparable; the counts are recorded. A replay
// stops each check at its recorded count, and nowhere else. nil: the
// check runs to the data's end.
func (b *builder) checkStop(key string) func(samples int64) bool {
	if r := b.replay; r != nil {
		at, ok := r.rec.CheckStops[key]
		if !ok {
			return nil
		}
		if !slices.Contains(r.used, checkStopsDecision) {
			r.used = append(r.used, checkStopsDecision)
		}
		b.recordCheckStop(key, at)
		b.res.ChecksStoppedAt = at
		return func(n int64) bool { return n >= at }
	}
	if b.res.Plan.ChecksSeconds == 0 {
		return nil
	}
	deadline := b.started.Add(time.Duration(b.res.Plan.ChecksSeconds * float64(time.Second)))
	return func(n int64) bool {
		if b.checkStoppedAt == 0 && (n < schema.MinCheckSamples || time.Now().Before(deadline)) {
			return false
		}
		if b.checkStoppedAt > 0 && n < b.checkStoppedAt {
			return false
		}
		if b.checkStoppedAt == 0 {
			b.checkStoppedAt, b.res.ChecksStoppedAt = n, n
			b.progress("checks: the budget's time for checks is spent: this check and every later one stop after %d samples", n)
			b.note(fmt.Sprintf("the artifacts' checks stopped at their share of the budget after %d samples of the evaluation data (the first of its order): each verdict rests on them; decisions.json records the count for --replay, and a longer --budget checks on all", n))
		}
		b.recordCheckStop(key, n)
		return true
	}
}

// checkStopsDecision names the replayed check stops in messages.
const checkStopsDecision = "the checks' budget stops"

func (b *builder) recordCheckStop(key string, n int64) {
	if b.decisions.CheckStops == nil {
		b.decisions.CheckStops = map[string]int64{}
	}
	b.decisions.CheckStops[key] = n
}

// budgetMarginPercent is how far past its budget a build may end before
// it says so: loading, the passes, sessions and exports are not bounded
// by time, and the checks and windows end at their next run, not at
// once.
const budgetMarginPercent = 10

// checkOverrun says, when the build ends more than budgetMarginPercent
// past its budget, by how much, in a line and a note.
func (b *builder) checkOverrun() {
	budget := b.res.Plan.BudgetSeconds
	if budget == 0 {
		return
	}
	took := time.Since(b.started).Seconds()
	if took <= budget*(1+budgetMarginPercent/100.0) {
		return
	}
	b.progress("budget: the build took %s, more than %d%% past its %s budget", secs(took), budgetMarginPercent, secs(budget))
	b.note(fmt.Sprintf("the build took %s, more than %d%% past its %s budget: report.json's stages say where the time went (loading, the passes, sessions and exports are not bounded by time)", secs(took), budgetMarginPercent, secs(budget)))
}

// restShareDeadline is when share of the rest's share of the budget has
// passed since the build began (ptq's shares: the guard's first check,
// the per-tensor SQNR; the last quarter is left to exports and checks);
// zero without a budget.
func (b *builder) restShareDeadline(share float64) time.Time {
	if b.res.Plan.RestSeconds == 0 {
		return time.Time{}
	}
	return b.started.Add(time.Duration(share * b.res.Plan.RestSeconds * float64(time.Second)))
}

// timedModels counts the models verify times: the input, the float
// artifact, the ort scheme's INT8 model, and what each target times of its
// own (export and verify decide the same).
func (b *builder) timedModels() int {
	n := 2 // the input (baseline) and model.fp32.onnx
	if b.c.INT8 && b.needs(PlacedScheme) {
		n++ // model.int8.onnx
	}
	return n + b.cost().Timed
}

// cost is what the wanted targets add to the build's runs, together.
func (b *builder) cost() target.Cost {
	var sum target.Cost
	for _, name := range b.targets {
		if t, ok := target.Lookup(name).(target.Costed); ok {
			c := t.Cost(b.c)
			sum.Timed += c.Timed
			sum.Checked += c.Checked
			sum.SweepPoints += c.SweepPoints
		}
	}
	return sum
}

// windowDuration is one timing window: the plan's.
func (b *builder) windowDuration() time.Duration {
	return time.Duration(b.res.Plan.WindowSeconds * float64(time.Second))
}

// warmupDuration bounds each timing window's warm-up within a budget: about
// the window itself (bench.Options.WarmupDuration), so that a slow model's
// ten warm-up runs do not cost many times the window; 0 (ten runs) without
// a budget.
func (b *builder) warmupDuration() time.Duration {
	if b.res.Plan.BudgetSeconds == 0 {
		return 0
	}
	return b.windowDuration()
}

// maxWindowRuns ends a timing window early within a budget, once it has
// bench.EnoughRuns runs; 0 (the whole window) without a budget.
func (b *builder) maxWindowRuns() int {
	if b.res.Plan.BudgetSeconds == 0 {
		return 0
	}
	return bench.EnoughRuns
}

// sweepDuration is one Triton sweep point's window, sweepBudget the whole
// sweep's: the plan's.
func (b *builder) sweepDuration() time.Duration {
	return time.Duration(b.res.Plan.SweepPointSeconds * float64(time.Second))
}

func (b *builder) sweepBudget() time.Duration {
	return time.Duration(b.res.Plan.SweepSeconds * float64(time.Second))
}

// checkTimingFits says, before the artifacts are timed, when the input
// model's own timing shows that windows of minWindowRuns runs will not fit
// the plan: the timing then takes longer than planned, and the log says
// how much longer before it starts.
func (b *builder) checkTimingFits(baseline *latency.Timing) {
	p := b.res.Plan
	if p.BudgetSeconds == 0 || baseline == nil {
		return
	}
	var need float64 // seconds, for all windows of one model
	for _, bt := range baseline.Batches {
		need += max(b.res.Plan.WindowSeconds, minWindowRuns*bt.Latency.P50/1000) * float64(baseline.Windows())
	}
	planned := p.WindowSeconds * float64(p.TimingWindows)
	if all := need * float64(p.TimedModels); all > 1.2*planned {
		b.progress("timing: %d runs per window of a model this slow take about %s, over the planned %s", minWindowRuns, secs(all), secs(planned))
		b.note(fmt.Sprintf("timing took more than its share of the budget: %d runs per window take about %s for the %d models, the plan gave %s", minWindowRuns, secs(all), p.TimedModels, secs(planned)))
	}
}

// checkCalibrationFits prints, after the first calibration batch (n
// samples in took), what the planned samples will take, and, within a
// budget, when calibration will stop at its share before them. With every
// sample of the data (calibration.samples 0) the number is not known
// beforehand: the line gives the rate, and the stop, if it comes, says
// so itself.
func (b *builder) checkCalibrationFits(n, total int64, took time.Duration) {
	perSample := took.Seconds() / float64(n)
	est := perSample * float64(total)
	if total <= 0 {
		b.progress("calibrating: the first batch (%d samples) took %s, %s per sample; every sample of the data is used (calibration.samples bounds them)",
			n, secs(took.Seconds()), time.Duration(perSample*float64(time.Second)).Round(time.Millisecond))
	} else {
		b.progress("calibrating: the first batch (%d samples) took %s: about %s for the %d planned samples", n, secs(took.Seconds()), secs(est), total)
	}
	stop := b.calibrationDeadline()
	if stop.IsZero() {
		return
	}
	if left := time.Until(stop).Seconds(); total > 0 && est > left {
		b.progress("calibrating: it stops at its share of the budget in about %s, after about %d samples (at least %d)",
			secs(max(left, 0)), max(int64(left/perSample), ptq.MinBudgetSamples), ptq.MinBudgetSamples)
	}
}

// noteUnreported says once per batch size where a timing left out a
// percentile its runs were too few for (bench.Repeated).
func (b *builder) noteUnreported(t *latency.Timing) {
	for i := range t.Batches {
		if len(t.Batches[i].Unreported) == 0 {
			continue
		}
		var needs []string
		for _, p := range latency.Percentiles {
			if p.MinRuns > 1 {
				needs = append(needs, fmt.Sprintf("%s %d", p.Name, p.MinRuns))
			}
		}
		b.note(fmt.Sprintf("timing at batch %d: a percentile is left out (\"-\", unreported in report.json) where a model's timing windows together had fewer runs than it needs (%s); a longer latency.duration or budget reports it",
			t.Batches[i].Batch, strings.Join(needs, ", ")))
	}
}

func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// windowSeconds keeps a timing window to the millisecond, and at least one:
// a window rounded to 0 would be bench's default of 2 s, a hundred times
// what a short latency.duration asks for.
func windowSeconds(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return max(float64(int64(x*1000+0.5))/1000, 0.001)
}

// BudgetError is a budget the model's own speed makes impossible: the
// least the build must run takes longer (checkBudgetPossible).
type BudgetError struct {
	Budget, Least, Suggest time.Duration
	Why                    string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget %s is too short for this model on this machine: the least the build runs (%s) takes %s; give --budget %s or more (or --budget 0 for none)",
		e.Budget, e.Why, secs(e.Least.Seconds()), e.Suggest)
}

// probeRuns is how many timed runs (after one warm-up) the budget's probe
// makes of the float model at each latency batch size.
const probeRuns = 2

// checkBudgetPossible times the optimized float model at each latency
// batch size (one warm-up, probeRuns runs) and refuses the build before
// anything else runs when the least it must do does not fit the budget:
// every timing window's minWindowRuns runs and one warm-up, the checks of
// every artifact on the fewest evaluation samples a budget stops them at
// and, with INT8, the fewest calibration samples and the guard's checks. Sessions, exports and
// passes are left out, so the figure is a floor: a refused budget cannot
// be met.
func (b *builder) checkBudgetPossible() error {
	p := b.res.Plan
	if p.BudgetSeconds == 0 {
		return nil
	}
	perRun := map[int]float64{} // seconds a run at each batch size
	for _, batch := range b.latencyBatches {
		r, err := bench.Run(bench.Options{Model: b.float, Data: "random", DataOpts: TimingData(b.c), Batches: []int{batch},
			Session: b.session(), Iterations: probeRuns, Warmup: 1, ORTLib: b.c.Runtime.ORTLib})
		if err != nil {
			// Timing will say what is wrong, with its context.
			b.progress("budget: not checked up front: timing model.fp32.onnx failed: %v", err)
			return nil
		}
		perRun[batch] = r.Batches[0].Latency.P50 / 1000
	}
	perSample := math.Inf(1)
	for batch, s := range perRun {
		perSample = min(perSample, s/float64(batch))
	}
	var timing float64
	for _, batch := range b.latencyBatches {
		timing += float64(minWindowRuns+1) * perRun[batch]
	}
	timing *= float64(p.TimedModels * max(b.c.Latency.Repeats, 1))
	// One check per timed model (the input's stands for its reference
	// run), and the models the targets check without timing (TensorRT's).
	checked := p.TimedModels + b.cost().Checked
	evalSamples := b.checkSamples()
	checks := float64(checked*min(evalSamples, schema.MinCheckSamples)) * perSample
	why := fmt.Sprintf("%d artifact checks on %d samples, %d timing windows of %d runs", checked, min(evalSamples, schema.MinCheckSamples), p.TimingWindows, minWindowRuns)
	least := timing + checks
	if b.c.INT8 && b.staticINT8() {
		schemes := 0
		for _, s := range quantize.Targets() {
			if b.needs(s) {
				schemes++
			}
		}
		least += float64(ptq.MinBudgetSamples+2*schemes*min(evalSamples, schema.MinCheckSamples)) * perSample
		why = fmt.Sprintf("%d calibration samples, the INT8 guard's checks, %s", ptq.MinBudgetSamples, why)
	}
	why = fmt.Sprintf("%s a sample: %s", time.Duration(perSample*float64(time.Second)).Round(time.Microsecond), why)
	b.progress("budget: the least this build runs (%s) takes about %s of the %s budget", why, secs(least), secs(p.BudgetSeconds))
	if least <= p.BudgetSeconds {
		return nil
	}
	// Sessions, exports and the stages' own work come on top: ask for
	// half as much again, in whole seconds (tens past ten).
	step := 1.0
	if 1.5*least > 10 {
		step = 10
	}
	suggest := time.Duration(math.Ceil(1.5*least/step)*step) * time.Second
	return &BudgetError{Budget: b.c.Budget.Duration, Least: time.Duration(least * float64(time.Second)), Suggest: suggest, Why: why}
}

// checkSamples is how many samples each artifact is checked on: the
// evaluation data's (its samples, or what the file holds), else the
// fewest random ones.
func (b *builder) checkSamples() int {
	spec, opts := b.eval.spec, b.eval.opts
	if spec == "" || spec == "random" {
		return cmp.Or(opts.Samples, ptq.RandomSamples)
	}
	n, err := data.CountSamples(spec, b.inputs, opts)
	if err != nil || n == 0 {
		return max(opts.Samples, 1)
	}
	return n
}
