package cmd

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task/tasks"
	"github.com/optc-dev/optc/weightonly"
)

// QuantizeOptions are the inputs of `optc quantize`.
type QuantizeOptions struct {
	IO   *IO
	PTQ  ptq.Options
	JSON bool
	// Report, when set, is a folder to write report.json/.md/.html into.
	Report string
	// Weights, when set (--weights), replaces INT8 quantization by
	// weight-only int4/int3 MatMulNBits (package weightonly).
	Weights *weightonly.RunOptions
	// Budget, when set (--budget), bounds calibration, the accuracy
	// control and the per-tensor SQNR from the run's start
	// (ptq.Options.WithinBudget).
	Budget time.Duration
}

// quantizeVars are optc quantize's flags that are not options
// themselves: names to parse, and switches between kinds of quantization.
type quantizeVars struct {
	sf                                  sessionFlags
	calib, eval                         dataFlags
	method, target, reduceRange, format string
	perTensor, quiet, dynamic           bool
	weights, rounding                   string
	blockSize                           int
	techniques                          []string
	evalTask                            config.Eval // the ground truth's file and task
}

const quantizeLong = `Post-training INT8 quantization: run the -O2 passes (BatchNormalization is
folded first), collect activation ranges in ONNX Runtime over --calib-data
(streamed, constant memory; or read them from --calib-cache), insert
QuantizeLinear/DequantizeLinear for the target, and measure the result
against the float model: accuracy and top-1 agreement on --eval-data
(--eval-labels for accuracy), and latency at batch 1 and 8 at the ORT level
the artifact runs at (--level, default all).

Targets: ort (uint8 asymmetric activations, int8 per-channel weights,
int32 bias; 7-bit weights on x86 CPUs without VNNI unless --reduce-range off)
and tensorrt (int8 symmetric, zero points 0, Q/DQ only on weighted-op inputs
and residual Adds, float bias).

Formats (--format): qdq (default) keeps Q/DQ around float ops for the
runtime to fuse; qoperator (ort) writes QLinearConv and QLinearMatMul
where that computes exactly what the Q/DQ group does, and lists the groups
left in QDQ form with the reason.

Weight-only (--weights int4|int3): instead of INT8, the constant weights of
MatMul and Gemm layers become blockwise 4- or 3-bit codes (--block-size, a
zero point per block) in ONNX Runtime's com.microsoft MatMulNBits;
activations stay float. --weight-rounding rtn (round to nearest, no data
needed) or gptq (error compensation from the layers' inputs on
--calib-data). int3 is stored in the 4-bit container (ORT has no 3-bit
kernel). The result is compared with float on --eval-data (default the
calibration data). See docs/transformers.md.

Dynamic INT8 (--dynamic, ort): the constant weights of MatMul and Gemm
layers become int8 (per column, or --per-tensor; 7-bit where
--reduce-range applies) and each layer's activation is quantized at run
time by DynamicQuantizeLinear, then MatMulInteger, in standard ONNX that
ORT fuses at level extended and above (--ort-contrib writes the fused
com.microsoft DynamicQuantizeMatMul itself). Nothing is calibrated: the
result is checked against float on --eval-data, else --calib-data, else
random inputs, with the accuracy guard on every output (cosine >= 0.99
without labels). See docs/quantize.md.`

func newCmdQuantize(io *IO, g *globals, runF func(*QuantizeOptions) error) *cobra.Command {
	opts := &QuantizeOptions{IO: io}
	o := &opts.PTQ
	v := &quantizeVars{calib: dataFlags{judges: true}, eval: dataFlags{judges: true}}
	c := &cobra.Command{
		Use:   "quantize IN -o OUT --calib-data PATH",
		Short: "Quantize a model to INT8 (QDQ) from calibration data and measure it against float",
		Long:  quantizeLong,
		Args:  exactArgs(1, "one input model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			o.Input, o.ORTLib = args[0], g.ortLib
			if t, former := quantize.CurrentName(quantize.Target(v.target)); former {
				fmt.Fprintf(io.ErrOut, "optc: --target %s is deprecated: the target is now spelled %s, as in optc build\n", v.target, t)
				v.target = string(t)
			}
			if o.Output == "" {
				return usageError{fmt.Errorf("quantize: -o OUT is required")}
			}
			if data.SameFile(o.Input, o.Output) {
				return fmt.Errorf("quantize: refusing to overwrite the input %s; choose another -o", o.Input)
			}
			if o.Session, err = v.sf.options(); err != nil {
				return err
			}
			if v.weights != "" && v.dynamic {
				return usageError{fmt.Errorf("--weights and --dynamic are two kinds of quantization: give one")}
			}
			if !v.dynamic && cmd.Flags().Changed("ort-contrib") {
				return usageError{fmt.Errorf("--ort-contrib is for --dynamic")}
			}
			if v.dynamic {
				if f := staticOnly(cmd.Flags()); f != "" {
					return usageError{fmt.Errorf("--%s is for static INT8, not --dynamic", f)}
				}
				if v.target != string(quantize.TargetORT) {
					return usageError{fmt.Errorf("--dynamic is for --target %s (ONNX Runtime's CPU kernels), not %q", quantize.TargetORT, v.target)}
				}
				o.Dynamic = true
			}
			if v.weights != "" {
				if f := int8Only(cmd.Flags()); f != "" {
					return usageError{fmt.Errorf("--%s is for INT8 quantization, not --weights", f)}
				}
				w, err := weightOnlyOptions(v.weights, v.rounding, v.blockSize, &v.calib, &v.eval, o, g)
				if err != nil {
					return err
				}
				opts.Weights = w
				return runOrHook(runF, weightsRun, opts)
			}
			// The rules of the build config's calibration and quantize
			// sections, on the same structs: one home for each.
			qc := config.Default()
			qc.Calibration.Method, qc.Calibration.Percentile, qc.Calibration.MovingAverage = v.method, o.Calib.Percentile, o.Calib.MovingAverage
			qc.Quantize.Techniques, qc.Quantize.SmoothAlpha, qc.Quantize.ReduceRange = v.techniques, o.SmoothAlpha, v.reduceRange
			qc.Quantize.Format, qc.Quantize.Exclude = v.format, o.Quant.Exclude
			qc.Quantize.MaxAccuracyDrop, qc.Quantize.MinCosine, qc.Quantize.MaxRelError = o.MaxAccuracyDrop, o.MinCosine, o.MaxRelError
			qc.Quantize.NoGuard, qc.Quantize.AllowAccuracyLoss = o.NoGuard, o.AllowAccuracyLoss
			qc.Eval = v.evalTask
			if err := qc.ValidateQuantization(); err != nil {
				return usageError{fmt.Errorf("quantize: %s", byFlags(cmd.Flags(), err))}
			}
			if !slices.Contains(quantize.Targets(), quantize.Target(v.target)) {
				return usageError{fmt.Errorf("--target %q: want %s", v.target, choice.Or(quantize.Targets()))}
			}
			// Validated above.
			o.Method = calibrate.Method(v.method)
			o.Techniques, _ = quantize.ParseTechniques(v.techniques)
			o.Quant.ReduceRange, _ = quantize.ParseReduceRange(v.reduceRange)
			o.Quant.Target, o.Quant.Format = quantize.Target(v.target), quantize.Format(v.format)
			if err := quantizeTask(o, v.evalTask); err != nil {
				return err
			}
			if opts.Budget < 0 {
				return usageError{fmt.Errorf("--budget: %v (want a positive duration, or 0 for none)", opts.Budget)}
			}
			if v.calib.spec == "" && o.CalibCache == "" && !v.dynamic {
				return usageError{fmt.Errorf("quantize: --calib-data is required (or a --calib-cache made for this model)")}
			}
			if v.perTensor {
				off := false
				o.Quant.PerChannel = &off
			}
			if err := v.dataOptions(o); err != nil {
				return err
			}
			if io.Progress != nil && !v.quiet {
				// Lines, as build prints them: on a terminal and in a CI
				// log alike, at least every ptq.ProgressEvery while
				// calibrating, and as each later step starts.
				say := func(format string, args ...any) { fmt.Fprintf(io.Progress, "quantize: "+format+"\n", args...) }
				o.Progress = say
				o.Calib.Progress = ptq.CalibrationProgress(int64(v.calib.samples), say, nil)
			}
			return runOrHook(runF, quantizeRun, opts)
		},
	}
	v.register(c.Flags(), opts)
	return c
}

// dataOptions sets the calibration and evaluation data of o from the data
// flags; the evaluation data inherits what the calibration flags say of
// the inputs.
func (v *quantizeVars) dataOptions(o *ptq.Options) error {
	var err error
	if v.calib.spec != "" {
		if o.CalibOpts, err = v.calib.options(); err != nil {
			return err
		}
		o.CalibData = v.calib.spec
		// A subset is drawn at random (seeded), not taken from the
		// front of a file that may be sorted by class.
		o.CalibOpts.Shuffle = v.calib.samples > 0 && v.calib.spec != "random"
	}
	if v.dynamic && v.calib.spec == "" && v.eval.spec == "" {
		// Nothing to calibrate, but the result is still run
		// against float: on random inputs (--shape, --range,
		// --value shape them).
		v.eval.spec = "random"
	}
	if v.eval.spec != "" {
		shapes := v.eval.shapes
		v.eval.inherit(&v.calib)
		v.eval.image = v.calib.image
		if v.eval.spec != "random" {
			v.eval.shapes = shapes
		}
		if o.EvalOpts, err = v.eval.options(); err != nil {
			return err
		}
		o.EvalData = v.eval.spec
	}
	// --shape gives one sample's dims for random data and the
	// latency runs; data files carry their own shapes.
	o.Inputs = o.CalibOpts.Spec
	if v.calib.spec == "" {
		// --dynamic without calibration data: --shape and the
		// rest still shape the latency runs' random inputs.
		if o.Inputs, _, _, err = v.calib.inputSpec(); err != nil {
			return err
		}
	}
	if v.calib.spec != "random" {
		o.CalibOpts.Shapes = nil
	}
	return nil
}

// register defines optc quantize's flags, writing into v and opts.
func (v *quantizeVars) register(fs *pflag.FlagSet, opts *QuantizeOptions) {
	o := &opts.PTQ
	fs.StringVarP(&o.Output, "output", "o", "", "where to write the INT8 model (required)")
	fs.StringVar(&v.calib.spec, "calib-data", "", "calibration data: .npy, .npz, .pb folder(s), a folder of PNG/JPEG images (see --image-*), or random (not advised)")
	// The batch sizes are build's (config.Default), one home for both: a
	// batch of 64 U-Net activations at 128x128 held 2.2 GB in the check.
	defaults := config.Default()
	v.calib.batchVar(fs, "calib-batch", defaults.Calibration.Batch, "calibration batch size (a model with a static batch runs at that size)")
	fs.BoolVarP(&v.quiet, "quiet", "q", false, "print no progress lines on stderr (errors still are)")
	fs.IntVar(&v.calib.samples, "calib-samples", 0, "calibrate on N samples drawn at random (seeded by --seed) from --calib-data")
	fs.StringVar(&o.CalibCache, "calib-cache", "", "calibration file: reused when it matches the model, else written")
	fs.StringVar(&v.method, "method", string(calibrate.DefaultMethod), "range method: "+calibrate.MethodNames()+" (auto: per tensor, the candidate with the least quantization error)")
	fs.Float64Var(&o.Calib.Percentile, "percentile", calibrate.DefaultPercentile, "percentile for --method percentile")
	fs.StringSliceVar(&v.techniques, "technique", nil, "post-training techniques, comma-separated: "+choice.Or(quantize.Techniques)+" (cle: cross-layer equalization of Conv -> Relu -> Conv pairs, for --per-tensor weights; smoothquant: move MatMul input outliers into the weights before calibrating; gptq: round the int8 weights by GPTQ's error feedback from the layers' inputs on --calib-data instead of to nearest; bias-correction: cancel each INT8 layer's mean error per channel, measured on --calib-data)")
	fs.Float64Var(&o.SmoothAlpha, "smoothquant-alpha", quantize.DefaultSmoothAlpha, "--technique smoothquant: migration strength in [0, 1] (0.5 splits the difficulty evenly between activations and weights)")
	fs.Float64Var(&o.Calib.MovingAverage, "moving-average", 0, "minmax: blend per-batch ranges with this weight (0: plain min/max)")
	fs.StringVar(&v.target, "target", string(quantize.TargetORT), "numeric scheme: "+choice.Or(quantize.Targets()))
	fs.StringVar(&v.reduceRange, "reduce-range", "auto", "7-bit weights: "+choice.Or(quantize.ReduceRangeModes)+" (auto: on for x86 without VNNI)")
	fs.StringVar(&v.format, "format", "qdq", choice.Or(quantize.Formats)+": Q/DQ around float ops, or QLinearConv/QLinearMatMul (ort)")
	fs.BoolVar(&v.perTensor, "per-tensor", false, "one weight scale per tensor instead of per output channel")
	fs.StringArrayVar(&o.Quant.Exclude, "exclude", nil, "keep nodes float: a regexp on node name or op type (repeatable)")
	fs.BoolVar(&o.Quant.KeepFirstLast, "keep-first-last", false, "keep the first and last weighted layers float")
	fs.StringVar(&v.eval.spec, "eval-data", "", "evaluation data (default: the calibration data, reported as not held out)")
	v.eval.batchVar(fs, "eval-batch", defaults.Eval.Batch, "evaluation batch size (a model with a static batch runs at that size)")
	fs.IntVar(&v.eval.samples, "eval-samples", 0, "measure on at most the first N evaluation samples (0: all)")
	evalFlags(fs, &v.evalTask)
	fs.Float64Var(&o.MaxAccuracyDrop, "max-accuracy-drop", 0, "accuracy guard in points (needs --eval-labels; default 1): the most sensitive layers fall back to float until it holds")
	fs.Float64Var(&o.MinCosine, "min-cosine", 0, fmt.Sprintf("accuracy guard: lowest cosine to float of the worst sample, every output (0: %g)", ptq.GuardMinCosine))
	fs.Float64Var(&o.MaxRelError, "max-rel-error", 0, fmt.Sprintf("accuracy guard: largest relative error to float (RMS error over float's RMS deviation from its mean), every output (0: %g)", ptq.GuardMaxRelError))
	fs.BoolVar(&o.NoGuard, "no-guard", false, "turn the accuracy guard off: its figures are reported, the INT8 model is written whatever they say")
	fs.BoolVar(&o.AllowAccuracyLoss, "allow-accuracy-loss", false, "write the INT8 model even when it misses the accuracy guard after the fallback (exit 0)")
	v.calib.registerSpec(fs)
	fs.Int64Var(&v.calib.seed, "seed", 1, "seed for random data")
	fs.StringVar(&v.weights, "weights", "", "weight-only quantization instead of INT8: "+choice.Or(weightonly.Types)+" (MatMulNBits)")
	fs.IntVar(&v.blockSize, "block-size", weightonly.DefaultBlockSize, "--weights: weights per block along K: "+choice.Or(weightonly.BlockSizeNames()))
	fs.StringVar(&v.rounding, "weight-rounding", string(weightonly.RTN), "--weights: "+choice.Or(weightonly.Roundings)+" (gptq needs --calib-data)")
	fs.BoolVar(&v.dynamic, "dynamic", false, "dynamic INT8 instead of static: MatMul/Gemm weights int8, activations quantized at run time (DynamicQuantizeLinear + MatMulInteger; no calibration, --calib-data only measures)")
	fs.BoolVar(&o.Quant.ORTContrib, "ort-contrib", false, "--dynamic: write ONNX Runtime's fused com.microsoft DynamicQuantizeMatMul (ONNX Runtime only)")
	fs.DurationVar(&opts.Budget, "budget", 0, "time budget: calibration stops at 30% of it (at least 16 samples), the guard's first check at half (at least 32), its tries and fallback get half, the per-tensor SQNR is skipped after 75%; where each stopped is in --json's stopped_at (0: none)")
	fs.BoolVar(&opts.JSON, "json", false, "print the result as one JSON object")
	fs.StringVar(&opts.Report, "report", "", "also write report.json, report.md and report.html into this folder (docs/report.md)")
	v.calib.image.register(fs) // for --calib-data and --eval-data alike
	v.sf.register(fs)
}

// byFlags is the build config's problems in the words of the command's
// flags: each key a flag set sets (build's flag names) is named by the
// flag.
func byFlags(set *pflag.FlagSet, err error) string {
	keys := map[string]string{}
	set.VisitAll(func(f *pflag.Flag) {
		if key, ok := buildFlagKeys[f.Name]; ok {
			keys[f.Name] = key
		}
	})
	return byFlagKeys(keys, err)
}

// byFlagKeys is the problems in the words of a command's own flags
// (flag name -> the key it sets).
func byFlagKeys(keys map[string]string, err error) string {
	msg := err.Error()
	flags := slices.Sorted(maps.Keys(keys))
	// Longer keys first: quantize.placement_budget before
	// quantize.placement.
	slices.SortStableFunc(flags, func(a, b string) int { return len(keys[b]) - len(keys[a]) })
	for _, f := range flags {
		if key := keys[f]; mentionsKey(msg, key) {
			msg = strings.ReplaceAll(msg, key, "--"+f)
		}
	}
	return msg
}

func quantizeRun(opts *QuantizeOptions) error {
	// Before minutes of work, not after (build writes into a working
	// folder it made itself).
	files := []string{opts.PTQ.Output}
	if _, err := os.Stat(opts.PTQ.CalibCache); err != nil {
		// A cache that exists may be only read (a shared, read-only one).
		files = append(files, opts.PTQ.CalibCache)
	}
	if err := checkOutputs(files, []string{opts.Report}); err != nil {
		return err
	}
	if opts.Budget > 0 {
		opts.PTQ.WithinBudget(time.Now(), opts.Budget)
	}
	res, err := ptq.Run(opts.PTQ)
	if ptq.IsGuardError(err) && res != nil {
		// What was measured, then the error: nothing was written.
		if opts.JSON {
			if werr := writeJSON(opts.IO.Out, res); werr != nil {
				return werr
			}
		} else {
			printQuantize(opts.IO.Out, res, opts.PTQ.Session.Level.String())
		}
		return err
	}
	if err != nil {
		return err
	}
	if err := writeReport(opts.Report, func() (*report.Report, error) {
		return res.Report(opts.PTQ.Session.Level.String(), opts.PTQ.Session.IntraOpThreads)
	}); err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.IO.Out, res)
	}
	printQuantize(opts.IO.Out, res, opts.PTQ.Session.Level.String())
	return nil
}

func printQuantize(out io.Writer, r *ptq.Result, level string) {
	q := r.Quantize
	cal := r.Calibration
	source := fmt.Sprintf("%d samples", cal.Samples)
	if cal.FromCache {
		source += " (from " + cal.Cache + ")"
	}
	if q.Dynamic {
		fmt.Fprintf(out, "dynamic      int8 weights, activations quantized at run time (nothing calibrated)\n")
	} else {
		fmt.Fprintf(out, "calibration  %s, %d tensors, %s\n", cal.Method, cal.Tensors, source)
	}
	if len(r.ShapesFromData) > 0 {
		fmt.Fprintf(out, "shapes       %s, from the data (--shape sets them)\n", strings.Join(r.ShapesFromData, " "))
	}
	if len(cal.Choices) > 0 {
		var cs []string
		for _, c := range calibrate.AutoCandidates {
			if n := cal.Choices[c.Name]; n > 0 {
				cs = append(cs, fmt.Sprintf("%s %d", c.Name, n))
			}
		}
		fmt.Fprintf(out, "  auto chose: %s\n", strings.Join(cs, ", "))
	}
	fmt.Fprintf(out, "target       %s, reduce-range %v (%s), per-channel weights %v\n", q.Target, q.ReduceRange, q.ReduceRangeReason, q.PerChannel)
	printTechniques(out, r.Techniques)
	if q.Dynamic {
		fmt.Fprintf(out, "quantized    %d nodes (%d int8 weights); %d left float\n", len(q.Quantized), q.Weights, len(q.Skipped))
	} else {
		fmt.Fprintf(out, "quantized    %d nodes (%d Q/DQ pairs, %d weights, %d int32 biases); %d left float\n",
			len(q.Quantized), q.QDQPairs, q.Weights, q.Biases, len(q.Skipped))
	}
	for _, s := range q.Skipped {
		fmt.Fprintf(out, "  float: %s: %s\n", s.Node, s.Detail)
	}
	if qop := q.QOperator; qop != nil {
		fmt.Fprintf(out, "qoperator    %d QLinearConv, %d QLinearMatMul; left in QDQ form: %d\n", qop.QLinearConv, qop.QLinearMatMul, len(qop.KeptQDQ))
		for _, k := range qop.KeptQDQ {
			fmt.Fprintf(out, "  qdq: %s: %s\n", k.Node, k.Detail)
		}
	}
	printFallback(out, r)
	printGuard(out, r.Guard)
	if len(r.TensorSQNR) > 0 {
		fmt.Fprintf(out, "per-tensor SQNR, worst first (of %d):", len(r.TensorSQNR))
		for _, s := range r.TensorSQNR[:min(5, len(r.TensorSQNR))] {
			fmt.Fprintf(out, " %s %s;", s.Tensor, s.SQNRdB.Text("%.1f dB"))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\tfloat\tint8\t\n")
	if r.Int8Bytes > 0 {
		fmt.Fprintf(w, "bytes\t%s\t%s\t\n", thousands(r.FloatBytes), thousands(r.Int8Bytes))
	}
	if a := r.Accuracy; a != nil {
		if acc := a.Accuracy; acc != nil {
			fmt.Fprintf(w, "accuracy\t%.2f%%\t%.2f%%\t(drop %.2f points)\n", acc.A, acc.B, acc.DropPoints)
		}
		if t := a.Task; t != nil {
			fmt.Fprintf(w, "%s\t%.2f%%\t%.2f%%\t(%s %s on %d samples; drop %.2f points)\n", t.Metric, t.A, t.B, t.Task, t.Output, t.Samples, t.DropPoints)
			for _, m := range t.Others {
				fmt.Fprintf(w, "%s\t%.2f\t%.2f\t\n", m.Name, m.A, m.B)
			}
		}
		for _, s := range a.Outputs {
			if a.Task != nil && a.Task.Judges(s.Name) && s.ShapeMismatches > 0 {
				fmt.Fprintf(w, "%s\t\t\tjudged by the %s figure above: float and int8 kept different numbers of values in %d of %d runs (first: %s)\n",
					s.Name, a.Task.Task, s.ShapeMismatches, s.SamplesCompared, s.FirstMismatch)
				continue
			}
			agree := ""
			if s.SampleElements >= compare.SmallOutput {
				agree = fmt.Sprintf(", worst sample's cosine %s and relative error %s", s.MinSampleCosine.Text("%.5f"), s.MaxSampleRelError.Text("%.3g"))
			} else {
				agree = fmt.Sprintf(", relative error %s", s.RelError.Text("%.3g"))
			}
			if s.Top1 != nil && (a.Task == nil || !a.Task.Judges(s.Name)) {
				agree += ", top-1 agreement " + s.Top1.Text()
			}
			if s.Elements != s.Total {
				agree += fmt.Sprintf("; over %s finite pairs (NaN %d/%d, Inf %d/%d float/int8)", s.FinitePairs(), s.NaN.A, s.NaN.B, s.Inf.A, s.Inf.B)
			}
			if s.NewNonFinite > 0 {
				agree += fmt.Sprintf("; NaN/Inf in int8 where float is finite: %d values", s.NewNonFinite)
			}
			fmt.Fprintf(w, "%s\t\t\tcosine %s, max abs error %s%s\n", s.Name, s.Cosine.Text("%.5f"), s.MaxAbs.Text("%.3g"), agree)
		}
	}
	for _, l := range r.Latency {
		fmt.Fprintf(w, "p50 batch %d\t%.3f ms\t%.3f ms\t(int8 speed-up %.2fx)\n", l.Batch, l.FloatP50, l.Int8P50, l.FloatP50/l.Int8P50)
		fmt.Fprintf(w, "samples/s batch %d\t%.0f\t%.0f\t\n", l.Batch, l.FloatPerSecond, l.Int8PerSecond)
	}
	w.Flush()
	if r.Accuracy != nil && r.QualityLevel != "" && r.QualityLevel != level {
		fmt.Fprintf(out, "\naccuracy measured at ORT level %s: the %s model's Q/DQ run as float arithmetic, as its runtime computes, not through ORT's CPU integer kernels\n", r.QualityLevel, r.Quantize.Target)
	}
	if lines := r.Caveats.Lines(); len(lines) > 0 {
		fmt.Fprintln(out)
		for _, l := range lines {
			fmt.Fprintf(out, "warning: %s\n", l)
		}
	}
	if r.Caveats.OnCalibrationData {
		fmt.Fprintf(out, "measured on the calibration data, which is not held out: give --eval-data for an honest figure\n")
	}
}

// printFallback prints what the guard's fallback measured: each layer's
// own error, the sensitivities it ranked by, the layers kept float.
func printFallback(out io.Writer, r *ptq.Result) {
	if len(r.LayerSQNR) > 0 {
		fmt.Fprintf(out, "layer SQNR (each layer's own error; the worst %d are ranked below), worst first (of %d):", len(r.Sensitivity), len(r.LayerSQNR))
		for _, s := range r.LayerSQNR[:min(len(r.Sensitivity), len(r.LayerSQNR))] {
			fmt.Fprintf(out, " %s %s;", s.Node, s.SQNRdB.Text("%.1f dB"))
		}
		fmt.Fprintln(out)
	}
	if len(r.Sensitivity) > 0 {
		fmt.Fprintf(out, "sensitivity (the model with each layer kept float alone, the rest INT8):\n")
		for _, s := range r.Sensitivity {
			fmt.Fprintf(out, "  %s: drop %.2f points, min cosine %s\n", s.Node, s.DropPoints, s.MinCosine.Text("%.5f"))
		}
		if len(r.FellBack) > 0 {
			fmt.Fprintf(out, "fell back to float to meet the accuracy guard: %s\n", strings.Join(r.FellBack, ", "))
		}
	}
}

// printGuard says what the accuracy guard measured and decided.
func printGuard(out io.Writer, g *schema.Guard) {
	if g == nil {
		return
	}
	on := g.On()
	switch {
	case g.Off:
		fmt.Fprintf(out, "accuracy guard: OFF (--no-guard): measured on %s, not enforced\n", on)
	case g.Note != "":
		fmt.Fprintf(out, "accuracy guard: %s\n", g.Note)
		return
	case g.Pass && len(g.First) > 0:
		fmt.Fprintf(out, "accuracy guard: failed at first (%s); passed after the fallback, on %s\n", schema.FailedChecks(g.First), on)
	case g.Pass:
		fmt.Fprintf(out, "accuracy guard: passed on %s\n", on)
	case g.Allowed:
		fmt.Fprintf(out, "accuracy guard: FAILED on %s (%s); written anyway (--allow-accuracy-loss): not recommended\n", on, schema.FailedChecks(g.Checks))
	default:
		fmt.Fprintf(out, "accuracy guard: FAILED on %s (%s)\n", on, schema.FailedChecks(g.Checks))
	}
	for _, c := range g.Checks {
		fmt.Fprintf(out, "  %s\n", c)
	}
	for _, t := range g.Tried {
		verdict := "did not help"
		switch {
		case t.Pass:
			verdict = "passes"
		case t.Kept:
			verdict = "helped, kept"
		}
		fmt.Fprintf(out, "  tried %s: %s", t.Name(), verdict)
		if f := schema.FailedChecks(t.Checks); f != "" {
			fmt.Fprintf(out, " (%s)", f)
		}
		fmt.Fprintln(out)
	}
	if g.Fallback != "" {
		fmt.Fprintf(out, "  fallback: %s\n", g.Fallback)
	}
	if f := schema.FailedChecks(g.FallbackChecks); f != "" {
		fmt.Fprintf(out, "  fallback's last try: %s\n", f)
	}
}

// printTechniques says what the post-training techniques did.
func printTechniques(out io.Writer, t *schema.TechniquesReport) {
	if t == nil {
		return
	}
	if len(t.Equalized) > 0 || slices.Contains(t.Applied, quantize.TechniqueEqualize) {
		worst, after := 1.0, 1.0
		for _, p := range t.Equalized {
			worst, after = max(worst, p.SpreadBefore), max(after, p.SpreadAfter)
		}
		if len(t.Equalized) == 0 {
			fmt.Fprintf(out, "cle          nothing to equalize (no Conv -> Relu, LeakyRelu, PRelu or nothing -> Conv)\n")
		} else {
			fmt.Fprintf(out, "cle          %d conv pairs equalized; the widest spread of a layer's channel weight ranges %.1fx before, %.1fx after\n", len(t.Equalized), worst, after)
		}
	}
	if s := t.SmoothQuant; s != nil {
		if len(s.Groups) == 0 {
			fmt.Fprintf(out, "smoothquant  nothing to smooth (no MatMul/Gemm input made by a LayerNorm or a per-channel Mul/Add it can fold into)\n")
		}
		for _, g := range s.Groups {
			fmt.Fprintf(out, "smoothquant  %s -> %s (alpha %g): largest channel %.1fx the median, %.1fx after\n",
				g.Activation, strings.Join(g.Layers, ", "), s.Alpha, g.OutlierBefore, g.OutlierAfter)
		}
	}
	by := ""
	if t.ByGuard {
		by = " (the accuracy guard's try)"
	}
	if g := t.GPTQ; g != nil {
		left := fmt.Sprintf("%d grouped convolutions", g.Skipped-g.Large)
		if g.Large > 0 {
			left += fmt.Sprintf(" and %d layers of more than %d input features", g.Large, ptq.GuardGPTQMaxDim)
		}
		if g.OutOfTime > 0 {
			left += fmt.Sprintf(" and %d layers the budget left no time for", g.OutOfTime)
		}
		fmt.Fprintf(out, "gptq         %d layers' int8 weights rounded by GPTQ (%s left to nearest): output error on the calibration inputs %.2fx round-to-nearest's%s\n", g.Layers, left, g.ErrorRatio, by)
	}
	if b := t.Bias; b != nil {
		fmt.Fprintf(out, "bias         corrected in %d layers, mean |shift| %.3g%s\n", b.Layers, b.MeanShift, by)
	}
}

// quantizeTask checks the eval task flags as build's config does and gives
// the guard the class labels or the task plug-in that reads them.
func quantizeTask(o *ptq.Options, e config.Eval) error {
	if e.Task == tasks.LM {
		return usageError{fmt.Errorf("--eval-task lm scores a weight-only language model: optc build --weights int4 --eval-task lm")}
	}
	if ps := tasks.Validate(tasks.Spec(e)); len(ps) > 0 {
		return usageError{errors.New(tasks.FlagNames(ps[0]))}
	}
	o.EvalLabels, o.EvalTask = tasks.Scoring(tasks.Spec(e))
	return nil
}
