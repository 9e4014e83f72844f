package build

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
	"github.com/optc-dev/optc/task/tasks"
)

// Check is an artifact against the input model on the evaluation data.
type Check struct {
	Samples int64 `json:"samples"`
	// StoppedByBudget: the check ended after Samples because the budget's
	// time for checks was spent (Plan.ChecksSeconds), before the data did.
	StoppedByBudget bool `json:"stopped_by_budget,omitempty"`
	// MinCosine and MinTop1 are the worst over the outputs (top-1 over
	// classifier-shaped outputs; -1 when there is none). MinCosine is each
	// output's worst sample's (its pooled cosine for outputs too small for
	// one, compare.SmallOutput), NaN ("NaN" in JSON) when an output had no
	// finite pair to measure.
	MinCosine jsonfloat.Float `json:"min_cosine"`
	MinTop1   float64         `json:"min_top1_agreement"`
	// MaxRelError is the worst relative error over the outputs (each as
	// the accuracy guard judges it: ptq.Judge).
	MaxRelError jsonfloat.Float `json:"max_rel_error"`
	// Failed are the accuracy guard's criteria (ptq.Judge, the build's
	// limits) this artifact misses against the input model: such an
	// artifact is not recommended and the build exits 3.
	Failed   []schema.Check        `json:"failed_checks,omitempty"`
	Accuracy *schema.LabelAccuracy `json:"accuracy,omitempty"` // with eval labels: A is the input, B the artifact
	// LM is a language model's held-out perplexity (A the input, B the
	// artifact) and next-token agreement, with eval.task lm.
	LM *compare.LM `json:"lm,omitempty"`
	// Task is a task plug-in's figures against the eval data's ground
	// truth (eval.task ctc, text-detection, segmentation): A the input,
	// B the artifact.
	Task *task.Figure `json:"task,omitempty"`
	// NonFinite counts output elements, over all outputs, where the input
	// model is finite and the artifact is NaN or infinite: such an
	// artifact is flagged in every table and never deployed.
	NonFinite int64         `json:"nonfinite_where_input_finite"`
	Outputs   []OutputCheck `json:"outputs"`
	// Float16Emulated says a float16 artifact was run as its emulation
	// (export.EmulateFloat16 at level disable): ORT's CPU provider runs
	// float16 nodes in float32 and would hide float16's overflow.
	Float16Emulated bool `json:"float16_emulated,omitempty"`
	// Level is the ORT level the check ran at: the build's, but at most
	// basic for a quantized model meant for another runtime (TensorRT), so
	// that its Q/DQ run as that runtime computes them (ptq.qualitySession).
	Level string `json:"ort_level,omitempty"`
}

// OutputCheck is one output's agreement with the input model. The
// statistics are over the finite pairs, FinitePairs of Elements.
type OutputCheck struct {
	Name        string          `json:"name"`
	Elements    int64           `json:"elements"`
	FinitePairs int64           `json:"finite_pairs"`
	NaN         schema.Sides    `json:"nan"` // A: the input model, B: the artifact
	Inf         schema.Sides    `json:"inf"`
	NonFinite   int64           `json:"nonfinite_where_input_finite"`
	Cosine      jsonfloat.Float `json:"cosine"` // pooled over all samples
	// MinSampleCosine and RelError are the per-sample figures the guard
	// judges (compare.OutputStats).
	MinSampleCosine jsonfloat.Float `json:"min_sample_cosine"`
	RelError        jsonfloat.Float `json:"rel_error"`
	SNRdB           jsonfloat.Float `json:"snr_db"` // capped at 200 when the outputs are identical
	MaxAbs          jsonfloat.Float `json:"max_abs_error"`
	MeanAbs         jsonfloat.Float `json:"mean_abs_error"`
	Top1Agree       float64         `json:"top1_agreement,omitempty"`
	Top5Agree       float64         `json:"top5_agreement,omitempty"`
}

// verify checks every model artifact ORT can run and times those ORT
// itself deploys, and times the input model as the baseline.
func (b *builder) verify() error {
	spec, dopts := b.eval.spec, b.eval.opts
	labels, scorer := tasks.Scoring(tasks.Spec(b.c.Eval))
	var err error
	if b.res.Baseline, err = b.timing(b.c.Model, "", b.session()); err != nil {
		return fmt.Errorf("%s: %w", b.c.Model, err)
	}
	b.checkTimingFits(b.res.Baseline)
	var timed []*Artifact
	for _, a := range b.res.Artifacts {
		if a.Kind == "model" || a.Kind == "ort-model" {
			timed = append(timed, a)
		}
	}
	start := time.Now()
	var notTimed []string
	for k, a := range timed {
		path, runPath := b.dir.tmpPath(a.Path), ""
		if a.Kind == "ort-model" {
			// optc cannot parse .ort files: its interface is the model it
			// was written from.
			path, runPath = b.dir.tmpPath(a.From), b.dir.tmpPath(a.Path)
		}
		b.progress("verify %s (%d/%d%s)", a.Path, k+1, len(timed), eta(start, k, len(timed)))
		if a.Precision == "fp16" && a.Kind == "model" {
			if err := b.verifyFP16(a, path); err != nil {
				return fmt.Errorf("%s: %w", a.Path, err)
			}
		} else {
			sess := b.checkSession()
			if otherRuntime(a.Target) && a.Precision == "int8" && sess.Level > ort.LevelBasic {
				sess.Level = ort.LevelBasic
			}
			r, err := compare.Models(compare.Options{
				ModelA: b.c.Model, ModelB: path, BRun: runPath, Data: spec, DataOpts: dopts, Labels: labels, Scorer: scorer,
				Task: compare.Task(b.c.Eval.Task), Logits: b.c.Eval.Logits, Atol: map[string]float64{"": math.Inf(1)}, Session: sess, ORTLib: b.c.Runtime.ORTLib, Reference: b.ref,
				Stop: b.checkStop(a.Path),
			})
			if err != nil {
				return fmt.Errorf("%s: %w", a.Path, err)
			}
			a.Check = b.checkOf(r)
			a.Check.Level = sess.Level.String()
			for _, sk := range r.Skipped {
				b.note("not checked or timed: " + sk)
			}
		}
		if n := &b.res.Caveats.CheckSamples; *n == 0 || a.Check.Samples < *n {
			*n = a.Check.Samples
		}
		if otherRuntime(a.Target) {
			// ORT would run its Q/DQ or float16 as float emulation, at
			// level basic: that time says nothing of the engine's.
			notTimed = append(notTimed, a.Path)
			continue
		}
		if a.Timing, err = b.timing(path, runPath, b.session()); err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
	}
	if len(notTimed) > 0 {
		b.note(fmt.Sprintf("not timed: %s: ONNX Runtime would run them as an emulation of another runtime, whose latency that does not show (time the engine where it runs: trtexec prints it)",
			strings.Join(notTimed, ", ")))
	}
	b.judge()
	return nil
}

// judge lists the float artifacts (fp32, fp16) that miss the accuracy
// guard's criteria against the input model: not recommended, and the
// build exits 3. Quantized artifacts were judged by their own stage's
// guard (INT8 against the float model they came from, weight-only by
// perplexity); a pruned build's float artifacts differ from the input by
// design and answer to the prune budget; with the guard off the figures
// are only reported.
func (b *builder) judge() {
	if b.c.Quantize.NoGuard || len(b.c.Prune.Methods) > 0 {
		return
	}
	for _, a := range b.res.Artifacts {
		if a.Precision != "fp32" && a.Precision != "fp16" {
			continue
		}
		for _, c := range []*Check{a.Check, a.CheckCalibration} {
			if c == nil || len(c.Failed) == 0 || slices.Contains(b.res.NotRecommended, a.Path) {
				continue
			}
			b.res.NotRecommended = append(b.res.NotRecommended, a.Path)
			b.note(fmt.Sprintf("%s misses the accuracy guard's criteria against the input model (%s): not recommended", a.Path, schema.FailedChecks(c.Failed)))
		}
	}
}

// eta is a stage's estimate after done of total like steps: ", about Ns
// left", or nothing before the first step has ended.
func eta(start time.Time, done, total int) string {
	if done == 0 {
		return ""
	}
	left := time.Since(start).Seconds() / float64(done) * float64(total-done)
	return ", about " + secs(left) + " left"
}

// verifyFP16 checks a float16 artifact as its float16 emulation (see
// Check.Float16Emulated) on the eval data and, when that is not the
// calibration data, on the calibration data too: the data with the
// deployment's range, where float16 overflows if it does.
func (b *builder) verifyFP16(a *Artifact, path string) error {
	m, err := graph.LoadFile(path)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := export.EmulateFloat16(m); err != nil {
		return err
	}
	emulated, err := graph.MarshalReferencing(m)
	if err != nil {
		return err
	}
	session := b.checkSession()
	session.Level = ort.LevelDisable // keeps the rounding Casts
	// check scores the ground truth on the eval data only.
	check := func(spec string, dopts data.Options, eval bool) (*Check, error) {
		labels, scorer, key := "", task.Factory(nil), a.Path+" (calibration data)"
		if eval {
			labels, scorer = tasks.Scoring(tasks.Spec(b.c.Eval))
			key = a.Path
		}
		r, err := compare.Models(compare.Options{
			ModelA: b.c.Model, ModelB: a.Path + " (float16 emulated)", BInMemory: emulated, Data: spec, DataOpts: dopts, Labels: labels, Scorer: scorer,
			Task: compare.Task(b.c.Eval.Task), Logits: b.c.Eval.Logits, Atol: map[string]float64{"": math.Inf(1)}, Session: session, ORTLib: b.c.Runtime.ORTLib, Reference: b.ref,
			Stop: b.checkStop(key),
		})
		if err != nil {
			return nil, fmt.Errorf("on %s: %w", spec, err)
		}
		c := b.checkOf(r)
		c.Float16Emulated = true
		return c, nil
	}
	if a.Check, err = check(b.eval.spec, b.eval.opts, true); err != nil {
		return err
	}
	if b.c.Calibration.Data == "" || !b.res.EvalHeldOut {
		return nil // the eval data is the calibration data, or there is none
	}
	spec, dopts := b.fp16Data()
	b.progress("verify %s on the calibration data", a.Path)
	if a.CheckCalibration, err = check(spec, dopts, false); err != nil {
		return err
	}
	if cal, ev := float64(a.CheckCalibration.MinCosine), float64(a.Check.MinCosine); cal < ev {
		b.note(fmt.Sprintf("%s: cosine to the input model %.6f on the calibration data (%s), %.6f on the eval data", a.Path, cal, spec, ev))
	}
	return nil
}

// evalData is what the artifacts are checked on: the evaluation data;
// else the calibration samples calibration did not draw (with
// calibration.samples below the data's size; the same seeded draw, the
// rest of it); else the calibration data itself, which the report says is
// not held out; else random inputs (agreement only). It is decided once
// and recorded in the result.
func (b *builder) evalData() (string, data.Options) {
	c := b.c
	switch {
	case c.Eval.Data != "" && data.SameFile(c.Eval.Data, c.Calibration.Data):
		// The same samples under another name: not held out.
		b.res.EvalData = c.Eval.Data
		b.res.Caveats.OnCalibrationData = c.INT8
		b.note(fmt.Sprintf("eval.data %s is the calibration data: the artifacts were checked on the samples they were calibrated on, which are not held out", c.Eval.Data))
		return c.Eval.Data, b.dataOptions(c.Eval.Data, c.Eval.Batch, c.Eval.Samples)
	case c.Eval.Data != "":
		b.res.EvalData, b.res.EvalHeldOut = c.Eval.Data, true
		return c.Eval.Data, b.dataOptions(c.Eval.Data, c.Eval.Batch, c.Eval.Samples)
	case c.Calibration.Data != "" && c.Calibration.Samples > 0 && c.Calibration.Data != "random":
		b.res.EvalData, b.res.EvalHeldOut = c.Calibration.Data+" (the samples calibration did not draw)", true
		o := b.dataOptions(c.Calibration.Data, c.Eval.Batch, c.Eval.Samples)
		o.Shuffle, o.Skip = true, c.Calibration.Samples
		return c.Calibration.Data, o
	case c.Calibration.Data != "" && c.Quantize.Dynamic && !(c.INT8 && b.staticINT8()) && !(len(c.Prune.Methods) > 0 && c.Prune.Reconstruct):
		// Dynamic INT8 calibrates nothing: no stage fitted anything to
		// this data.
		b.res.EvalData, b.res.EvalHeldOut = c.Calibration.Data+" (nothing was calibrated on it: dynamic INT8)", true
		return c.Calibration.Data, b.dataOptions(c.Calibration.Data, c.Eval.Batch, 0)
	case c.Calibration.Data == "random":
		// Fresh draws: another seed than calibration's.
		b.res.EvalData, b.res.EvalHeldOut, b.res.Caveats.RandomCheck = "random", true, true
		o := b.dataOptions("random", c.Eval.Batch, c.Eval.Samples)
		o.Seed ^= randomCheckSeed
		return "random", o
	case c.Calibration.Data != "":
		b.res.EvalData = c.Calibration.Data
		b.res.Caveats.OnCalibrationData = c.INT8
		b.note(notHeldOut)
		return c.Calibration.Data, b.dataOptions(c.Calibration.Data, c.Eval.Batch, 0)
	}
	b.res.EvalData, b.res.Caveats.RandomCheck = "random", true
	b.note(fmt.Sprintf("no eval or calibration data: the artifacts were checked on %d random inputs (a smoke test: agreement only)", ptq.RandomSamples))
	return "random", b.dataOptions("random", c.Eval.Batch, ptq.RandomSamples)
}

// randomCheckSeed moves random checks off the seed random calibration
// draws with.
const randomCheckSeed = 0x6576616c // "eval"

// CheckedOn says what the artifacts were checked on, for a line of
// output.
func (r *Result) CheckedOn() string {
	s := r.EvalData + " (held out)"
	switch {
	case r.EvalData == "random":
		s = "fresh random inputs (a smoke test, not a measure of accuracy)"
	case !r.EvalHeldOut:
		s = r.EvalData + " (not held out)"
	}
	if r.ChecksStoppedAt > 0 {
		s += fmt.Sprintf(", its first %d samples: the budget stopped the checks there", r.ChecksStoppedAt)
	}
	return s
}

const notHeldOut = "no eval data and calibration used every sample: the artifacts were checked on the calibration data, which is not held out (give eval.data, or calibration.samples below the data's size to check on the rest)"

// timing measures a model on random inputs at every latency batch size,
// latency.repeats times, each run taking an equal share of latency.duration
// (or less, as the budget's plan says) but at least minWindowRuns runs.
// Repeats keep each window's raw figures; the median leaves out the
// percentiles the windows were too short for.
func (b *builder) timing(model, runModel string, sess ort.Options) (*latency.Timing, error) {
	var windows []*bench.Result
	for range max(b.c.Latency.Repeats, 1) {
		r, err := bench.Run(bench.Options{
			Model: model, RunModel: runModel, Data: "random",
			DataOpts: TimingData(b.c), Batches: b.latencyBatches,
			Session: sess, Duration: b.windowDuration(), MinIterations: minWindowRuns, ORTLib: b.c.Runtime.ORTLib,
			WarmupDuration: b.warmupDuration(), MaxIterations: b.maxWindowRuns(),
		})
		if err != nil {
			return nil, err
		}
		windows = append(windows, r)
	}
	t := bench.Repeated(windows)
	b.noteUnreported(t)
	if len(b.c.Latency.SeqLengths) > 0 {
		var err error
		if t.SeqLengths, err = b.seqTimings(model, runModel, sess); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// seqTimings times a language model at batch 1 with its token ids (the
// input compare.LMIO picks) at each latency.seq_lengths, random ids
// inside the vocabulary, one timing window each.
func (b *builder) seqTimings(model, runModel string, sess ort.Options) ([]latency.SeqTiming, error) {
	m, err := graph.LoadFile(model)
	if err != nil {
		return nil, err
	}
	ins, outs := ort.Interface(m)
	m.Close()
	in, _, err := compare.LMIO(ins, outs, b.c.Eval.Logits)
	if err != nil {
		return nil, err
	}
	var ts []latency.SeqTiming
	for _, l := range b.c.Latency.SeqLengths {
		spec := data.ConfigSpec(b.c)
		spec.Shapes = maps.Clone(spec.Shapes)
		if spec.Shapes == nil {
			spec.Shapes = map[string][]int64{}
		}
		spec.Shapes[ins[in].Name] = []int64{1, int64(l)}
		r, err := bench.Run(bench.Options{
			Model: model, RunModel: runModel, Data: "random", DataOpts: data.Options{High: 1, Seed: 1, Spec: spec},
			Batches: []int{1}, Session: sess, Duration: b.windowDuration(), MinIterations: minWindowRuns, ORTLib: b.c.Runtime.ORTLib,
		})
		if err != nil {
			return nil, fmt.Errorf("timing %d-token sequences: %w", l, err)
		}
		ts = append(ts, latency.SeqTiming{SeqLen: l, Latency: r.Batches[0].Latency})
	}
	return ts, nil
}

// checkOf is an artifact's check from its comparison with the input,
// judged by the accuracy guard's criteria at the build's limits.
func (b *builder) checkOf(r *compare.Result) *Check {
	c := &Check{Samples: r.Samples, StoppedByBudget: r.Stopped, MinCosine: 1, MinTop1: -1, Accuracy: r.Accuracy, LM: r.LM, Task: r.Task}
	lim := ptq.Limits{MaxAccuracyDrop: b.c.Quantize.MaxAccuracyDrop, MinCosine: b.c.Quantize.MinCosine, MaxRelError: b.c.Quantize.MaxRelError}
	for _, x := range ptq.Judge(r, lim) {
		if !x.Pass {
			c.Failed = append(c.Failed, x)
		}
	}
	for _, o := range r.Outputs {
		snr := o.SNRdB
		if math.IsInf(float64(snr), 1) || snr > 200 {
			snr = 200
		}
		cos, rel := o.MinSampleCosine, o.MaxSampleRelError
		if o.SampleElements < compare.SmallOutput {
			cos, rel = o.Cosine, o.RelError
		}
		c.Outputs = append(c.Outputs, OutputCheck{Name: o.Name, Elements: o.Total, FinitePairs: o.Elements, NaN: o.NaN, Inf: o.Inf,
			NonFinite: o.NewNonFinite, Cosine: o.Cosine, MinSampleCosine: cos, RelError: rel, SNRdB: snr, MaxAbs: o.MaxAbs, MeanAbs: o.MeanAbs,
			Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
		c.MinCosine = min(c.MinCosine, cos) // NaN stays NaN
		if math.IsNaN(float64(rel)) || rel > c.MaxRelError {
			c.MaxRelError = rel
		}
		c.NonFinite += o.NewNonFinite
		if o.Classifier && (c.MinTop1 < 0 || o.Top1Agree < c.MinTop1) {
			c.MinTop1 = o.Top1Agree
		}
	}
	return c
}

// nonFiniteCell is the table's NaN/Inf column: "-" when neither model has
// any, else the NaN and Inf values of the input and of the artifact, with
// NEW! when the artifact has them where the input is finite.
func (c *Check) nonFiniteCell() string {
	var in, art int64
	for _, o := range c.Outputs {
		in, art = in+o.NaN.A+o.Inf.A, art+o.NaN.B+o.Inf.B
	}
	switch {
	case in == 0 && art == 0:
		return "-"
	case c.NonFinite > 0:
		return fmt.Sprintf("%d/%d NEW!", in, art)
	}
	return fmt.Sprintf("%d/%d", in, art)
}

// nonFiniteText says where an artifact is NaN or infinite and the input
// model is not, output by output, for the table's warning lines.
func (c *Check) nonFiniteText() string {
	var parts []string
	for _, o := range c.Outputs {
		if o.NonFinite > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d of %d values (NaN %d, Inf %d); figures over %d of %d finite pairs",
				o.Name, o.NonFinite, o.Elements, o.NaN.B, o.Inf.B, o.FinitePairs, o.Elements))
		}
	}
	return strings.Join(parts, "; ")
}

// note adds a line to the report's notes, once.
func (b *builder) note(s string) {
	if !slices.Contains(b.res.Notes, s) {
		b.res.Notes = append(b.res.Notes, s)
	}
}

// otherRuntime reports whether the build target called name deploys a
// quantization scheme for a runtime other than ONNX Runtime (its scheme's
// OtherRuntime), which ORT then only simulates. It asks the target
// registry, so an artifact of no target ("all") or of a target without a
// scheme is ORT's own.
func otherRuntime(name string) bool {
	t := target.Lookup(name)
	if t == nil || t.Scheme() == "" {
		return false
	}
	sc, err := quantize.SchemeFor(t.Scheme())
	return err == nil && sc.OtherRuntime
}
