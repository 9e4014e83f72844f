package cmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"optc/calibrate"
	"optc/ptq"
	"optc/quantize"
	"optc/report"
)

// QuantizeOptions are the inputs of `optc quantize`.
type QuantizeOptions struct {
	IO   *IO
	PTQ  ptq.Options
	JSON bool
	// Report, when set, is a folder to write report.json/.md/.html into.
	Report string
}

func newCmdQuantize(io *IO, g *globals, runF func(*QuantizeOptions) error) *cobra.Command {
	opts := &QuantizeOptions{IO: io}
	o := &opts.PTQ
	var sf sessionFlags
	var calib, eval dataFlags
	var method, target, reduceRange, format string
	var perTensor bool
	c := &cobra.Command{
		Use:   "quantize IN -o OUT --calib-data PATH",
		Short: "Quantize a model to INT8 (QDQ) from calibration data and measure it against float",
		Long: `Post-training INT8 quantization: run the -O2 passes (BatchNormalization is
folded first), collect activation ranges in ONNX Runtime over --calib-data
(streamed, constant memory; or read them from --calib-cache), insert
QuantizeLinear/DequantizeLinear for the target, and measure the result
against the float model: accuracy and top-1 agreement on --eval-data
(--eval-labels for accuracy), and latency at batch 1 and 8 at the ORT level
the artifact runs at (--level, default all).

Targets: ort-cpu (uint8 asymmetric activations, int8 per-channel weights,
int32 bias; 7-bit weights on x86 CPUs without VNNI unless --reduce-range off)
and tensorrt (int8 symmetric, zero points 0, Q/DQ only on weighted-op inputs
and residual Adds, float bias).

Formats (--format): qdq (default) keeps Q/DQ around float ops for the
runtime to fuse; qoperator (ort-cpu) writes QLinearConv and QLinearMatMul
where that computes exactly what the Q/DQ group does, and lists the groups
left in QDQ form with the reason.`,
		Args: exactArgs(1, "one input model"),
		RunE: func(_ *cobra.Command, args []string) error {
			var err error
			o.Input, o.ORTLib = args[0], g.ortLib
			if o.Output == "" {
				return usageError{fmt.Errorf("quantize: -o OUT is required")}
			}
			if sameFile(o.Input, o.Output) {
				return fmt.Errorf("quantize: refusing to overwrite the input %s; choose another -o", o.Input)
			}
			if o.Session, err = sf.options(); err != nil {
				return err
			}
			o.Method = calibrate.Method(method)
			if !validMethod(o.Method) {
				return usageError{fmt.Errorf("--method %q: want minmax, percentile, entropy or mse", method)}
			}
			switch target {
			case "ort-cpu", "tensorrt":
				o.Quant.Target = quantize.Target(target)
			default:
				return usageError{fmt.Errorf("--target %q: want ort-cpu or tensorrt", target)}
			}
			switch format {
			case "qdq", "qoperator":
				o.Quant.Format = quantize.Format(format)
			default:
				return usageError{fmt.Errorf("--format %q: want qdq or qoperator", format)}
			}
			switch reduceRange {
			case "auto":
			case "on", "off":
				on := reduceRange == "on"
				o.Quant.ReduceRange = &on
			default:
				return usageError{fmt.Errorf("--reduce-range %q: want auto, on or off", reduceRange)}
			}
			if perTensor {
				off := false
				o.Quant.PerChannel = &off
			}
			if calib.spec != "" {
				if o.CalibOpts, err = calib.options(); err != nil {
					return err
				}
				o.CalibData = calib.spec
				// A subset is drawn at random (seeded), not taken from the
				// front of a file that may be sorted by class.
				o.CalibOpts.Shuffle = calib.samples > 0 && calib.spec != "random"
			}
			if eval.spec != "" {
				eval.seed, eval.rng, eval.image = calib.seed, calib.rng, calib.image
				if eval.spec == "random" {
					eval.shapes = calib.shapes
				}
				if o.EvalOpts, err = eval.options(); err != nil {
					return err
				}
				o.EvalData = eval.spec
			}
			// --shape gives one sample's dims for random data and the
			// latency runs; data files carry their own shapes.
			o.LatencyShapes = o.CalibOpts.Shapes
			if calib.spec != "random" {
				o.CalibOpts.Shapes = nil
			}
			if isTerminal(io.ErrOut) {
				o.Calib.Progress = func(n int64) { fmt.Fprintf(io.ErrOut, "\rcalibrating: %d samples", n) }
			}
			if runF != nil {
				return runF(opts)
			}
			return quantizeRun(opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&o.Output, "output", "o", "", "where to write the INT8 model (required)")
	fs.StringVar(&calib.spec, "calib-data", "", "calibration data: .npy, .npz, .pb folder(s), a folder of PNG/JPEG images (see --image-*), or random (not advised)")
	fs.IntVar(&calib.batch, "calib-batch", 32, "calibration batch size")
	fs.IntVar(&calib.samples, "calib-samples", 0, "calibrate on N samples drawn at random (seeded by --seed) from --calib-data")
	fs.StringVar(&o.CalibCache, "calib-cache", "", "calibration file: reused when it matches the model, else written")
	fs.StringVar(&method, "method", "percentile", "range method: minmax, percentile, entropy or mse")
	fs.Float64Var(&o.Calib.Percentile, "percentile", calibrate.DefaultPercentile, "percentile for --method percentile")
	fs.Float64Var(&o.Calib.MovingAverage, "moving-average", 0, "minmax: blend per-batch ranges with this weight (0: plain min/max)")
	fs.StringVar(&target, "target", "ort-cpu", "numeric scheme: ort-cpu or tensorrt")
	fs.StringVar(&reduceRange, "reduce-range", "auto", "7-bit weights: auto (on for x86 without VNNI), on or off")
	fs.StringVar(&format, "format", "qdq", "qdq (Q/DQ around float ops) or qoperator (QLinearConv/QLinearMatMul; ort-cpu)")
	fs.BoolVar(&perTensor, "per-tensor", false, "one weight scale per tensor instead of per output channel")
	fs.StringArrayVar(&o.Quant.Exclude, "exclude", nil, "keep nodes float: a regexp on node name or op type (repeatable)")
	fs.BoolVar(&o.Quant.KeepFirstLast, "keep-first-last", false, "keep the first and last weighted layers float")
	fs.StringVar(&eval.spec, "eval-data", "", "evaluation data (default: the calibration data, reported as not held out)")
	fs.IntVar(&eval.batch, "eval-batch", 64, "evaluation batch size")
	fs.StringVar(&o.EvalLabels, "eval-labels", "", "a .npy of class ids for --eval-data: accuracy of float and INT8")
	fs.Float64Var(&o.MaxAccuracyDrop, "max-accuracy-drop", 0, "accuracy budget in points (needs --eval-labels): the most sensitive layers fall back to float until it holds")
	fs.Float64Var(&o.MinCosine, "min-cosine", 0, "lowest cosine similarity to float allowed on every output: the most sensitive layers fall back to float until it holds")
	fs.StringArrayVar(&calib.shapes, "shape", nil, "fix an input's dynamic dims: name:d0,d1,... (repeatable)")
	fs.Int64Var(&calib.seed, "seed", 1, "seed for random data")
	fs.StringVar(&calib.rng, "range", "0,1", "value range LO,HI for random data")
	fs.BoolVar(&opts.JSON, "json", false, "print the result as one JSON object")
	fs.StringVar(&opts.Report, "report", "", "also write report.json, report.md and report.html into this folder (docs/report.md)")
	calib.image.register(fs) // for --calib-data and --eval-data alike
	sf.register(fs)
	return c
}

func validMethod(m calibrate.Method) bool {
	for _, x := range calibrate.Methods {
		if x == m {
			return true
		}
	}
	return false
}

func quantizeRun(opts *QuantizeOptions) error {
	res, err := ptq.Run(opts.PTQ)
	if opts.PTQ.Calib.Progress != nil {
		fmt.Fprintf(opts.IO.ErrOut, "\r%30s\r", "")
	}
	if err != nil {
		return err
	}
	if err := writeReport(opts.Report, func() (*report.Report, error) {
		return report.FromQuantize(res, opts.PTQ.Session.Level.String(), opts.PTQ.Session.IntraOpThreads)
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
	fmt.Fprintf(out, "calibration  %s, %d tensors, %s\n", cal.Method, cal.Tensors, source)
	fmt.Fprintf(out, "target       %s, reduce-range %v (%s), per-channel weights %v\n", q.Target, q.ReduceRange, q.ReduceRangeReason, q.PerChannel)
	fmt.Fprintf(out, "quantized    %d nodes (%d Q/DQ pairs, %d weights, %d int32 biases); %d left float\n",
		len(q.Quantized), q.QDQPairs, q.Weights, q.Biases, len(q.Skipped))
	for _, s := range q.Skipped {
		fmt.Fprintf(out, "  float: %s: %s\n", s.Node, s.Detail)
	}
	if qop := q.QOperator; qop != nil {
		fmt.Fprintf(out, "qoperator    %d QLinearConv, %d QLinearMatMul; left in QDQ form: %d\n", qop.QLinearConv, qop.QLinearMatMul, len(qop.KeptQDQ))
		for _, k := range qop.KeptQDQ {
			fmt.Fprintf(out, "  qdq: %s: %s\n", k.Node, k.Detail)
		}
	}
	if len(r.Sensitivity) > 0 {
		fmt.Fprintf(out, "sensitivity (each layer quantized alone):\n")
		for _, s := range r.Sensitivity {
			fmt.Fprintf(out, "  %s: drop %.2f points, min cosine %.5f\n", s.Node, s.DropPoints, s.MinCosine)
		}
		fmt.Fprintf(out, "fell back to float to meet the accuracy criterion: %s\n", strings.Join(r.FellBack, ", "))
	}
	if len(r.TensorSQNR) > 0 {
		fmt.Fprintf(out, "per-tensor SQNR, worst first (of %d):", len(r.TensorSQNR))
		for _, s := range r.TensorSQNR[:min(5, len(r.TensorSQNR))] {
			fmt.Fprintf(out, " %s %.1f dB;", s.Tensor, s.SQNRdB)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\tfloat\tint8\t\n")
	fmt.Fprintf(w, "bytes\t%s\t%s\t\n", thousands(r.FloatBytes), thousands(r.Int8Bytes))
	if a := r.Accuracy; a != nil {
		if acc := a.Accuracy; acc != nil {
			fmt.Fprintf(w, "accuracy\t%.2f%%\t%.2f%%\t(drop %.2f points)\n", acc.A, acc.B, acc.DropPoints)
		}
		for _, s := range a.Outputs {
			agree := ""
			if s.Classifier {
				agree = fmt.Sprintf(", top-1 agreement %.2f%%", 100*s.Top1Agree)
			}
			fmt.Fprintf(w, "%s\t\t\tcosine %.5f, max abs error %.3g%s\n", s.Name, s.Cosine, s.MaxAbs, agree)
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
	if r.Accuracy != nil && !r.HeldOut {
		fmt.Fprintf(out, "\nmeasured on the calibration data, which is not held out: give --eval-data for an honest figure\n")
	}
}
