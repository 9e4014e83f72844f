// Package build is what `optc build` does: load and verify the model, run
// the passes, calibrate and quantize (with --int8), export the artifacts of
// each target, check every artifact against the original with real ONNX
// Runtime runs, and write the manifest and report. Everything is written
// into a temporary folder next to the destination and renamed into place
// at the end, so a failed or interrupted build leaves nothing behind.
package build

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task/tasks"
	"github.com/optc-dev/optc/weightonly"
)

// Options are a build's effective configuration and where it reports.
type Options struct {
	Config config.Config
	// Progress receives a line when each stage starts and ends (with its
	// wall time) and one per long step inside a stage (nil: silent).
	Progress io.Writer
	// Version is optc's version, recorded in the manifest.
	Version string
}

// Result is what a build did and measured; it is report.json.
type Result struct {
	Input    string           `json:"input"`
	Output   string           `json:"output"`
	Targets  []string         `json:"targets"`
	Optimize *optimize.Result `json:"optimize"`
	// INT8 are the static INT8 quantizations by scheme (ort, tensorrt):
	// one per scheme a wanted target deploys.
	INT8 map[quantize.Target]*ptq.Result `json:"int8,omitempty"`
	// Weights is the weight-only quantization of the ORT artifact
	// (quantize.weights).
	Weights *weightonly.Result `json:"weights,omitempty"`
	// WeightsGuard is the language-model guard on it (eval.task lm).
	WeightsGuard *report.PerplexityGuard `json:"weights_guard,omitempty"`
	// Dynamic is the dynamic INT8 quantization of the ORT artifact
	// (quantize.dynamic).
	Dynamic *ptq.Result `json:"dynamic,omitempty"`
	// Layout is the nchwc stage: the FP32 model shaped for ORT's blocked
	// CPU layout, and whether the ORT artifact deploys it.
	Layout    *report.Layout `json:"nchwc,omitempty"`
	Artifacts []*Artifact    `json:"artifacts"`
	// Baseline is the input model's latency, measured like the artifacts.
	Baseline *latency.Timing `json:"baseline"`
	// EvalData says what the artifacts were checked on and whether it is
	// disjoint from the calibration data.
	EvalData    string `json:"eval_data"`
	EvalHeldOut bool   `json:"eval_held_out"`
	// ChecksStoppedAt is the samples every artifact's check stopped at
	// when the budget's time for checks ran out (0: they ran to the end).
	ChecksStoppedAt int64 `json:"checks_stopped_at,omitempty"`
	// Caveats are what the checks rest on: random calibration, checks on
	// the calibration samples themselves or on few samples.
	Caveats schema.Caveats `json:"caveats"`
	// TargetReports are the targets' own sections, by target name: what
	// each target's Export returned (tensorrt: its fp16 report, lint
	// findings and engine measurement; triton: its profiles and the sweep
	// behind them).
	TargetReports map[string]any `json:"target_reports,omitempty"`
	// ReplayedFrom is the decisions.json whose choices the build applied
	// instead of timing them (replay: in the config).
	ReplayedFrom string `json:"replayed_from,omitempty"`
	// Plan is how the build shared its time budget between the stages.
	Plan        *Plan             `json:"plan"`
	Stages      []Stage           `json:"stages"`
	Environment bench.Environment `json:"environment"`
	Notes       []string          `json:"notes,omitempty"`
	// Refused are the INT8 models the accuracy guard refused: the build
	// wrote everything else (optc build exits 3).
	Refused []Refusal `json:"refused,omitempty"`
	// NotRecommended are artifacts written but missing the accuracy
	// guard's criteria against the input model (Check.Failed, or an INT8
	// model kept by allow_accuracy_loss): optc build exits 3.
	NotRecommended []string      `json:"not_recommended,omitempty"`
	opts           config.Config // effective options, for the manifest
}

// Quantization is one INT8 model a build quantized: its scheme, its path
// in the output folder and what ptq did.
type Quantization struct {
	Scheme quantize.Target
	Model  string
	Result *ptq.Result
}

// Quantizations are the INT8 models the build quantized, in build order
// (a refused one included: its result holds the guard's verdict): each
// scheme's static model, and the placed scheme's dynamic one after it.
func (r *Result) Quantizations() []Quantization {
	var out []Quantization
	add := func(q Quantization) {
		if q.Result != nil && q.Result.Quantize != nil {
			out = append(out, q)
		}
	}
	for _, scheme := range quantize.Targets() {
		model, _ := target.QuantizedModel(scheme)
		add(Quantization{scheme, model, r.INT8[scheme]})
		if scheme == PlacedScheme {
			add(Quantization{scheme, DynamicModel, r.Dynamic})
		}
	}
	return out
}

// PlacedScheme is the scheme whose INT8 model the build's deployed model
// takes (what the ORT and Triton artifacts deploy), decided by the
// placement search (placement.json), and which weight-only and dynamic
// INT8 replace.
const PlacedScheme = quantize.TargetORT

// Placed is the placed scheme's static quantization (nil when there was
// none).
func (r *Result) Placed() *ptq.Result { return r.INT8[PlacedScheme] }

// Refusal is an INT8 model the accuracy guard refused, with its figures.
type Refusal struct {
	Scheme   string        `json:"scheme"`   // ort, tensorrt
	Artifact string        `json:"artifact"` // what was not written
	Guard    *schema.Guard `json:"guard"`
}

// Config is the effective configuration the build ran with.
func (r *Result) Config() config.Config { return r.opts }

// Artifact is one file of the output folder.
type Artifact struct {
	Path      string `json:"path"` // relative to the output folder
	Target    string `json:"target"`
	Kind      string `json:"kind"`                // model, external-data, ort-model, model-copy, calibration, placement, script, config, settings, lint
	Precision string `json:"precision,omitempty"` // fp32, fp16, int8 (models only)
	From      string `json:"from,omitempty"`      // the model an .ort file was written from
	Bytes     int64  `json:"bytes"`
	SHA256    string `json:"sha256"`
	// Check is the artifact against the input model on the evaluation
	// data (models ORT can run).
	Check *Check `json:"check,omitempty"`
	// CheckCalibration is a float16 artifact against the input model on
	// the calibration data, when the eval data is other data: float16
	// overflows on the deployment's range, which eval data may not reach.
	CheckCalibration *Check `json:"check_calibration,omitempty"`
	// Timing is its latency in ORT (models optc times).
	Timing *latency.Timing `json:"timing,omitempty"`
}

// add records an artifact written into the working folder.
func (b *builder) add(rel, target, kind, precision, from string) {
	b.res.Artifacts = append(b.res.Artifacts, &Artifact{Path: rel, Target: target, Kind: kind, Precision: precision, From: from})
	if kind == "model" || kind == "model-copy" {
		// A model over protobuf's 2 GiB limit was saved with its tensors
		// in a side file next to it (graph.Save's default location).
		side := rel + ".data"
		if _, err := os.Stat(filepath.Join(b.dir.tmp, filepath.FromSlash(side))); err == nil {
			b.res.Artifacts = append(b.res.Artifacts, &Artifact{Path: side, Target: target, Kind: "external-data", Precision: precision, From: rel})
		}
	}
}

// Stage is one step of the build, its wall time and the process's peak
// resident memory when it ended (what the build held at most so far).
type Stage struct {
	Name       string  `json:"name"`
	Seconds    float64 `json:"seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"`
}

// Run builds opts.Config.Model into opts.Config.Output. Cancelling ctx
// (Ctrl-C) removes the working folder at once; Run then fails.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	c := opts.Config
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Model == "" {
		return nil, fmt.Errorf("no model: give MODEL (or model: in the config)")
	}
	if c.Output == "" {
		return nil, fmt.Errorf("no output folder: give -o DIR (or output: in the config)")
	}
	targets, _ := c.ExpandTargets()
	if within(abs(c.Model), abs(c.Output)) {
		return nil, fmt.Errorf("output folder %s holds the input model %s; choose another -o", c.Output, c.Model)
	}
	if _, err := ort.Init(c.Runtime.ORTLib); err != nil {
		return nil, err
	}
	var rep *replay
	if c.Replay != "" {
		if rep, err = readReplay(c.Replay); err != nil {
			return nil, err
		}
	}
	dir, err := newFolder(c.Output, c.Force, func(msg string) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "build: %s\n", msg)
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dir.abort()
		}
	}()
	b := &builder{ctx: ctx, opts: opts, c: c, dir: dir, targets: targets, ref: compare.NewReference(),
		res: &Result{Input: c.Model, Output: c.Output, Targets: targets, opts: c}, replay: rep, decisions: &Decisions{}}
	b.eval.spec, b.eval.opts = b.evalData()
	b.res.Caveats.RandomCalibration = c.INT8 && c.Calibration.Data == "random"
	b.res.Plan = b.plan()
	for _, l := range b.res.Plan.Lines {
		b.progress("plan: %s", l)
	}
	// The stages run apart so that an interrupt returns at once (the
	// working folder is already gone) instead of after the current stage.
	done := make(chan error, 1)
	go func() { done <- b.runStages() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		dir.abort()
		return nil, fmt.Errorf("interrupted; nothing was written: %w", ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	if err := dir.commit(); err != nil {
		return nil, err
	}
	return b.res, nil
}

// runStages runs the stages in order; each prints a line when it starts
// and one when it ends, with its wall time, so that a log shows where a
// long build is.
func (b *builder) runStages() error {
	b.started = time.Now()
	stages := b.stages()
	b.prof = startMemProfile(b.progress)
	prof := b.prof
	defer prof.close()
	for i, st := range stages {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		prof.stageStarted(st.name)
		b.progress("[%d/%d] %s ...", i+1, len(stages), st.name)
		if err := st.run(); err != nil {
			b.progress("[%d/%d] %s failed after %s", i+1, len(stages), st.name, elapsed(start))
			if strings.HasPrefix(err.Error(), st.name+" ") || strings.HasPrefix(err.Error(), st.name+":") {
				return inBuild{err, b.dir.tmp} // "load m.onnx: ...", not "load: load m.onnx: ..."
			}
			return fmt.Errorf("%s: %w", st.name, inBuild{err, b.dir.tmp})
		}
		peak := peakRSSMiB()
		prof.stageDone(i, st.name)
		b.progress("[%d/%d] %s done in %s (peak RSS %.0f MiB)", i+1, len(stages), st.name, elapsed(start), peak)
		b.res.Stages = append(b.res.Stages, Stage{Name: st.name, Seconds: time.Since(start).Seconds(), PeakRSSMiB: peak})
		if st.then != nil {
			if err := st.then(); err != nil {
				return inBuild{err, b.dir.tmp}
			}
		}
	}
	return nil
}

// inBuild is a stage's error as the user reads it: a file of the working
// folder, which a failed build removes, is named as the artifact it
// would have been (model.fp32.onnx), not by its temporary path.
type inBuild struct {
	err error
	tmp string
}

func (e inBuild) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.tmp+string(filepath.Separator), "")
}

func (e inBuild) Unwrap() error { return e.err }

// peakRSSMiB is this process's peak resident memory so far, in MiB (0
// when the system does not say): the figure docs/DESIGN.md's memory model
// is held to.
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// elapsed is the time since start in seconds, to a tenth.
func elapsed(start time.Time) string {
	return fmt.Sprintf("%.1fs", time.Since(start).Seconds())
}

// builder carries one build's state from stage to stage.
type builder struct {
	ctx     context.Context
	started time.Time // when the stages began
	opts    Options
	c       config.Config
	dir     *folder
	targets []string
	res     *Result
	// ref keeps the input model's outputs on the evaluation data, so that
	// checking each artifact does not run the input again.
	ref *compare.Reference

	// calibStoppedAt is the samples INT8 calibration read when the
	// budget stopped it (0: it read them all).
	calibStoppedAt int
	// checkStoppedAt is the samples the first artifact check the budget
	// stopped had compared: every later check stops there too, so that
	// the artifacts' figures are on the same samples (checkStop).
	checkStoppedAt int64
	float          string // the optimized float model, in the working folder
	ortModel       string // what the ORT target deploys (float, INT8 or weight-only)
	// ortPrecision is ortModel's precision when it is not the float model.
	ortPrecision string
	calibFile    string // optc's calibration file, when quantizing
	// quantized is each scheme's model in the working folder.
	quantized map[quantize.Target]string
	// latencyBatches are the batch sizes every artifact is timed at:
	// latency.batches, or the model's static batch alone.
	latencyBatches []int
	// prof is $OPTC_MEMPROFILE's timeline; nil when off.
	prof *memProfile
	// decisions is what the build chose by timing, for decisions.json;
	// replay, when set, the record it applies instead of timing.
	decisions *Decisions
	replay    *replay
	recordErr error // a target's decision that could not be recorded
	eval      struct {
		spec string
		opts data.Options
	}
	inputs []data.Input // the input model's
}

type stage struct {
	name string
	run  func() error
	// then, when set, runs after the stage's done line; its error is the
	// build's as it is, not the stage's.
	then func() error
}

// stages is the build in order; each names itself in errors.
func (b *builder) stages() []stage {
	s := []stage{
		{name: "load", run: b.load},
		{name: "passes", run: b.passes, then: b.checkBudgetPossible},
	}
	if b.c.INT8 && b.staticINT8() {
		s = append(s, stage{name: "quantize", run: b.quantize})
	} else if b.c.INT8 {
		b.note("int8: no target takes static INT8 here (the ORT artifact is dynamic INT8 or weight-only), so nothing was calibrated")
	}
	if b.c.Quantize.Weights != "" && b.needs(PlacedScheme) {
		s = append(s, stage{name: "weights", run: b.weights})
	}
	if b.c.Quantize.Dynamic && b.needs(PlacedScheme) {
		s = append(s, stage{name: "dynamic", run: b.dynamic})
	}
	if b.needs(PlacedScheme) { // a target deploys the placed scheme's model
		s = append(s, stage{name: "nchwc", run: b.layout})
	}
	s = append(s, stage{name: "export", run: b.export}, stage{name: "verify", run: b.verify}, stage{name: "report", run: b.report})
	return s
}

// staticINT8 reports whether some wanted target takes static INT8: each
// wanted scheme does, but the placed one when weight-only or dynamic INT8
// replaces it.
func (b *builder) staticINT8() bool {
	return slices.ContainsFunc(quantize.Targets(), b.quantizes)
}

// quantizes says the build calibrates and quantizes scheme: a wanted
// target deploys it, and weight-only or dynamic INT8 (weights.go,
// dynamic.go) does not replace it.
func (b *builder) quantizes(scheme quantize.Target) bool {
	replaced := scheme == PlacedScheme && (b.c.Quantize.Weights != "" || b.c.Quantize.Dynamic)
	return b.needs(scheme) && !replaced
}

func (b *builder) progress(format string, args ...any) {
	b.prof.said(fmt.Sprintf(format, args...))
	if b.opts.Progress != nil {
		fmt.Fprintf(b.opts.Progress, "build: "+format+"\n", args...)
	}
}

func (b *builder) wants(target string) bool { return slices.Contains(b.targets, target) }

// load reads and verifies the input, so that a broken model fails here
// with its own message rather than inside a pass.
func (b *builder) load() error {
	m, err := graph.LoadFile(b.c.Model)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Verify(); err != nil {
		return fmt.Errorf("%s: %w", b.c.Model, err)
	}
	if err := b.shapesFromData(data.GraphInputs(m.Graph)); err != nil {
		return err
	}
	b.inputs = data.GraphInputs(m.Graph)
	b.splitCalibration(b.inputs)
	b.latencyBatches = b.c.Latency.Batches
	if s := data.StaticBatch(data.GraphInputs(m.Graph), data.ConfigSpec(b.c)); s > 0 && !slices.Equal(b.latencyBatches, []int{s}) {
		b.latencyBatches = []int{s}
		b.note(fmt.Sprintf("the model's batch is static (%d): artifacts are timed at batch %d only", s, s))
	}
	return nil
}

// splitCalibration holds data.HeldOut of the calibration samples out of
// calibration when there is no eval data, so that no check runs on a
// sample calibration saw: calibration draws the rest (seeded), and every
// artifact is checked on the samples it did not draw.
func (b *builder) splitCalibration(inputs []data.Input) {
	c := &b.c
	if c.Eval.Data != "" || c.Calibration.Data == "" || c.Calibration.Data == "random" || c.Calibration.Samples > 0 || !(c.INT8 && b.staticINT8()) {
		return
	}
	keep, held, shuffle, ok := data.Split(c.Calibration.Data, inputs, b.dataOptions(c.Calibration.Data, c.Calibration.Batch, 0))
	if !ok || !shuffle {
		return // too few samples, or a format calibration cannot draw from: checked on the calibration data, and said
	}
	c.Calibration.Samples = keep
	b.res.Notes = slices.DeleteFunc(b.res.Notes, func(n string) bool { return n == notHeldOut })
	b.res.Caveats.OnCalibrationData = false
	b.eval.spec, b.eval.opts = b.evalData()
	b.note(fmt.Sprintf("no eval data: calibration draws %d samples of %s and every artifact is checked on the other %d (held out)", keep, c.Calibration.Data, held))
}

// shapesFromData fixes the dynamic dims random data cannot shape (a
// sequence length --shape does not give) from the calibration data, else
// the evaluation data (data.ShapesFromData): the passes' check, timing and
// the sweep then run at the length the data has. The report's config
// records them.
func (b *builder) shapesFromData(inputs []data.Input) error {
	spec := b.c.Calibration.Data
	if spec == "" || spec == "random" {
		spec = b.c.Eval.Data
	}
	opts := data.Options{Spec: data.ConfigSpec(b.c), Image: data.ConfigImage(b.c.Image), Seed: b.c.Calibration.Seed, High: 1}
	shapes, named, err := data.ShapesFromData(spec, inputs, opts)
	if err != nil || named == nil {
		return err
	}
	b.c.Shapes, b.res.opts.Shapes = shapes, shapes
	b.eval.spec, b.eval.opts = b.evalData()
	var dims []string
	for _, n := range named {
		dims = append(dims, data.ShapeFlag(n, shapes[n]))
	}
	b.note(fmt.Sprintf("shapes from %s for what random inputs and timing cannot tell: %s (--shape sets them)", spec, strings.Join(dims, " ")))
	return nil
}

// passCheckSamples is how many samples of the user's data the passes are
// checked on: as many as the random check's (optimize's default).
const passCheckSamples = 4

// passes runs the optimization pipeline with optimize's own ORT check;
// the optimized float model is the root every artifact grows from.
func (b *builder) passes() error {
	out, err := b.dir.path("model.fp32.onnx")
	if err != nil {
		return err
	}
	o := optimize.Options{
		Input: b.c.Model, Output: out, Level: b.c.OptLevel, Check: true,
		CheckAtol: optimize.DefaultCheckAtol, CheckRtol: optimize.DefaultCheckRtol,
		DataOpts: data.Options{Spec: data.ConfigSpec(b.c), High: 1, Seed: 1}, ORTLib: b.c.Runtime.ORTLib,
	}
	// The user's data, when there is some, is what the passes are checked
	// on: a model whose inputs must hold valid values (a mask that fits
	// the ids, a shape) does not run on random ones.
	if spec := cmp.Or(b.c.Eval.Data, b.c.Calibration.Data); spec != "" && spec != "random" {
		o.CheckData, o.CheckDataOpts = spec, b.dataOptions(spec, 1, passCheckSamples)
	}
	if err := b.pruneOptions(&o); err != nil {
		return err
	}
	b.res.Optimize, err = optimize.Run(o)
	if err != nil {
		return err
	}
	b.float, b.ortModel = out, out
	b.add("model.fp32.onnx", "all", "model", "fp32", "")
	return b.recordModel()
}

// quantize calibrates once and quantizes for each target that takes INT8:
// ort for the ORT and Triton targets, tensorrt for TensorRT. The
// second quantization reuses the calibration file the first wrote.
func (b *builder) quantize() error {
	var err error
	if b.calibFile, err = b.dir.path("calibration.json"); err != nil {
		return err
	}
	if b.c.Calibration.Cache != "" {
		if _, err := os.Stat(b.c.Calibration.Cache); err == nil {
			// Checked here so that a broken file is named as the user gave
			// it, not as the copy in the temporary folder.
			if _, err := calibrate.ReadCache(b.c.Calibration.Cache); err != nil {
				return err
			}
			if err := copyFile(b.c.Calibration.Cache, b.calibFile); err != nil {
				return err
			}
		}
	}
	b.add("calibration.json", "all", "calibration", "", "")
	b.quantized = map[quantize.Target]string{}
	for _, scheme := range quantize.Targets() {
		if !b.quantizes(scheme) {
			continue
		}
		if err := b.quantizeFor(scheme); err != nil {
			return err
		}
	}
	return nil
}

// quantizeScheme makes scheme's INT8 model where the target owning it says
// (target.QuantizedModel) and records it, unless the accuracy guard
// refused it or there was nothing to quantize; its path is then not in
// b.quantized.
func (b *builder) quantizeScheme(scheme quantize.Target) (*ptq.Result, error) {
	rel, _ := target.QuantizedModel(scheme)
	out, err := b.dir.path(rel)
	if err != nil {
		return nil, err
	}
	o, err := b.ptqOptions(scheme, out)
	if err != nil {
		return nil, err
	}
	res, err := ptq.Run(o)
	b.recordStops(scheme, stopsOf(res, err))
	if err != nil {
		return res, b.refused(scheme, rel, err)
	}
	b.quantized[scheme] = out
	b.add(rel, string(scheme), "model", "int8", "")
	return res, nil
}

// quantizeFor makes scheme's INT8 model; the placed scheme's becomes the
// build's deployed model unless it is non-finite, INT8 does not pay
// (placement.json) or the guard missed it.
func (b *builder) quantizeFor(scheme quantize.Target) error {
	res, err := b.quantizeScheme(scheme)
	if res != nil {
		if b.res.INT8 == nil {
			b.res.INT8 = map[quantize.Target]*ptq.Result{}
		}
		b.res.INT8[scheme] = res
	}
	out := b.quantized[scheme]
	if err != nil || out == "" {
		return err
	}
	placed := scheme == PlacedScheme
	if placed {
		b.ortModel, b.ortPrecision = out, "int8"
		b.disqualifyNonFinite()
		if err := b.writePlacement(); err != nil {
			return err
		}
	}
	if g := res.Guard; g != nil && g.Allowed {
		rel, _ := target.QuantizedModel(scheme)
		b.res.NotRecommended = append(b.res.NotRecommended, rel)
		note := fmt.Sprintf("%s: %s misses the accuracy guard (%s); kept because of allow_accuracy_loss, not recommended", scheme, path.Base(rel), schema.FailedChecks(g.Checks))
		if placed {
			b.ortModel = b.float
			note += ": the ORT and Triton artifacts are FP32"
		}
		b.note(note)
	}
	return nil
}

// refused takes ptq's error for scheme: when the accuracy guard refused
// the INT8 model, the build goes on without it (every artifact that does
// not depend on it is still made, checked and reported; the ORT and
// Triton artifacts are FP32) and records the refusal, which the build's
// exit status reports (Result.Refused); any other error fails the build.
func (b *builder) refused(scheme quantize.Target, rel string, err error) error {
	if errors.Is(err, ptq.ErrNothingToQuantize) {
		// Not an error of the build: nothing in the model is quantized by
		// this scheme, so its INT8 artifact would be the float model.
		b.note(fmt.Sprintf("%s: nothing to quantize (no Conv, ConvTranspose, Gemm or MatMul with a constant weight): %s was not written; the artifacts are float", scheme, rel))
		return nil
	}
	var ge *ptq.GuardError
	if !errors.As(err, &ge) {
		return err
	}
	b.res.Refused = append(b.res.Refused, Refusal{Scheme: string(scheme), Artifact: rel, Guard: ge.Guard})
	_, what := target.QuantizedModel(scheme)
	b.note(fmt.Sprintf("%s: INT8 REFUSED by the accuracy guard on %s (%s): %s was not written; %s", scheme, ge.Guard.On(), schema.FailedChecks(ge.Guard.Checks), rel, what))
	return nil
}

// ptqOptions maps the config onto optc quantize's options.
func (b *builder) ptqOptions(target quantize.Target, out string) (ptq.Options, error) {
	c := b.c
	o := ptq.Options{
		Input: b.float, Optimized: true, Output: out, CalibData: c.Calibration.Data, CalibCache: b.calibFile,
		CalibOpts: b.dataOptions(c.Calibration.Data, c.Calibration.Batch, c.Calibration.Samples),
		Method:    calibrate.Method(c.Calibration.Method),
		Calib:     calibrate.Options{Percentile: c.Calibration.Percentile, MovingAverage: c.Calibration.MovingAverage},
		Quant: quantize.Options{Target: target, Exclude: c.Quantize.Exclude,
			KeepFirstLast: c.Quantize.KeepFirstLast, PerChannel: &c.Quantize.PerChannel},
		EvalData: b.eval.spec, EvalOpts: b.eval.opts, Session: b.session(), Inputs: data.ConfigSpec(c), NoLatency: true,
		Batches: c.Latency.Batches, ORTLib: c.Runtime.ORTLib, MaxAccuracyDrop: c.Quantize.MaxAccuracyDrop, MinCosine: c.Quantize.MinCosine,
		MaxRelError: c.Quantize.MaxRelError, NoGuard: c.Quantize.NoGuard, AllowAccuracyLoss: c.Quantize.AllowAccuracyLoss,
		FallbackBudget:      time.Duration(b.res.Plan.FallbackSeconds * float64(time.Second)),
		Deadline:            b.restShareDeadline(ptq.SQNRShare),
		CalibrationDeadline: b.calibrationDeadline(),
		CheckDeadline:       b.restShareDeadline(ptq.CheckShare),
		SmoothAlpha:         c.Quantize.SmoothAlpha,
	}
	// config.Validate checked the names.
	o.Techniques, _ = quantize.ParseTechniques(c.Quantize.Techniques)
	o.EvalLabels, o.EvalTask = tasks.Scoring(tasks.Spec(c.Eval))
	if !b.res.EvalHeldOut {
		// ptq then measures on the calibration data and says so.
		o.EvalData, o.EvalOpts = "", data.Options{}
	}
	// A subset is drawn at random (seeded), not taken from the front of a
	// file that may be sorted by class.
	o.CalibOpts.Shuffle = c.Calibration.Samples > 0
	o.Calib.Progress = b.calibrationProgress(int64(c.Calibration.Samples))
	o.Progress = func(format string, args ...any) { b.progress("int8 "+string(target)+": "+format, args...) }
	// The scheme's fields, not its name, say which options apply: the
	// format to a scheme that has a QOperator form, placement (timed in
	// ORT) to one ORT runs itself.
	sc, err := quantize.SchemeFor(target)
	if err != nil {
		return ptq.Options{}, err
	}
	if sc.QOperator {
		o.Quant.Format = quantize.Format(c.Quantize.Format)
	}
	if !sc.OtherRuntime {
		if o.Quant.Format != quantize.FormatQOperator {
			env := bench.MeasuredOn()
			o.Placement, o.CPU, o.CPUFlags = c.Quantize.Placement, env.CPU, env.CPUFlags
			o.PlacementBudget = time.Duration(b.res.Plan.PlacementSeconds * float64(time.Second))
			if b.replay != nil {
				if o.Placement, err = b.replayedPlacement(); err != nil {
					return ptq.Options{}, err
				}
			}
		}
	}
	// Validated with the config: an unknown mode cannot reach here.
	o.Quant.ReduceRange, _ = quantize.ParseReduceRange(c.Quantize.ReduceRange)
	b.replayedStops(target, &o)
	return o, nil
}

// stopsOf is where the budget ended a quantization, refused or not.
func stopsOf(res *ptq.Result, err error) ptq.Stops {
	var ge *ptq.GuardError
	if errors.As(err, &ge) {
		return ge.Stops
	}
	if res != nil {
		return res.Stops
	}
	return nil
}

// calibrationProgress is ptq.CalibrationProgress on the build's stage
// lines. After the first batch it prints what the samples will take (the
// first batch, cold, errs long), and says so before going on when that is
// more than the plan leaves for what the budget does not bound.
func (b *builder) calibrationProgress(total int64) func(int64) {
	return ptq.CalibrationProgress(total, b.progress, func(n int64, took time.Duration) { b.checkCalibrationFits(n, total, took) })
}

// dataOptions reads a data file: shapes only fix random data (files carry
// their own), samples bound what is read.
func (b *builder) dataOptions(spec string, batch, samples int) data.Options {
	o := data.Options{Batch: batch, Samples: samples, Seed: b.c.Calibration.Seed, High: 1, Image: data.ConfigImage(b.c.Image), Spec: data.ConfigSpec(b.c)}
	if spec != "random" {
		o.Shapes = nil
	} else {
		// Calibration and checks: floats standard normal (an input's
		// ranges: uniform in it), enough samples whatever the model's
		// static batch.
		o.Normal = true
		if o.Samples == 0 {
			o.Samples = ptq.RandomSamples
		}
	}
	return o
}

// session is how every artifact is run and measured.
func (b *builder) session() ort.Options { return Session(b.c) }

// Session is how a build with configuration c runs and times its
// artifacts: runtime.level and runtime.threads on ORT's CPU provider
// (optc diff --remeasure times a build's artifacts so again).
func Session(c config.Config) ort.Options {
	level, _ := ort.ParseLevel(c.Runtime.Level)
	return ort.Options{Level: level, IntraOpThreads: c.Runtime.Threads, Provider: "cpu"}
}

// TimingData is what a build with configuration c times models on:
// random inputs in [0, 1), seeded, with c's shapes, ranges and values.
func TimingData(c config.Config) data.Options {
	return data.Options{High: 1, Seed: 1, Spec: data.ConfigSpec(c)}
}

// checkSession is how an artifact is checked: the runtime's level, and
// the threads left to compare, which runs a check as throughput
// (compare.Options.Workers); runtime.threads is the deployment's, for
// timing.
func (b *builder) checkSession() ort.Options {
	s := b.session()
	s.IntraOpThreads = 0
	return s
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// writePlacement writes placement.json (where the ort INT8 model is
// quantized and why) and deploys the float model for ORT when INT8 does not
// pay on this CPU.
func (b *builder) writePlacement() error {
	p := b.res.Placed().Placement
	if p == nil {
		return nil
	}
	if p.Recommended == schema.RecommendFP32 && b.ortModel != b.float {
		b.ortModel = b.float
		b.res.Notes = append(b.res.Notes, "ort: INT8 does not pay on this CPU, so the ORT and Triton artifacts are FP32; model.int8.onnx holds the fastest INT8 placement (placement.json)")
	}
	js, err := p.Marshal()
	if err != nil {
		return err
	}
	path, err := b.dir.path("placement.json")
	if err != nil {
		return err
	}
	b.add("placement.json", string(PlacedScheme), "placement", "", "")
	if err := atomicfile.Write(path, js); err != nil {
		return err
	}
	return b.recordPlacement(path, p)
}

// disqualifyNonFinite deploys the float model for ORT and Triton when the
// INT8 model is NaN or infinite anywhere the float model is finite, on
// the data ptq measured it on: no speed makes up for that. The placement
// (when there is one) then recommends FP32 and says why.
func (b *builder) disqualifyNonFinite() {
	acc := b.res.Placed().Accuracy
	if acc == nil {
		return
	}
	var n, total int64
	for _, o := range acc.Outputs {
		n, total = n+o.NewNonFinite, total+o.Total
	}
	if n == 0 {
		return
	}
	b.ortModel = b.float
	why := fmt.Sprintf("the INT8 model is NaN/Inf at %d of %d output values where the float model is finite (on %s)", n, total, acc.Data)
	if p := b.res.Placed().Placement; p != nil {
		p.Recommended, p.Reason = schema.RecommendFP32, "FP32: "+why
	}
	b.note("ort: " + why + ", so it is not deployed: the ORT and Triton artifacts are FP32; model.int8.onnx is kept for inspection")
}
