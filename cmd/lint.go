package cmd

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/lint"
)

// LintOptions are the inputs of `optc lint`.
type LintOptions struct {
	IO     *IO
	Model  string
	Target string
	JSON   bool
}

func newCmdLint(io *IO, runF func(*LintOptions) error) *cobra.Command {
	opts := &LintOptions{IO: io}
	c := &cobra.Command{
		Use:   "lint MODEL --target " + strings.Join(target.Linters(), "|"),
		Short: "Check a model against what a runtime accepts and fuses, before building it",
		Long: `Check a model for the target runtime without running it. For tensorrt:
Q/DQ nodes must be int8 (or float8), symmetric (zero point 0) with constant
positive scales, per-channel only on weights along the output-channel axis
(opset 13 or later); Conv/ConvTranspose/Gemm/MatMul should have both inputs
dequantized, no Q between a conv and its activation, and Q/DQ on the
residual input of an Add after a quantized conv; operators and types
TensorRT's ONNX parser does not take are errors. Each finding names the
node and the fix (docs/tensorrt.md lists the rules).

Exit status 1 when there is any error, 0 when there are only warnings or
nothing. --json prints the findings as one JSON object.`,
		Args: exactArgs(1, "one model file"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Model = args[0]
			if !slices.Contains(target.Linters(), opts.Target) {
				return usageError{fmt.Errorf("--target %q: want %s", opts.Target, choice.Or(target.Linters()))}
			}
			return runOrHook(runF, lintRun, opts)
		},
	}
	c.Flags().StringVar(&opts.Target, "target", "", "the runtime to check for: "+choice.Or(target.Linters())+" (required)")
	c.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of a table")
	return c
}

func lintRun(opts *LintOptions) error {
	m, err := graph.LoadValid(opts.Model)
	if err != nil {
		return err
	}
	defer m.Close()
	fs := target.Lookup(opts.Target).(target.Linter).Lint(m)
	if fs == nil {
		fs = []lint.Finding{}
	}
	errs := lint.Errors(fs)
	if opts.JSON {
		if err := writeJSON(opts.IO.Out, struct {
			Model    string         `json:"model"`
			Target   string         `json:"target"`
			Errors   int            `json:"errors"`
			Warnings int            `json:"warnings"`
			Findings []lint.Finding `json:"findings"`
		}{opts.Model, opts.Target, errs, len(fs) - errs, fs}); err != nil {
			return err
		}
	} else {
		printFindings(opts.IO, fs)
	}
	if errs > 0 {
		return fmt.Errorf("%s: %d errors for %s (and %d warnings)", opts.Model, errs, opts.Target, len(fs)-errs)
	}
	return nil
}

func printFindings(io *IO, fs []lint.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(io.Out, "no findings")
		return
	}
	w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "severity\trule\tnode\tmessage")
	for _, f := range fs {
		node := f.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Severity, f.Rule, node, f.Message)
	}
	w.Flush()
	errs := lint.Errors(fs)
	fmt.Fprintf(io.Out, "\n%d errors, %d warnings\n", errs, len(fs)-errs)
}
