package cmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/report"
)

// DiffOptions are the inputs of `optc diff`.
type DiffOptions struct {
	IO       *IO
	Old, New string
	Gates    config.Gates
	JSON     bool
}

func newCmdDiff(io *IO, runF func(*DiffOptions) error) *cobra.Command {
	opts := &DiffOptions{IO: io}
	var configPath string
	flagged := config.Gates{Percentile: "p50"}
	c := &cobra.Command{
		Use:   "diff OLD NEW [--max-accuracy-drop P] [--min-cosine C] [--max-latency-regression PCT] [--min-speedup X] [--max-size BYTES]",
		Short: "Show what changed between two builds and fail when a gate is broken",
		Long: `Diff compares two optc reports: report.json files or the build folders
holding them (e.g. main's build and this branch's). It prints, model by
model, what changed in size, accuracy, agreement and latency, and checks
the gates: --max-accuracy-drop (points, OLD to NEW), --min-cosine (every NEW
artifact against its input model), --max-latency-regression (percent, at
--percentile), --min-speedup (every NEW artifact over NEW's input model)
and --max-size (bytes of every NEW model artifact). Gates can also come
from the gates: section of a --config file; flags override it.

Latency is compared on the repeated timing runs a build records: the
median ratio NEW/OLD and its seeded 95% bootstrap interval. A latency gate
fails only when the whole interval is beyond the limit, so noise alone does
not fail a pipeline; the output shows the interval and the runs' spread.

Exit status 1 names every failed gate with both values; 0 otherwise.`,
		Args: exactArgs(2, "two reports (report.json files or build folders)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Old, opts.New = args[0], args[1]
			opts.Gates = config.Gates{}
			if configPath != "" {
				c, err := config.Load(configPath)
				if err != nil {
					return err
				}
				if err := c.Gates.Validate(); err != nil {
					return fmt.Errorf("%s: %w", configPath, err)
				}
				opts.Gates = c.Gates
			}
			set := cmd.Flags()
			for name, apply := range map[string]func(){
				"max-accuracy-drop":      func() { opts.Gates.MaxAccuracyDrop = flagged.MaxAccuracyDrop },
				"min-cosine":             func() { opts.Gates.MinCosine = flagged.MinCosine },
				"max-latency-regression": func() { opts.Gates.MaxLatencyRegression = flagged.MaxLatencyRegression },
				"percentile":             func() { opts.Gates.Percentile = flagged.Percentile },
				"min-speedup":            func() { opts.Gates.MinSpeedup = flagged.MinSpeedup },
				"max-size":               func() { opts.Gates.MaxSize = flagged.MaxSize },
			} {
				if set.Changed(name) {
					apply()
				}
			}
			if err := opts.Gates.Validate(); err != nil {
				return usageError{err}
			}
			if runF != nil {
				return runF(opts)
			}
			return diffRun(opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&configPath, "config", "", "YAML configuration file whose gates: section sets the gates")
	fs.Float64Var(&flagged.MaxAccuracyDrop, "max-accuracy-drop", 0, "largest task accuracy drop allowed, in points (0: off)")
	fs.Float64Var(&flagged.MinCosine, "min-cosine", 0, "lowest cosine to its input model allowed for every NEW artifact (0: off)")
	fs.Float64Var(&flagged.MaxLatencyRegression, "max-latency-regression", 0, "largest latency growth allowed, in percent (0: off)")
	fs.StringVar(&flagged.Percentile, "percentile", "p50", "latency the regression and speed-up gates look at: "+choice.Or(config.GatePercentiles))
	fs.Float64Var(&flagged.MinSpeedup, "min-speedup", 0, "lowest speed-up of every NEW artifact over NEW's input model (0: off)")
	fs.Int64Var(&flagged.MaxSize, "max-size", 0, "largest size in bytes allowed for every NEW model artifact (0: off)")
	fs.BoolVar(&opts.JSON, "json", false, "print the comparison as JSON")
	return c
}

func diffRun(opts *DiffOptions) error {
	old, err := report.Load(opts.Old)
	if err != nil {
		return err
	}
	new, err := report.Load(opts.New)
	if err != nil {
		return err
	}
	d := report.Compare(old, new, opts.Gates)
	if opts.JSON {
		err = writeJSON(opts.IO.Out, struct {
			Models []report.ModelDiff  `json:"models"`
			Gates  []report.GateResult `json:"gates"`
		}{d.Models, d.Gates})
	} else {
		err = d.Write(opts.IO.Out)
	}
	if err != nil {
		return err
	}
	failed := d.Failed()
	if len(failed) == 0 {
		return nil
	}
	msgs := make([]string, len(failed))
	for i, g := range failed {
		msgs[i] = g.Gate
		if g.Model != "" {
			msgs[i] += " (" + g.Model + ")"
		}
		msgs[i] += ": " + g.Detail
	}
	return fmt.Errorf("diff: %d gate(s) failed: %s", len(failed), strings.Join(msgs, "; "))
}

// writeReport writes a command's report into dir (nothing when dir is "").
func writeReport(dir string, from func() (*report.Report, error)) error {
	if dir == "" {
		return nil
	}
	r, err := from()
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return r.WriteFolder(dir)
}
