package cmd

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/task/tasks"
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
	"technique":   choice.Strings(quantize.Techniques),
	"eval-task":   tasks.Names(),
	"prune-scope": prune.Scopes,
	"nchwc":       build.NCHWcChoices,
}

// commandFlagChoices are the flags whose names mean different things in
// different commands (build's --target is a deployment target, quantize's
// a numeric scheme; diff's --percentile is a latency percentile).
var commandFlagChoices = map[string]map[string][]string{
	"build":    {"target": config.TargetChoices()},
	"quantize": {"target": choice.Strings(quantize.Targets())},
	"lint":     {"target": target.Linters()},
	"diff":     {"percentile": config.GatePercentiles, "undecided": undecidedChoices},
	"compare":  {"check": choice.Strings(compare.Stats), "task": tasks.Names()},
	"install":  {"platform": platformChoices()},
}

// platformChoices are what runtime install --platform takes.
func platformChoices() []string {
	var out []string
	for _, p := range install.Supported(install.DefaultVersion) {
		out = append(out, p.String())
	}
	return append(out, "all")
}

// fileOrChoices are flags that take a file as well as the names listed
// (build's --placement: auto, all-int8 or a placement.json).
var fileOrChoices = map[string]map[string][]string{
	"build": {"placement": placement.Modes},
}

// registerCompletions gives every command's choice flags their values,
// subcommands' (runtime install) included.
func registerCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		registerCompletions(c)
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
	f := c.Flags().Lookup(flag)
	if f == nil {
		return
	}
	list := isList(f)
	// Registering twice is the only error; the tables name each flag once.
	_ = c.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		i := strings.LastIndex(toComplete, ",")
		if !list || i < 0 {
			return values, d
		}
		// After a comma in a list flag (--target ort,): the values not
		// given yet, each after what is typed so far.
		given := strings.Split(toComplete[:i], ",")
		var out []string
		for _, v := range values {
			if !slices.Contains(given, v) {
				out = append(out, toComplete[:i+1]+v)
			}
		}
		return out, d | cobra.ShellCompDirectiveNoSpace
	})
}

// isList says the flag takes several values, comma-separated.
func isList(f *pflag.Flag) bool {
	return strings.HasSuffix(f.Value.Type(), "Slice")
}
