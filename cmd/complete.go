package cmd

import (
	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/weightonly"
)

// flagChoices are the values `optc completion` offers for flags that take
// one of a fixed set of names, wherever such a flag appears. Each list is
// the one the flag is validated against.
var flagChoices = map[string][]string{
	"level":        ort.Levels,
	"provider":     ort.Providers,
	"method":       choice.Strings(calibrate.Methods),
	"format":       choice.Strings(quantize.Formats),
	"reduce-range": quantize.ReduceRangeModes,
	"image-layout": data.ImageLayouts,
	"image-color":  data.ImageColors,
	"opt-level":    config.OptLevels,
	// Weight-only quantization (quantize and build).
	"weights":         choice.Strings(weightonly.Types),
	"weight-rounding": choice.Strings(weightonly.Roundings),
	"block-size":      weightonly.BlockSizeNames(),
	// Post-training techniques (quantize and build).
	"technique": choice.Strings(quantize.Techniques),
}

// commandFlagChoices are the flags whose names mean different things in
// different commands (build's --target is a deployment target, quantize's
// a numeric scheme; diff's --percentile is a latency percentile).
var commandFlagChoices = map[string]map[string][]string{
	"build":    {"target": config.TargetChoices()},
	"quantize": {"target": choice.Strings(quantize.Targets())},
	"lint":     {"target": target.Linters()},
	"diff":     {"percentile": config.GatePercentiles, "undecided": undecidedChoices},
	"compare":  {"check": choice.Strings(compare.Stats)},
}

// fileOrChoices are flags that take a file as well as the names listed
// (build's --placement: auto, all-int8 or a placement.json).
var fileOrChoices = map[string]map[string][]string{
	"build": {"placement": placement.Modes},
}

// registerCompletions gives every command's choice flags their values.
func registerCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		for name, values := range flagChoices {
			complete(c, name, values, cobra.ShellCompDirectiveNoFileComp)
		}
		for name, values := range commandFlagChoices[c.Name()] {
			complete(c, name, values, cobra.ShellCompDirectiveNoFileComp)
		}
		for name, values := range fileOrChoices[c.Name()] {
			complete(c, name, values, cobra.ShellCompDirectiveDefault)
		}
	}
}

func complete(c *cobra.Command, flag string, values []string, d cobra.ShellCompDirective) {
	if c.Flags().Lookup(flag) == nil {
		return
	}
	// Registering twice is the only error; the tables name each flag once.
	_ = c.RegisterFlagCompletionFunc(flag, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, d
	})
}
