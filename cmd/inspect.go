package cmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/report/schema"
)

// InspectOptions are the inputs of `optc inspect`.
type InspectOptions struct {
	IO    *IO
	Model string
	JSON  bool
}

func newCmdInspect(io *IO, runF func(*InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{IO: io}
	c := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "Show a model's interface, operators, parameters and storage",
		Long: `Show a model's IR version, opsets, producer, inputs and outputs with their
types, node counts, the operator histogram, parameter count and bytes
(initializers and Constant nodes), file size and external data. The model is
verified first; an invalid model is an error. --json prints the same facts as
one JSON object (fields: docs/inspect.md).`,
		Args: exactArgs(1, "one model file"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runOrHook(runF, inspectRun, opts)
		},
	}
	c.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of tables")
	return c
}

func inspectRun(opts *InspectOptions) error {
	m, err := graph.LoadValid(opts.Model)
	if err != nil {
		return err
	}
	defer m.Close()
	s := graph.Summarize(m)
	semi := prune.Check24(m)
	if opts.JSON {
		return writeJSON(opts.IO.Out, struct {
			*graph.Summary
			TwoFour []schema.PruneLayer `json:"sparsity_2_4"`
		}{s, semi})
	}
	printSummary(opts.IO, s)
	print24(opts.IO, semi)
	return nil
}

// print24 says which weighted layers satisfy 2:4 sparsity, listing them
// when any does.
func print24(io *IO, layers []schema.PruneLayer) {
	var ok []string
	for _, l := range layers {
		if l.Skipped == "" {
			ok = append(ok, l.Node)
		}
	}
	fmt.Fprintf(io.Out, "\n2:4 sparsity: %d of %d weighted layers satisfy it\n", len(ok), len(layers))
	for _, n := range ok {
		fmt.Fprintf(io.Out, "  %s\n", n)
	}
}

func printSummary(io *IO, s *graph.Summary) {
	w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "model\t%s (%s bytes)\n", s.Path, thousands(s.FileBytes))
	producer := strings.TrimSpace(s.ProducerName + " " + s.ProducerVersion)
	if producer == "" {
		producer = "-"
	}
	fmt.Fprintf(w, "ir version\t%d\n", s.IRVersion)
	fmt.Fprintf(w, "producer\t%s\n", producer)
	var opsets []string
	for _, o := range s.Opsets {
		opsets = append(opsets, fmt.Sprintf("%s %d", o.Domain, o.Version))
	}
	fmt.Fprintf(w, "opsets\t%s\n", strings.Join(opsets, ", "))
	for i, v := range s.Inputs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", label(i, "inputs"), v.Name, v.Type)
	}
	for i, v := range s.Outputs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", label(i, "outputs"), v.Name, v.Type)
	}
	fmt.Fprintf(w, "nodes\t%d in the main graph, %d in all (%d subgraphs, %d functions)\n", s.Nodes, s.NodesTotal, s.Subgraphs, s.Functions)
	fmt.Fprintf(w, "parameters\t%s in %d initializers and %d Constant nodes (%s bytes)\n",
		thousands(s.Parameters.Count), s.Parameters.Initializers, s.Parameters.ConstantNodes, thousands(s.Parameters.Bytes))
	if s.External.Tensors == 0 {
		fmt.Fprintf(w, "external data\tnone\n")
	} else {
		fmt.Fprintf(w, "external data\t%d tensors, %s bytes in %s\n", s.External.Tensors, thousands(s.External.Bytes), strings.Join(s.External.Files, ", "))
	}
	w.Flush()
	fmt.Fprintln(io.Out)
	width := len("op")
	for _, o := range s.OpTypes {
		width = max(width, len(o.Op))
	}
	fmt.Fprintf(io.Out, "%-*s  %5s\n", width, "op", "count")
	for _, o := range s.OpTypes {
		fmt.Fprintf(io.Out, "%-*s  %5d\n", width, o.Op, o.Count)
	}
}

func label(i int, name string) string {
	if i == 0 {
		return name
	}
	return ""
}

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
