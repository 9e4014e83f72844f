package prune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
)

// The build config's prune section is prune's: its defaults and rules
// live here, beside the methods and scopes they name.
func init() {
	config.Register(config.Owner{Name: "prune", Section: "prune", Defaults: configDefaults, Rules: configRules, Joins: configJoins})
}

func configDefaults(c *config.Config) {
	c.Prune.Reconstruct, c.Prune.Scope = true, ScopeLayer
}

func configRules(c config.Config) []string {
	var bad []string
	p := c.Prune
	for _, m := range p.Methods {
		if _, err := ParseMethod(m); err != nil {
			bad = append(bad, "prune.methods: "+strings.TrimPrefix(err.Error(), "--prune "))
		}
	}
	if p.MaxAccuracyDrop < 0 {
		bad = append(bad, "prune.max_accuracy_drop must not be negative")
	}
	if p.MinCosine < 0 || p.MinCosine > 1 {
		bad = append(bad, fmt.Sprintf("prune.min_cosine: %g (want 0 to 1)", p.MinCosine))
	}
	if slices.Contains(p.Methods, "channels:auto") && p.MaxAccuracyDrop <= 0 && p.MinCosine <= 0 {
		bad = append(bad, "prune.methods: channels:auto needs a budget: prune.max_accuracy_drop (with eval.labels) or prune.min_cosine")
	}
	if !slices.Contains(Scopes, p.Scope) {
		bad = append(bad, fmt.Sprintf("prune.scope: %q (want %s)", p.Scope, choice.Or(Scopes)))
	}
	return bad
}

func configJoins(c config.Config) []string {
	var bad []string
	p := c.Prune
	if p.MaxAccuracyDrop > 0 {
		// It measures pruning's cost on labelled data: name what is missing.
		var missing []string
		if len(p.Methods) == 0 {
			missing = append(missing, "prune.methods")
		}
		if c.Eval.Labels == "" {
			missing = append(missing, "eval.labels")
		}
		if len(missing) > 0 {
			bad = append(bad, "prune.max_accuracy_drop needs "+strings.Join(missing, " and "))
		}
	}
	if dataDriven := p.Reconstruct && c.Calibration.Data != "" && c.Calibration.Data != "random"; p.Scope == ScopeGlobal && dataDriven &&
		(len(p.Methods) != 1 || !strings.HasPrefix(p.Methods[0], "channels:") || p.Methods[0] == "channels:auto") {
		bad = append(bad, fmt.Sprintf("prune.scope global with reconstruction is for one channels:R (it allocates R's parameters across the channel groups): methods %v", p.Methods))
	}
	return bad
}
