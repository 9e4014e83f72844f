package cmd

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
)

// ConvertOptions are the inputs of `optc convert`.
type ConvertOptions struct {
	IO            *IO
	Input         string
	Output        string
	ExternalData  bool
	SizeThreshold int64
	Location      string
}

func newCmdConvert(io *IO, runF func(*ConvertOptions) error) *cobra.Command {
	opts := &ConvertOptions{IO: io}
	c := &cobra.Command{
		Use:   "convert IN -o OUT",
		Short: "Load a model and write it back, optionally moving tensor data to a side file",
		Long: `Load a model and write it back. Without --external-data all tensor data is
written into OUT unless that would pass protobuf's 2 GiB limit, in which case
large tensors go to a side file next to it. With --external-data every tensor
of at least --size-threshold bytes goes to the side file (OUT's name plus
".data", or --location). The write is atomic and the input is never
overwritten.`,
		Args: exactArgs(1, "one input model"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Input = args[0]
			if opts.Output == "" {
				return usageError{fmt.Errorf("convert: -o OUT is required")}
			}
			if opts.Location != "" && !filepath.IsLocal(opts.Location) {
				return usageError{fmt.Errorf("--location %q: want a file name inside OUT's folder", opts.Location)}
			}
			return runOrHook(runF, convertRun, opts)
		},
	}
	c.Flags().StringVarP(&opts.Output, "output", "o", "", "where to write the model (required)")
	c.Flags().BoolVar(&opts.ExternalData, "external-data", false, "write tensors to a side file")
	c.Flags().Int64Var(&opts.SizeThreshold, "size-threshold", 1024, "smallest tensor, in bytes, moved to the side file")
	c.Flags().StringVar(&opts.Location, "location", "", "side file name, relative to OUT's folder (default OUT.data)")
	return c
}

func convertRun(opts *ConvertOptions) error {
	if opts.SizeThreshold < 0 {
		return usageError{fmt.Errorf("convert: --size-threshold must not be negative")}
	}
	if err := checkOutputs([]string{opts.Output}, nil); err != nil {
		return err
	}
	m, err := graph.LoadValid(opts.Input)
	if err != nil {
		return err
	}
	defer m.Close()
	before := graph.Summarize(m)
	save := graph.SaveOptions{SizeThreshold: opts.SizeThreshold, Location: opts.Location}
	if opts.ExternalData {
		save.External = graph.ExternalAlways
	}
	if err := refuseOverwrite(opts, before, save); err != nil {
		return err
	}
	if err := graph.Save(m, opts.Output, save); err != nil {
		return err
	}
	out, err := graph.LoadFile(opts.Output)
	if err != nil {
		return fmt.Errorf("reading back %s: %w", opts.Output, err)
	}
	defer out.Close()
	after := graph.Summarize(out)
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\tinput\toutput\n")
	fmt.Fprintf(w, "file\t%s\t%s\n", opts.Input, opts.Output)
	fmt.Fprintf(w, "bytes\t%s\t%s\n", thousands(before.FileBytes), thousands(after.FileBytes))
	fmt.Fprintf(w, "external tensors\t%d\t%d\n", before.External.Tensors, after.External.Tensors)
	fmt.Fprintf(w, "external bytes\t%s\t%s\n", thousands(before.External.Bytes), thousands(after.External.Bytes))
	fmt.Fprintf(w, "nodes\t%d\t%d\n", before.NodesTotal, after.NodesTotal)
	fmt.Fprintf(w, "parameters\t%s\t%s\n", thousands(before.Parameters.Count), thousands(after.Parameters.Count))
	return w.Flush()
}

// refuseOverwrite stops a conversion that would replace the input model or
// one of the side files its data is read from.
func refuseOverwrite(opts *ConvertOptions, in *graph.Summary, save graph.SaveOptions) error {
	if data.SameFile(opts.Input, opts.Output) {
		return fmt.Errorf("convert: refusing to overwrite the input %s; choose another -o", opts.Input)
	}
	location := save.Location
	if location == "" {
		location = filepath.Base(opts.Output) + ".data"
	}
	side := filepath.Join(filepath.Dir(opts.Output), location)
	for _, f := range in.External.Files {
		if data.SameFile(filepath.Join(filepath.Dir(opts.Input), filepath.FromSlash(f)), side) {
			return fmt.Errorf("convert: refusing to overwrite %s, which holds the input's tensor data; choose another -o or --location", side)
		}
	}
	return nil
}
