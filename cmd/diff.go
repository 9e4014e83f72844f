package cmd

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/remeasure"
	"github.com/optc-dev/optc/report"
)

// DiffOptions are the inputs of `optc diff`.
type DiffOptions struct {
	IO       *IO
	Old, New string
	Gates    config.Gates
	JSON     bool
	// Remeasure, when set, times both builds' artifacts again and the
	// latency gate judges that (remeasure.Compare).
	Remeasure *remeasure.Options
}

// undecidedChoices are what --undecided takes.
var undecidedChoices = []string{"pass", "fail"}

func newCmdDiff(io *IO, g *globals, runF func(*DiffOptions) error) *cobra.Command {
	opts := &DiffOptions{IO: io}
	var configPath string
	flagged := config.Gates{Percentile: "p50"}
	var timeAgain bool
	var remeasureTime time.Duration
	var undecided string
	c := &cobra.Command{
		Use:   "diff OLD NEW [--max-accuracy-drop P] [--min-cosine C] [--max-latency-regression PCT [--remeasure]] [--min-speedup X] [--max-size BYTES]",
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
Those recorded figures describe the noise within each build, not the drift
between two builds made minutes or runners apart.

--remeasure (OLD and NEW must then be the build folders) times both
builds' artifacts again, here, interleaved (rounds of A B, then B A), each
at its own build's ORT level and threads, on the same random inputs, at
the batch sizes both reports timed, and --max-latency-regression judges
that instead: the median over rounds of NEW's median over OLD's in the
round, with a 99% sign-test interval. Rounds go on (at least 10) until
the interval is all above the limit (FAIL) or all at or below it (pass),
or --remeasure-time (shared by every artifact and batch size) runs out:
the gate is then undecided, and passes with a warning, or fails with
--undecided fail. p50 only.

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
			if err := remeasureOptions(opts, cmd.Flags(), timeAgain, remeasureTime, undecided, g.ortLib); err != nil {
				return err
			}
			if opts.Remeasure != nil && isTerminal(io.ErrOut) {
				opts.Remeasure.Progress = io.ErrOut
			}
			return runOrHook(runF, diffRun, opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&configPath, "config", "", "YAML configuration file whose gates: section sets the gates")
	fs.Float64Var(&flagged.MaxAccuracyDrop, "max-accuracy-drop", 0, "largest task accuracy drop allowed, in points (0: off)")
	fs.Float64Var(&flagged.MinCosine, "min-cosine", 0, "lowest cosine to its input model allowed for every NEW artifact (0: off)")
	fs.Float64Var(&flagged.MaxLatencyRegression, "max-latency-regression", 0, "largest latency growth allowed, in percent, on the reports' recorded runs, or on a --remeasure (0: off)")
	fs.StringVar(&flagged.Percentile, "percentile", "p50", "latency the regression and speed-up gates look at: "+choice.Or(config.GatePercentiles))
	fs.Float64Var(&flagged.MinSpeedup, "min-speedup", 0, "lowest speed-up of every NEW artifact over NEW's input model (0: off)")
	fs.Int64Var(&flagged.MaxSize, "max-size", 0, "largest size in bytes allowed for every NEW model artifact (0: off)")
	fs.BoolVar(&opts.JSON, "json", false, "print the comparison as JSON")
	fs.BoolVar(&timeAgain, "remeasure", false, "time both builds' artifacts again, interleaved, and gate latency on that (OLD and NEW: build folders)")
	fs.DurationVar(&remeasureTime, "remeasure-time", remeasure.DefaultTime, "--remeasure: the most it takes in all, shared by every artifact and batch size")
	fs.StringVar(&undecided, "undecided", "pass", "--remeasure: what a latency gate still undecided when its time runs out does: "+choice.Or(undecidedChoices))
	return c
}

// remeasureOptions sets opts.Remeasure from the --remeasure flags, or
// says how they were misused.
func remeasureOptions(opts *DiffOptions, set *pflag.FlagSet, on bool, d time.Duration, undecided, ortLib string) error {
	if !on {
		for _, name := range []string{"remeasure-time", "undecided"} {
			if set.Changed(name) {
				return usageError{fmt.Errorf("--%s is for --remeasure", name)}
			}
		}
		return nil
	}
	switch {
	case d <= 0:
		return usageError{fmt.Errorf("--remeasure-time %s: want a positive duration", d)}
	case !slices.Contains(undecidedChoices, undecided):
		return usageError{fmt.Errorf("--undecided %q: want %s", undecided, choice.Or(undecidedChoices))}
	case opts.Gates.Percentile != "" && opts.Gates.Percentile != "p50":
		return usageError{fmt.Errorf("--remeasure times the median only: give --percentile p50, not %s", opts.Gates.Percentile)}
	}
	opts.Remeasure = &remeasure.Options{Old: opts.Old, New: opts.New, Time: d, UndecidedFails: undecided == "fail", ORTLib: ortLib}
	return nil
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
	var d *report.Diff
	if opts.Remeasure != nil {
		if d, err = remeasure.Compare(old, new, opts.Gates, *opts.Remeasure); err != nil {
			return err
		}
	} else {
		d = report.Compare(old, new, opts.Gates)
	}
	if opts.JSON {
		err = writeJSON(opts.IO.Out, struct {
			Changes   []report.Change           `json:"changes"`
			Models    []report.ModelDiff        `json:"models"`
			Gates     []report.GateResult       `json:"gates"`
			Remeasure *report.RemeasureSettings `json:"remeasure,omitempty"`
		}{d.Changes, d.Models, d.Gates, d.Remeasure})
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
