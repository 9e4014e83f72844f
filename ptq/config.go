package ptq

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/quantize"
)

// The build config's INT8 scheme and guard keys of quantize are ptq's:
// their defaults and rules live here, beside the stage that applies them
// (the Q/DQ inserter, package quantize, holds the lists they name).
func init() {
	config.Register(config.Owner{Name: "ptq", Section: "quantize", Defaults: configDefaults, Rules: configRules})
}

func configDefaults(c *config.Config) {
	q := &c.Quantize
	q.ReduceRange, q.Format, q.PerChannel = "auto", string(quantize.FormatQDQ), true
}

func configRules(c config.Config) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	q := c.Quantize
	if _, err := quantize.ParseTechniques(q.Techniques); err != nil {
		add("quantize.techniques: %v", err)
	}
	if q.SmoothAlpha < 0 || q.SmoothAlpha > 1 {
		add("quantize.smoothquant_alpha: %g (want a value in [0, 1])", q.SmoothAlpha)
	}
	if _, err := quantize.ParseReduceRange(q.ReduceRange); err != nil {
		add("quantize.reduce_range: %v", err)
	}
	if !slices.Contains(quantize.Formats, quantize.Format(q.Format)) {
		add("quantize.format: %q (want %s)", q.Format, choice.Or(quantize.Formats))
	}
	for _, e := range q.Exclude {
		if _, err := regexp.Compile(e); err != nil {
			add("quantize.exclude: %q: %v", e, err)
		}
	}
	if q.MaxAccuracyDrop < 0 {
		add("quantize.max_accuracy_drop: %g must not be negative", q.MaxAccuracyDrop)
	}
	if q.MaxRelError < 0 {
		add("quantize.max_rel_error: %g must not be negative", q.MaxRelError)
	}
	if q.NoGuard && q.AllowAccuracyLoss {
		add("quantize.no_guard and quantize.allow_accuracy_loss: give one (with the guard off nothing is refused)")
	}
	if q.MinCosine < 0 || q.MinCosine > 1 {
		add("quantize.min_cosine: %g (want 0 to 1)", q.MinCosine)
	}
	if q.MaxPerplexityIncrease < 0 {
		add("quantize.max_perplexity_increase: %g must not be negative", q.MaxPerplexityIncrease)
	}
	// An accuracy drop is measured against labels.
	if q.MaxAccuracyDrop > 0 && c.Eval.Labels == "" {
		add("quantize.max_accuracy_drop needs eval.labels (use quantize.min_cosine without labels)")
	}
	return bad
}
