package placement

import (
	"fmt"
	"strings"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/report/schema"
)

// The build config's quantize.placement keys are placement's: their
// defaults, rules and words live here, beside the modes they name.
func init() {
	config.Register(config.Owner{Name: "placement", Section: "quantize", Defaults: configDefaults, Rules: configRules, Joins: configJoins,
		Words: map[string][]string{"quantize.placement": Modes}})
}

func configDefaults(c *config.Config) {
	c.Quantize.Placement, c.Quantize.PlacementBudget = schema.ModeAuto, config.Duration{Duration: time.Minute}
}

func configRules(c config.Config) []string {
	var bad []string
	q := c.Quantize
	if q.Placement == "" {
		bad = append(bad, fmt.Sprintf("quantize.placement: empty (want %s or a placement.json)", strings.Join(Modes, ", ")))
	}
	if q.PlacementBudget.Duration <= 0 {
		bad = append(bad, fmt.Sprintf("quantize.placement_budget: %v (want a positive duration)", q.PlacementBudget))
	}
	return bad
}

func configJoins(c config.Config) []string {
	if c.Replay != "" && c.Quantize.Placement != schema.ModeAuto {
		return []string{fmt.Sprintf("quantize.placement: %q with replay, which sets the placement from its record (leave it auto)", c.Quantize.Placement)}
	}
	return nil
}
