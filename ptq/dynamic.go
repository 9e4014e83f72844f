package ptq

import (
	"fmt"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// runDynamic is Run for dynamic INT8: the rewrite needs no ranges, so
// there is no calibration and no accuracy control by sensitivity; the
// result is measured against float and held to the guard (every output's
// cosine, or the accuracy drop with labels). Any data given was used by
// nothing else, so it is held out: the evaluation data, else the
// calibration data, else random inputs shaped by opts.Inputs.
func runDynamic(opts Options, float graph.Serialized, res *Result, batches []int) (*Result, error) {
	q, err := float.Parse()
	if err != nil {
		return nil, err
	}
	rep, err := quantize.ApplyDynamic(q, opts.Quant)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	res.Quantize = rep
	res.Calibration = CalibrationInfo{Method: schema.DynamicMethod}
	if len(rep.Quantized) == 0 {
		return nil, fmt.Errorf("%s: no MatMul or Gemm with a constant float weight to quantize dynamically", opts.Input)
	}
	if err := q.Verify(); err != nil {
		return nil, fmt.Errorf("dynamic INT8 model is invalid (a bug in optc): %w", err)
	}
	int8Model, err := graph.MarshalReferencing(q)
	if err != nil {
		return nil, err
	}
	eval, evalOpts := opts.EvalData, opts.EvalOpts
	if eval == "" {
		eval, evalOpts = opts.CalibData, opts.CalibOpts
	}
	if eval == "" {
		eval, evalOpts = "random", data.Options{Spec: opts.Inputs, Samples: 2 * minHoldOut, Seed: 1, Normal: true}
		opts.EvalData = eval // the guard's random-input rules apply
	}
	res.HeldOut = true
	quality := qualitySession(opts)
	res.QualityLevel = quality.Level.String()
	if res.Accuracy, err = compare.Models(compare.Options{
		ModelA: "float", ModelB: "int8", AInMemory: float, BInMemory: int8Model,
		Data: eval, DataOpts: evalOpts, Labels: opts.EvalLabels, Scorer: opts.EvalTask,
		Atol: map[string]float64{"": 1e9}, Session: quality, ORTLib: opts.ORTLib,
	}); err != nil {
		return nil, fmt.Errorf("evaluating the dynamic INT8 model: %w", err)
	}
	g := &schema.Guard{Data: eval, HeldOut: true, Checks: opts.checks(res.Accuracy)}
	res.Guard = g
	g.Pass = passed(g.Checks)
	if opts.NoGuard {
		g.Off, g.Pass = true, true
	}
	if !g.Pass {
		if !opts.AllowAccuracyLoss {
			return res, &GuardError{Guard: g, Dynamic: true}
		}
		g.Allowed = true
	}
	res.FloatBytes, res.Int8Bytes = int64(len(float.Bytes)), int64(len(int8Model.Bytes))
	if err := finish(opts, q, float, int8Model, batches, res); err != nil {
		return nil, err
	}
	res.Caveats.RandomCalibration = false // nothing was calibrated
	return res, nil
}
