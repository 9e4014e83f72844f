package build

import (
	"cmp"
	"fmt"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/weightonly"
)

// weights makes the ORT (and Triton) artifact weight-only: the optimized
// float model's MatMul/Gemm weights become MatMulNBits codes
// (quantize.weights), measured against float by weightonly.Run and, like
// every artifact, checked and timed against the input in the verify
// stage. It takes the place of the ort INT8 model.
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
		Task: compare.Task(c.Eval.Task), Logits: c.Eval.Logits,
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
	b.add(rel, string(PlacedScheme), "model", string(typ), "")
	return b.perplexityGuard(rel)
}

// perplexityGuard is the language-model guard (eval.task lm): a
// weight-only model whose held-out perplexity rises more than
// quantize.max_perplexity_increase over float's fails the build, or with
// allow_accuracy_loss is kept but not deployed (the ORT and Triton
// artifacts are then FP32). A NaN perplexity always misses.
func (b *builder) perplexityGuard(rel string) error {
	r := b.res.Weights.Compare
	if r == nil || r.LM == nil {
		return nil
	}
	limit := cmp.Or(b.c.Quantize.MaxPerplexityIncrease, config.DefaultMaxPerplexityIncrease)
	lm := r.LM
	b.res.WeightsGuard = &report.PerplexityGuard{MaxIncreasePercent: limit, IncreasePercent: lm.IncreasePercent, Data: r.Data}
	if inc := float64(lm.IncreasePercent); inc <= limit {
		b.res.WeightsGuard.Pass = true
		return nil
	}
	why := fmt.Sprintf("perplexity %.4g, %+.2f%% over float's %.4g on %s (%d tokens), over the %g%% allowed (quantize.max_perplexity_increase)",
		float64(lm.PerplexityB), float64(lm.IncreasePercent), float64(lm.PerplexityA), r.Data, lm.Tokens, limit)
	if !b.c.Quantize.AllowAccuracyLoss {
		return fmt.Errorf("perplexity guard failed: %s: %s; try --weight-rounding gptq, a smaller --block-size or int4; --allow-accuracy-loss keeps it (not recommended)", rel, why)
	}
	b.res.WeightsGuard.Allowed = true
	b.ortModel = b.float
	b.note(fmt.Sprintf("ort: %s misses the perplexity guard (%s); kept because of allow_accuracy_loss, not recommended: the ORT and Triton artifacts are FP32", rel, why))
	return nil
}
