package weightonly

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
)

// The build config's weight-only keys of quantize are weightonly's: their
// defaults and rules live here, beside the types and roundings they name.
func init() {
	config.Register(config.Owner{Name: "weightonly", Section: "quantize", Defaults: configDefaults, Rules: configRules, Joins: configJoins})
}

func configDefaults(c *config.Config) {
	c.Quantize.BlockSize, c.Quantize.WeightRounding = DefaultBlockSize, string(RTN)
}

func configRules(c config.Config) []string {
	var bad []string
	q := c.Quantize
	if w := q.Weights; w != "" && !slices.Contains(Types, Type(w)) {
		bad = append(bad, fmt.Sprintf("quantize.weights: %q (want %s)", w, choice.Or(Types)))
	}
	if q.Dynamic && q.Weights != "" {
		bad = append(bad, "quantize.dynamic and quantize.weights are two kinds of quantization: give one")
	}
	if !slices.Contains(BlockSizes, q.BlockSize) {
		bad = append(bad, fmt.Sprintf("quantize.block_size: %d (want %s)", q.BlockSize, choice.Or(BlockSizeNames())))
	}
	if r := Rounding(q.WeightRounding); !slices.Contains(Roundings, r) {
		bad = append(bad, fmt.Sprintf("quantize.weight_rounding: %q (want %s)", r, choice.Or(Roundings)))
	}
	return bad
}

func configJoins(c config.Config) []string {
	if Rounding(c.Quantize.WeightRounding) == GPTQ && c.Quantize.Weights != "" && c.Calibration.Data == "" {
		return []string{"quantize.weight_rounding gptq needs calibration.data"}
	}
	return nil
}
