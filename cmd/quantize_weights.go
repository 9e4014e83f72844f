package cmd

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/weightonly"
)

// weightsFlagKeys are the build config keys optc quantize --weights's
// flags set.
var weightsFlagKeys = map[string]string{
	"weights": "quantize.weights", "block-size": "quantize.block_size", "weight-rounding": "quantize.weight_rounding",
	"calib-data": "calibration.data",
}

// weightOnlyOptions turns the flags of `optc quantize --weights` into the
// options of weightonly.Run: calibration data (needed by gptq, optional
// for rtn) and evaluation data as for INT8.
func weightOnlyOptions(weights, rounding string, blockSize int, calib, eval *dataFlags, o *ptq.Options, g *globals) (*weightonly.RunOptions, error) {
	// The build config's weight-only rules, on the same struct: one home
	// for each (weightonly/config.go).
	qc := config.Default()
	qc.Quantize.Weights, qc.Quantize.BlockSize, qc.Quantize.WeightRounding, qc.Calibration.Data = weights, blockSize, rounding, calib.spec
	if err := qc.ValidateSections(true, "quantize"); err != nil {
		return nil, usageError{errors.New(byFlagKeys(weightsFlagKeys, err))}
	}
	typ, r := weightonly.Type(weights), weightonly.Rounding(rounding)
	w := &weightonly.RunOptions{Input: o.Input, Output: o.Output, Session: o.Session, ORTLib: g.ortLib,
		Weights: weightonly.Options{Type: typ, BlockSize: blockSize, Rounding: r, Exclude: o.Quant.Exclude}}
	if calib.spec != "" {
		d := &prune.Data{Spec: calib.spec, ORTLib: g.ortLib, Session: o.Session}
		var err error
		if d.Opts, err = calib.options(); err != nil {
			return nil, err
		}
		if calib.spec != "random" {
			d.Opts.Shapes = nil // data files carry their own shapes
		}
		d.Opts.Shuffle = calib.samples > 0 && calib.spec != "random"
		w.Weights.Data = d
	}
	if eval.spec == "" && calib.spec == "" {
		// RTN needs no data, but the result is still run against float:
		// on random inputs (--shape, --range, --value shape them).
		eval.spec = "random"
	}
	if eval.spec != "" {
		shapes := eval.shapes
		eval.inherit(calib)
		eval.image = calib.image
		if eval.spec != "random" {
			eval.shapes = shapes
		}
		var err error
		if w.EvalOpts, err = eval.options(); err != nil {
			return nil, err
		}
		w.EvalData = eval.spec
	}
	return w, nil
}

// int8OnlyFlags are quantize's flags that mean nothing to --weights.
var int8OnlyFlags = []string{"method", "percentile", "moving-average", "calib-cache", "target", "reduce-range", "format",
	"per-tensor", "keep-first-last", "eval-labels", "eval-task", "eval-dict", "eval-output", "eval-param", "max-accuracy-drop", "min-cosine", "allow-accuracy-loss", "report", "ort-contrib",
	"technique", "smoothquant-alpha", "budget"}

// staticOnlyFlags are quantize's flags that mean nothing to --dynamic
// (no calibration, no QOperator form, no sensitivity fallback).
var staticOnlyFlags = []string{"method", "percentile", "moving-average", "calib-cache", "format", "keep-first-last",
	"block-size", "weight-rounding", "technique", "smoothquant-alpha", "budget"}

// staticOnly names the first static-only flag given, or "".
func staticOnly(fs *pflag.FlagSet) string {
	for _, name := range staticOnlyFlags {
		if fs.Changed(name) {
			return name
		}
	}
	return ""
}

// int8Only names the first INT8-only flag given, or "".
func int8Only(fs *pflag.FlagSet) string {
	for _, name := range int8OnlyFlags {
		if fs.Changed(name) {
			return name
		}
	}
	return ""
}

func weightsRun(opts *QuantizeOptions) error {
	if err := checkOutputs([]string{opts.Weights.Output}, nil); err != nil {
		return err
	}
	res, err := weightonly.Run(*opts.Weights)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.IO.Out, res)
	}
	printWeights(opts.IO.Out, res)
	return nil
}

func printWeights(out io.Writer, r *weightonly.Result) {
	w := r.Weights
	zp := "a zero point per block"
	if w.Symmetric {
		zp = "symmetric"
	}
	fmt.Fprintf(out, "weights      %s, block %d, %s, rounding %s (MatMulNBits", w.Type, w.BlockSize, zp, w.Rounding)
	if w.Type == weightonly.Int3 {
		fmt.Fprint(out, "; 3-bit codes in the 4-bit container")
	}
	fmt.Fprintln(out, ")")
	fmt.Fprintf(out, "quantized    %d layers; %d left float\n", w.Quantized, len(w.Layers)-w.Quantized)
	for _, l := range w.Layers {
		if l.Skipped != "" {
			fmt.Fprintf(out, "  float: %s: %s\n", l.Node, l.Skipped)
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\tfloat\t%s\t\n", w.Type)
	fmt.Fprintf(tw, "weight bytes\t%s\t%s\t(%.2fx, the quantized layers)\n", thousands(w.BytesBefore), thousands(w.BytesAfter), float64(w.BytesAfter)/float64(max(w.BytesBefore, 1)))
	fmt.Fprintf(tw, "file bytes\t%s\t%s\t\n", thousands(r.FloatBytes), thousands(r.OutputBytes))
	tw.Flush()
	if c := r.Compare; c != nil {
		where := "held-out --eval-data"
		switch {
		case c.Data == "random":
			where = "random inputs (give --eval-data for a real figure)"
		case !r.HeldOut:
			where = "the calibration data (not held out)"
		}
		fmt.Fprintf(out, "\nagainst float on %d samples of %s:\n", c.Samples, where)
		for _, s := range c.Outputs {
			agree := ""
			if s.Classifier {
				agree = fmt.Sprintf(", top-1 agreement %.2f%%", 100*s.Top1Agree)
			}
			fmt.Fprintf(out, "  %s: cosine %s, max abs error %.4g%s\n", s.Name, s.Cosine.Text("%.5f"), s.MaxAbs, agree)
		}
	}
	fmt.Fprintf(out, "wrote %s\n", r.Output)
}
