// Package ptq is what `optc quantize` does: post-training INT8
// quantization end to end. It runs the -O2 passes (BatchNormalization is
// folded before quantizing) unless the caller already ran its own,
// calibrates activation ranges in ONNX
// Runtime (or reads them from a calibration cache), inserts Q/DQ for the
// target, and measures the result against the float model: accuracy and
// agreement on evaluation data, and latency.
package ptq

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
)

// Options say what to quantize, with which data, for which target.
type Options struct {
	Input, Output string
	// Optimized says Input already went through the caller's passes: optc
	// build runs them once, at its own -O level (so -O0 --int8 stays
	// unfused), and Run does not run them again. Without it Run runs the
	// -O2 passes, as `optc quantize` does.
	Optimized bool
	CalibData string
	CalibOpts data.Options // batch, samples (--calib-samples), shapes
	Method    calibrate.Method
	Calib     calibrate.Options
	// CalibCache is a calibration file: read when it exists and matches
	// the model, else written after collection.
	CalibCache string
	Quant      quantize.Options
	// EvalData and EvalLabels measure the result; without EvalData the
	// calibration data is used (and the report says it is not held out).
	EvalData   string
	EvalOpts   data.Options
	EvalLabels string
	// EvalTask, when set, is a task plug-in scoring the eval data's
	// ground truth (EvalLabels is then empty); the guard judges its
	// output by the task's figure.
	EvalTask task.Factory
	// Session is how the float and INT8 models are measured (default:
	// level all, the level the artifact runs at).
	Session ort.Options
	// Inputs is the input specification (--shape, --batch-axis, --value,
	// --range) for the runs on random data: latency and placement.
	Inputs data.Spec
	// Batches are the batch sizes the model is deployed at: the placement
	// search decides INT8 by its speed at these, and the latency rows time
	// them (default 1 and 8; a batch the model fixes replaces them).
	Batches []int
	// NoLatency skips the latency runs (optc build times every artifact
	// itself).
	NoLatency bool
	ORTLib    string
	// MaxAccuracyDrop (points, needs EvalLabels) and MinCosine (every
	// output, no labels needed) replace the accuracy guard's limits (see
	// GuardMaxDrop): the most sensitive layers fall back to float until
	// the guard holds.
	MaxAccuracyDrop float64
	MinCosine       float64
	// MaxRelError replaces GuardMaxRelError.
	MaxRelError float64
	// FallbackBudget bounds the accuracy control (0: none): when it runs
	// out the fallback keeps the best passing model found so far, or
	// refuses (optc build: the budget's share).
	FallbackBudget time.Duration
	// Deadline, when set, is when the quantization's share of a budget
	// ends (optc build --budget): the per-tensor SQNR, a diagnostic, is
	// skipped after it, and Result.SQNRSkipped says so.
	Deadline time.Time
	// CalibrationDeadline, when set, ends calibration at the first batch
	// after it once MinBudgetSamples have run (optc build --budget); what
	// reuses the calibration data (bias correction, GPTQ) then reads the
	// same samples, and Result.Calibration says where it stopped.
	CalibrationDeadline time.Time
	// CheckDeadline, when set, ends the guard's first check of the INT8
	// model on the evaluation data at the first batch after it once
	// MinCheckSamples have run; every later measurement (the guard's
	// tries, the fallback, placement) compares on the same samples.
	CheckDeadline time.Time
	// Replaying ends the loops a budget bounds (calibration, the guard's
	// tries, GPTQ, the fallback) where a recorded Run ended them
	// (ReplayStops, its Result.Stops) and times none of them: a replayed
	// build writes the same model whatever the machine's speed.
	Replaying   bool
	ReplayStops Stops
	// NoGuard turns the accuracy guard off (--no-guard): its checks are
	// measured and reported, but nothing falls back and nothing is
	// refused.
	NoGuard bool
	// AllowAccuracyLoss writes the INT8 model even when it misses the
	// accuracy guard after the accuracy control (Result.Guard says so);
	// without it Run writes nothing and returns a *GuardError.
	AllowAccuracyLoss bool
	// Placement is where INT8 goes for the ort target: "" or
	// "all-int8" (every quantizable node, as before), "auto" (measured,
	// see package placement) or a placement.json to replay.
	Placement string
	// PlacementBudget bounds the "auto" search (default 60s).
	PlacementBudget time.Duration
	// CPU and CPUFlags go into placement.json.
	CPU      string
	CPUFlags []string
	// Progress, when set, gets a line as each step after calibration
	// starts (the accuracy check, the fallback, the placement search and
	// its steps, the per-tensor SQNR).
	Progress func(format string, args ...any)
	// Dynamic quantizes to dynamic INT8 (quantize.ApplyDynamic): int8
	// MatMul/Gemm weights, activations quantized at run time. Nothing is
	// calibrated; CalibData, when given, is only evaluation data.
	Dynamic bool
	// Techniques are the post-training techniques to apply (in
	// quantize.Techniques' order): SmoothQuant rescales the float model
	// before calibration, bias correction measures the INT8 model's mean
	// error per channel after it. SmoothAlpha is SmoothQuant's migration
	// strength (0: quantize.DefaultSmoothAlpha).
	Techniques  []schema.Technique
	SmoothAlpha float64

	// stops ends the bounded loops (set by Run).
	stops *stopper
}

// MinBudgetSamples is the fewest samples a budget lets calibration stop
// at: fewer give ranges of a handful of inputs.
const MinBudgetSamples = 16

// progress says what Run does next, when someone listens.
func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// counter returns a function to call as each of total items of a long
// loop is done: it says "what: i of total" (total <= 0: "i so far") at
// most every ProgressEvery, so that no step is silent for long.
func (o Options) counter(what string, total int) func(done int) {
	last := time.Now()
	return func(done int) {
		if time.Since(last) < ProgressEvery || total > 0 && done >= total {
			return
		}
		last = time.Now()
		if total <= 0 { // not known beforehand
			o.progress("%s: %d so far", what, done)
			return
		}
		o.progress("%s: %d of %d", what, done, total)
	}
}

// Result is what `optc quantize` reports.
type Result struct {
	Input       string           `json:"input"`
	Output      string           `json:"output"`
	Calibration CalibrationInfo  `json:"calibration"`
	Quantize    *quantize.Report `json:"quantize"`
	Accuracy    *compare.Result  `json:"accuracy"` // A float, B INT8
	HeldOut     bool             `json:"eval_data_held_out"`
	Latency     []LatencyRow     `json:"latency"`
	FloatBytes  int64            `json:"float_bytes"`
	Int8Bytes   int64            `json:"int8_bytes"`
	Passes      *passes.Report   `json:"passes"`
	// UpgradedOpset counts the nodes rewritten to reach opset 13 (0 when
	// the model already was).
	UpgradedOpset int `json:"upgraded_opset_nodes"`
	// Sensitivity is how the model measures with each weighted layer the
	// fallback ranked kept float alone, LayerSQNR each weighted layer's own
	// error that chose them (worst first; only with more layers than the
	// ranking measures), and FellBack the layers kept float to meet the
	// accuracy criterion.
	Sensitivity []Sensitivity `json:"sensitivity,omitempty"`
	LayerSQNR   []LayerSQNR   `json:"layer_sqnr,omitempty"`
	FellBack    []string      `json:"fell_back,omitempty"`
	// Guard is the accuracy guard's checks and decision.
	Guard *schema.Guard `json:"guard"`
	// TensorSQNR is each quantized activation's SQNR, worst first.
	TensorSQNR []TensorSQNR `json:"tensor_sqnr,omitempty"`
	// SQNRSkipped says why the per-tensor SQNR was not measured.
	SQNRSkipped string `json:"sqnr_skipped,omitempty"`
	// QualityLevel is the ORT level accuracy, cosine and SQNR were
	// measured at (see qualitySession).
	QualityLevel string `json:"quality_level"`
	// Placement is the latency-aware placement (placement.json; ort
	// with Options.Placement set).
	Placement *schema.Placement `json:"placement,omitempty"`
	// PlacementFrom is the placement.json Placement was replayed from
	// (Options.Placement a file), "" when it was decided here.
	PlacementFrom string `json:"placement_from,omitempty"`
	// Caveats are what the figures above rest on (random calibration,
	// checks on the calibration samples or on few samples).
	Caveats schema.Caveats `json:"caveats"`
	// ShapesFromData are the dynamic dims random inputs and timing could
	// not tell, taken from the first sample of the calibration (else
	// evaluation) data, as --shape values (data.ShapesFromData).
	ShapesFromData []string `json:"shapes_from_data,omitempty"`
	// Stops is where the budget ended the quantization's bounded loops
	// (nil: nowhere); a replay gives it back as Options.ReplayStops.
	Stops Stops `json:"stopped_at,omitempty"`
	// Techniques is what Options.Techniques did.
	Techniques *schema.TechniquesReport `json:"techniques,omitempty"`
}

// CalibrationInfo says where the ranges came from.
type CalibrationInfo struct {
	Method  string `json:"method"`
	Samples int64  `json:"samples"`
	// Stopped: the budget (or a replay of it) ended calibration after
	// Samples, before the data's end.
	Stopped   bool   `json:"stopped_by_budget,omitempty"`
	Tensors   int    `json:"tensors"`
	Cache     string `json:"cache,omitempty"`
	FromCache bool   `json:"from_cache"`
	// Choices counts, for the auto method, the tensors whose range came
	// from each candidate.
	Choices map[string]int `json:"auto_choices,omitempty"`
}

// LatencyRow is float and INT8 p50 latency and throughput at one batch size.
type LatencyRow struct {
	Batch          int     `json:"batch"`
	FloatP50       float64 `json:"float_p50_ms"`
	Int8P50        float64 `json:"int8_p50_ms"`
	FloatPerSecond float64 `json:"float_samples_per_s"`
	Int8PerSecond  float64 `json:"int8_samples_per_s"`
}

// ErrNothingToQuantize: the model has no operator the scheme quantizes.
// optc quantize fails with it; optc build ships FP32 and says so.
var ErrNothingToQuantize = errors.New("no operator was quantized (no Conv, ConvTranspose, Gemm or MatMul with constant weights and calibrated ranges)")

// Run quantizes opts.Input into opts.Output.
func Run(opts Options) (*Result, error) {
	opts.stops = newStopper(opts.Replaying, opts.ReplayStops)
	res, err := run(opts)
	// Where the budget stopped is recorded with a refusal too: a replay
	// that did not stop there might pass.
	stops := opts.stops.stops()
	var ge *GuardError
	if errors.As(err, &ge) {
		ge.Stops = stops
	}
	if res != nil {
		res.Stops = stops
	}
	return res, err
}

func run(opts Options) (*Result, error) {
	if opts.CalibData == "" && opts.CalibCache == "" && !opts.Dynamic {
		return nil, errors.New("no calibration data: give --calib-data (or a --calib-cache made for this model)")
	}
	if opts.Method == "" {
		opts.Method = calibrate.DefaultMethod
	}
	randomDefaults(&opts)
	if opts.MaxAccuracyDrop > 0 && opts.EvalLabels == "" && opts.EvalTask == nil {
		return nil, errors.New("--max-accuracy-drop needs --eval-labels (use --min-cosine without labels)")
	}
	m, err := ort.LoadModel(opts.ORTLib, opts.Input)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	res := &Result{Input: opts.Input, Output: opts.Output}
	batches, err := prepare(&opts, m, res)
	if err != nil {
		return nil, err
	}
	rescaled, err := rescale(opts, m, res)
	if err != nil {
		return nil, err
	}
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		return nil, err
	}
	if !opts.Optimized || res.UpgradedOpset > 0 || rescaled {
		// Otherwise float is the input itself, already checked by the
		// caller's passes stage.
		if err := checkFloat(opts, float); err != nil {
			return nil, err
		}
	}
	if opts.Dynamic {
		return runDynamic(opts, float, res, batches)
	}
	// The guard checks on held-out samples: the evaluation data, else
	// calibration data calibration does not use.
	eval, evalOpts := opts.EvalData, opts.EvalOpts
	// Eval data that is the calibration file is not held out, unless it
	// is the part of it calibration skips (build's split).
	res.HeldOut = eval != "" && (evalOpts.Skip > 0 || !data.SameFile(eval, opts.CalibData))
	if eval == "" {
		eval, evalOpts, res.HeldOut = holdOut(&opts, data.GraphInputs(m.Graph))
	}
	plain, err := calibrated(&opts, m, res)
	if err != nil {
		return nil, err
	}
	if err := roundAndCorrect(&opts, float, plain, res); err != nil {
		return nil, err
	}
	q, int8Model, rep, err := quantizeWith(float, plain, opts.Quant)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	res.Quantize = rep
	if len(rep.Quantized) == 0 {
		return nil, fmt.Errorf("%s: %w", opts.Input, ErrNothingToQuantize)
	}
	quality := qualitySession(opts)
	res.QualityLevel = quality.Level.String()
	res.Guard = &schema.Guard{Data: eval, HeldOut: res.HeldOut}
	ms := measurers(opts, float, eval, evalOpts, quality)
	if eval != "" {
		opts.progress("checking the INT8 model against float on %s", eval)
		if res.Accuracy, err = ms.full(int8Model); err != nil {
			return nil, err
		}
		if res.Accuracy.Stopped {
			opts.progress("the check stopped after %d samples: %s; the guard judges on them", res.Accuracy.Samples, opts.stopReason("its share of the budget was spent"))
		}
	}
	if q, int8Model, err = guard(&opts, float, plain, res, q, int8Model, ms); err != nil {
		if IsGuardError(err) {
			return res, err
		}
		return nil, err
	}
	// A QOperator model has no QuantizeLinear/DequantizeLinear pairs to
	// read activations at; it computes what its QDQ form computes, so the
	// per-tensor SQNR is measured on that form.
	sqnrModel, sqnrFloat := int8Model, float
	if opts.Placement != "" && !otherRuntime(opts) {
		// The placed model is quantized from placedFloat (the float model
		// with its conv channels padded, when the search chose that): the
		// SQNR pairs the two, each tensor with its own shape.
		var placedFloat graph.Serialized
		if q, int8Model, placedFloat, err = place(opts, float, plain, batches, res, ms.full); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Input, err)
		}
		if res.Placement == nil || res.Placement.Chosen != placement.CandidateQOperator {
			sqnrModel, sqnrFloat = int8Model, placedFloat
		}
	}
	res.FloatBytes, res.Int8Bytes = int64(len(float.Bytes)), int64(len(int8Model.Bytes))
	if eval != "" {
		if err := measureSQNR(opts, quality, sqnrFloat, sqnrModel, eval, evalOpts, res); err != nil {
			return nil, err
		}
	}
	if err := finish(opts, q, float, int8Model, batches, res); err != nil {
		return nil, err
	}
	return res, nil
}

// finish times float and INT8 (unless the caller times them itself),
// writes the INT8 model and says what the figures rest on.
func finish(opts Options, q *graph.Model, float, int8Model graph.Serialized, batches []int, res *Result) error {
	var err error
	if !opts.NoLatency {
		if res.Latency, err = measureLatency(opts, float, int8Model, batches); err != nil {
			return err
		}
	}
	if err := graph.Save(q, opts.Output, graph.SaveOptions{}); err != nil {
		return err
	}
	res.Caveats = res.caveats(opts)
	return nil
}

// prepare fixes the model's shapes from the data, runs the quantization
// passes (unless the caller ran its own) and upgrades the opset per-channel
// Q/DQ needs; it returns the batch sizes timings run at: the
// deployment's, or the one the model fixes.
func prepare(opts *Options, m *graph.Model, res *Result) ([]int, error) {
	if err := shapesFromData(opts, res, data.GraphInputs(m.Graph)); err != nil {
		return nil, err
	}
	var err error
	if !opts.Optimized {
		pipeline := passes.Pipeline(passes.Quantization)
		if res.Passes, err = passes.Run(m, pipeline, passes.Options{Eval: &ort.NodeEvaluator{}}); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Input, err)
		}
	}
	if m.OpsetVersion("") < 13 {
		if res.UpgradedOpset, err = passes.UpgradeOpset(m, 13); err != nil {
			return nil, fmt.Errorf("%s: per-channel Q/DQ needs opset 13: %w", opts.Input, err)
		}
	}
	batches := []int{1, 8}
	if len(opts.Batches) > 0 {
		batches = opts.Batches
	}
	if b := data.StaticBatch(data.GraphInputs(m.Graph), opts.Inputs); b > 0 {
		batches = []int{b}
	}
	if len(opts.Techniques) > 0 && !opts.Dynamic {
		res.Techniques = &schema.TechniquesReport{}
	}
	return batches, nil
}

// rescale applies the techniques that change the float model's numbers,
// not its function, before calibration (cross-layer equalization,
// SmoothQuant); it reports whether they changed any, which the float
// check then proves.
func rescale(opts Options, m *graph.Model, res *Result) (bool, error) {
	rescaled := false
	var err error
	if res.Techniques != nil && slices.Contains(opts.Techniques, quantize.TechniqueEqualize) {
		if res.Techniques.Equalized, err = quantize.Equalize(m, equalizeIterations); err != nil {
			return false, fmt.Errorf("%s: %w", opts.Input, err)
		}
		res.Techniques.Applied = append(res.Techniques.Applied, quantize.TechniqueEqualize)
		rescaled = len(res.Techniques.Equalized) > 0
	}
	if res.Techniques != nil && slices.Contains(opts.Techniques, quantize.TechniqueSmoothQuant) {
		if opts.CalibData == "" {
			return false, fmt.Errorf("%s: smoothquant needs --calib-data (a calibration cache holds no per-channel ranges)", opts.Input)
		}
		opts.progress("smoothquant: per-channel ranges of the MatMul/Gemm inputs on %s", opts.CalibData)
		if res.Techniques.SmoothQuant, err = smoothQuant(opts, m); err != nil {
			return false, fmt.Errorf("%s: %w", opts.Input, err)
		}
		res.Techniques.Applied = append(res.Techniques.Applied, quantize.TechniqueSmoothQuant)
		rescaled = rescaled || len(res.Techniques.SmoothQuant.Groups) > 0
	}
	return rescaled, nil
}

// calibrated is each calibrated tensor's range, from the cache or the
// calibration data (res.Calibration says which). When the budget stopped
// calibration, what reads the calibration data after it reads the same
// samples.
func calibrated(opts *Options, m *graph.Model, res *Result) (map[string][2]float64, error) {
	ranges, info, err := calibrationRanges(*opts, m)
	if err != nil {
		return nil, err
	}
	res.Calibration = *info
	if info.Stopped {
		opts.CalibOpts.Samples = int(info.Samples)
	}
	if info.FromCache && res.HeldOut && opts.EvalData == "" && info.Samples != int64(opts.CalibOpts.Samples) {
		// A cache made on other samples than this split's.
		res.HeldOut = false
	}
	plain := make(map[string][2]float64, len(ranges))
	for name, r := range ranges {
		plain[name] = [2]float64{r.Min, r.Max}
	}
	return plain, nil
}

// roundAndCorrect applies the techniques asked for that work on the INT8
// weights from the calibration data: GPTQ's rounding, then bias
// correction of the weights as rounded.
func roundAndCorrect(opts *Options, float graph.Serialized, plain map[string][2]float64, res *Result) error {
	var err error
	if res.Techniques != nil && slices.Contains(opts.Techniques, quantize.TechniqueGPTQ) {
		if opts.CalibData == "" {
			return fmt.Errorf("%s: gptq needs --calib-data", opts.Input)
		}
		opts.progress("gptq: input Grams of the INT8 layers on %s", opts.CalibData)
		if opts.Quant.Rounded, res.Techniques.GPTQ, err = gptqRounding(*opts, float, plain, 0, time.Time{}); err != nil {
			return fmt.Errorf("%s: %w", opts.Input, err)
		}
		res.Techniques.Applied = append(res.Techniques.Applied, quantize.TechniqueGPTQ)
	}
	if res.Techniques != nil && slices.Contains(opts.Techniques, quantize.TechniqueBiasCorrection) {
		if opts.CalibData == "" {
			return fmt.Errorf("%s: bias-correction needs --calib-data", opts.Input)
		}
		opts.progress("bias correction: mean error per channel of each INT8 layer on %s", opts.CalibData)
		if opts.Quant.BiasShift, res.Techniques.Bias, err = biasCorrection(*opts, float, plain); err != nil {
			return fmt.Errorf("%s: %w", opts.Input, err)
		}
		res.Techniques.Applied = append(res.Techniques.Applied, quantize.TechniqueBiasCorrection)
	}
	return nil
}

// measures are the ways the guard measures an INT8 model against float on
// the evaluation data.
type measures struct {
	// full compares on all of it, quick on its first sensitivitySamples
	// (the fallback's ranking).
	full, quick func(graph.Serialized) (*compare.Result, error)
	// layers is each named layer's own error (layerSQNR) on the quick
	// samples, worst first.
	layers func(int8Model graph.Serialized, names []string) ([]LayerSQNR, error)
}

// measurers compare an INT8 model with float on the evaluation data. The
// float model's outputs are kept for the next measurement on the same
// data: the guard and placement measure many INT8 candidates.
func measurers(opts Options, float graph.Serialized, eval string, evalOpts data.Options, quality ort.Options) measures {
	ref := compare.NewReference()
	measureOn := func(dopts data.Options, stop func(int64) bool) func(graph.Serialized) (*compare.Result, error) {
		return func(b graph.Serialized) (*compare.Result, error) {
			r, err := compare.Models(compare.Options{
				ModelA: "float", ModelB: "int8", AInMemory: float, BInMemory: b,
				Data: eval, DataOpts: dopts, Labels: opts.EvalLabels, Scorer: opts.EvalTask,
				Atol: map[string]float64{"": 1e9}, Session: quality, ORTLib: opts.ORTLib, Reference: ref, Stop: stop,
			})
			if err != nil {
				return nil, fmt.Errorf("evaluating the INT8 model: %w", err)
			}
			if r.Stopped && stop != nil {
				// Every later measurement compares on these samples.
				n := r.Samples
				stop = func(samples int64) bool { return samples >= n }
			}
			return r, nil
		}
	}
	quickOpts := evalOpts
	if quickOpts.Samples == 0 || quickOpts.Samples > sensitivitySamples {
		quickOpts.Samples = sensitivitySamples
	}
	opts.Session = quality
	return measures{
		full:  measureOn(evalOpts, opts.checkStop()),
		quick: measureOn(quickOpts, nil),
		layers: func(b graph.Serialized, names []string) ([]LayerSQNR, error) {
			return layerSQNR(opts, float, b, names, eval, quickOpts, quickOpts.Samples)
		},
	}
}

// GuardCheckLoop is the guard's first check's entry in Stops: the
// evaluation samples it compared.
const GuardCheckLoop = "guard check samples"

// checkStop is the Stop of the guard's first check (Options.CheckDeadline,
// or the replayed count); nil: it runs to the data's end.
func (o Options) checkStop() func(int64) bool {
	if o.CheckDeadline.IsZero() && !o.Replaying {
		return nil
	}
	stop := o.stops.loop(GuardCheckLoop)
	return func(n int64) bool {
		return n >= schema.MinCheckSamples && stop(int(n), o.CheckDeadline)
	}
}

// measureSQNR is each quantized activation's SQNR on the evaluation data
// (a diagnostic: skipped once the budget's Deadline has passed).
func measureSQNR(opts Options, quality ort.Options, float, int8Model graph.Serialized, eval string, evalOpts data.Options, res *Result) error {
	if !opts.Deadline.IsZero() && time.Now().After(opts.Deadline) {
		res.SQNRSkipped = "the quantization's share of the budget was spent"
		opts.progress("per-tensor SQNR skipped: %s", res.SQNRSkipped)
		return nil
	}
	opts.progress("per-tensor SQNR on %s", eval)
	sq := opts
	sq.Session = quality
	var err error
	if res.TensorSQNR, err = tensorSQNR(sq, float, int8Model, eval, evalOpts); err != nil {
		return fmt.Errorf("per-tensor SQNR: %w", err)
	}
	return nil
}

// RandomSamples is how many samples random calibration and random checks
// draw when no count is given.
const RandomSamples = data.RandomSamples

// randomSeedOffset moves a random check's seed off calibration's, so that
// it draws fresh samples.
const randomSeedOffset = 0x686f6c64 // "hold"

// randomDefaults sizes random calibration and evaluation data and keeps
// a random check off the calibration samples.
func randomDefaults(opts *Options) {
	if opts.CalibData == "random" && opts.CalibOpts.Samples == 0 {
		opts.CalibOpts.Samples = RandomSamples
	}
	if opts.EvalData != "random" {
		return
	}
	if opts.EvalOpts.Samples == 0 {
		opts.EvalOpts.Samples = RandomSamples
	}
	if opts.CalibData == "random" && opts.EvalOpts.Seed == opts.CalibOpts.Seed {
		opts.EvalOpts.Seed ^= randomSeedOffset
	}
}

// shapesFromData fixes in opts.Inputs the dynamic dims random data cannot
// shape (a sequence length no --shape gives) from the calibration data,
// else the evaluation data, and records them in res.
func shapesFromData(opts *Options, res *Result, inputs []data.Input) error {
	spec, dopts := opts.CalibData, opts.CalibOpts
	if spec == "" || spec == "random" {
		spec, dopts = opts.EvalData, opts.EvalOpts
	}
	dopts.Spec = opts.Inputs
	shapes, named, err := data.ShapesFromData(spec, inputs, dopts)
	if err != nil || named == nil {
		return err
	}
	opts.Inputs.Shapes = shapes
	// Random calibration or evaluation data is shaped the same way.
	if opts.CalibData == "random" {
		opts.CalibOpts.Shapes = shapes
	}
	if opts.EvalData == "random" {
		opts.EvalOpts.Shapes = shapes
	}
	for _, n := range named {
		res.ShapesFromData = append(res.ShapesFromData, data.ShapeFlag(n, shapes[n]))
	}
	opts.progress("shapes from %s for what random inputs and timing cannot tell: %s (--shape sets them)", spec, strings.Join(res.ShapesFromData, " "))
	return nil
}

// qualitySession is how the INT8 model's quality is measured:
// opts.Session, but at level basic at most for a scheme meant for another
// runtime (tensorrt). Above basic ORT fuses the Q/DQ groups into its CPU
// integer kernels, which on x86 without AVX-512 VNNI or AVX-VNNI saturate
// with full-range int8 weights (ort keeps its weights within ±63 there;
// TensorRT rightly does not), so the figures would be ORT's CPU kernels',
// not the target's: PP-OCRv4 det's tensorrt model measured cosine 0.06 at
// level all on an AVX2 machine and 0.64 at basic, where the Q/DQ pairs run
// as float arithmetic on the quantized values, as TensorRT computes.
// The deployment's thread count is for timing: a check leaves it to
// compare, which runs it as throughput (compare.Options.Workers).
func qualitySession(opts Options) ort.Options {
	s := opts.Session
	s.IntraOpThreads = 0
	if otherRuntime(opts) && s.Level > ort.LevelBasic {
		s.Level = ort.LevelBasic
	}
	return s
}

// calibrationRanges reads the cache when it matches the model, else
// collects statistics over the calibration data (and writes the cache
// when a path was given).
func calibrationRanges(opts Options, m *graph.Model) (map[string]calibrate.Range, *CalibrationInfo, error) {
	info := &CalibrationInfo{Method: string(opts.Method), Cache: opts.CalibCache}
	digest, err := graph.Digest(m)
	if err != nil {
		return nil, nil, err
	}
	if opts.CalibCache != "" {
		if _, err := os.Stat(opts.CalibCache); err == nil {
			c, err := calibrate.ReadCache(opts.CalibCache)
			if err != nil {
				return nil, nil, err
			}
			if c.Model != digest {
				return nil, nil, fmt.Errorf("calibration cache %s was made for another model (or other passes); delete it or choose another path", opts.CalibCache)
			}
			if c.Method != string(opts.Method) {
				return nil, nil, fmt.Errorf("calibration cache %s holds %s ranges, --method is %s", opts.CalibCache, c.Method, opts.Method)
			}
			info.FromCache, info.Samples, info.Stopped, info.Tensors, info.Choices = true, c.Samples, c.Stopped, len(c.Tensors), c.Choices()
			return c.Ranges(), info, nil
		}
		if opts.CalibData == "" {
			return nil, nil, fmt.Errorf("calibration cache %s does not exist and there is no --calib-data to make it", opts.CalibCache)
		}
	}
	src, err := data.Open(opts.CalibData, data.GraphInputs(m.Graph), opts.CalibOpts)
	if err != nil {
		return nil, nil, err
	}
	defer src.Close()
	tensors := calibrate.DefaultTensors(m)
	opts.progress("calibrating on %s: %d tensors", opts.CalibData, len(tensors))
	if !opts.CalibrationDeadline.IsZero() || opts.Replaying {
		stop := opts.stops.loop(CalibrationLoop)
		opts.Calib.Stop = func(n int64) bool {
			return n >= MinBudgetSamples && stop(int(n), opts.CalibrationDeadline)
		}
	}
	stats, err := calibrate.Collect(m, src, tensors, opts.Calib)
	if err != nil {
		return nil, nil, fmt.Errorf("calibrating on %s: %w", opts.CalibData, err)
	}
	if stats.Stopped {
		what := "its share of the budget was spent"
		if opts.Replaying {
			what = "as the replayed build's did"
		}
		opts.progress("calibration stopped after %d samples: %s", stats.Samples, what)
	}
	cache, err := stats.Cache(opts.Method, opts.Calib)
	if err != nil {
		return nil, nil, err
	}
	if opts.CalibCache != "" {
		if err := calibrate.WriteCache(opts.CalibCache, cache); err != nil {
			return nil, nil, err
		}
	}
	info.Samples, info.Stopped, info.Tensors, info.Choices = stats.Samples, stats.Stopped, len(tensors), cache.Choices()
	return cache.Ranges(), info, nil
}

// measureLatency measures both models at each of batches on random inputs.
func measureLatency(opts Options, float, int8Model graph.Serialized, batches []int) ([]LatencyRow, error) {
	var rows []LatencyRow
	for _, batch := range batches {
		row := LatencyRow{Batch: batch}
		for i, m := range []graph.Serialized{float, int8Model} {
			r, err := bench.Run(bench.Options{Model: [2]string{"float", "int8"}[i], InMemory: m, Data: "random",
				DataOpts: data.Options{High: 1, Spec: opts.Inputs}, Batches: []int{batch},
				Session: opts.Session, Duration: time.Second, ORTLib: opts.ORTLib})
			if err != nil {
				return nil, fmt.Errorf("measuring latency: %w", err)
			}
			b := r.Batches[0]
			if i == 0 {
				row.FloatP50, row.FloatPerSecond = b.Latency.P50, b.Throughput
			} else {
				row.Int8P50, row.Int8PerSecond = b.Latency.P50, b.Throughput
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// checkFloat runs the input model and the float model quantization starts
// from (after the passes and any opset upgrade) on a few samples: every
// rewrite is checked before the INT8 numbers build on it.
func checkFloat(opts Options, float graph.Serialized) error {
	spec, dopts := opts.CalibData, opts.CalibOpts
	if spec == "" && opts.EvalData != "" && opts.EvalData != "random" {
		// Dynamic INT8 without calibration data: its evaluation data.
		spec, dopts = opts.EvalData, opts.EvalOpts
	}
	if spec == "" {
		spec, dopts = "random", data.Options{High: 1, Spec: opts.Inputs}
	}
	dopts.Samples = 8
	sess := ort.DefaultOptions()
	sess.Level = ort.LevelDisable
	r, err := compare.Models(compare.Options{
		ModelA: opts.Input, ModelB: "optimized", BInMemory: float, Data: spec, DataOpts: dopts,
		Atol: map[string]float64{"": 1e-4}, Rtol: map[string]float64{"": 1e-3}, Session: sess, ORTLib: opts.ORTLib,
	})
	if err != nil {
		return fmt.Errorf("checking the float model: %w", err)
	}
	for _, s := range r.Outputs {
		if s.Mismatch > 0 {
			return fmt.Errorf("the float model after the passes differs from %s on output %q: %s: a bug in optc", opts.Input, s.Name, s.Failure())
		}
		if !s.Pass && s.Value > 1e-4*max(1, s.MaxRef) {
			return fmt.Errorf("the float model after the passes differs from %s on output %q (max abs error %.3g): a bug in optc", opts.Input, s.Name, s.MaxAbs)
		}
	}
	return nil
}

// otherRuntime reports whether opts' scheme is for a runtime other than
// ONNX Runtime (quantize.Scheme.OtherRuntime): ORT only simulates its
// model, so placement, which times candidates in ORT, does not apply and
// quality is measured with the Q/DQ pairs run as float arithmetic.
func otherRuntime(opts Options) bool {
	sc, err := quantize.SchemeFor(opts.Quant.Target)
	return err == nil && sc.OtherRuntime
}
