package build

import (
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/weightonly"
)

// weights makes the ORT (and Triton) artifact weight-only: the optimized
// float model's MatMul/Gemm weights become MatMulNBits codes
// (quantize.weights), measured against float by weightonly.Run and, like
// every artifact, checked and timed against the input in the verify
// stage. It takes the place of the ort-cpu INT8 model.
func (b *builder) weights() error {
	c := b.c
	typ := weightonly.Type(c.Quantize.Weights)
	rel := "model." + string(typ) + ".onnx"
	out, err := b.dir.path(rel)
	if err != nil {
		return err
	}
	o := weightonly.RunOptions{
		Input: b.float, Output: out, Session: b.session(), ORTLib: c.Runtime.ORTLib,
		Weights: weightonly.Options{Type: typ, BlockSize: c.Quantize.BlockSize,
			Rounding: weightonly.Rounding(c.Quantize.WeightRounding), Exclude: c.Quantize.Exclude},
		EvalData: b.eval.spec, EvalOpts: b.eval.opts,
	}
	if c.Calibration.Data != "" {
		d := &prune.Data{Spec: c.Calibration.Data, ORTLib: c.Runtime.ORTLib, Session: b.session(),
			Opts: b.dataOptions(c.Calibration.Data, c.Calibration.Batch, c.Calibration.Samples)}
		d.Opts.Shuffle = c.Calibration.Samples > 0
		o.Weights.Data = d
	}
	if !b.res.EvalHeldOut {
		o.EvalData = "" // measured on the calibration data, and said so
	}
	if b.res.Weights, err = weightonly.Run(o); err != nil {
		return err
	}
	b.ortModel, b.ortPrecision = out, string(typ)
	b.add(rel, "ort", "model", string(typ), "")
	return nil
}
