package cmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/infer"
)

// RunOptions are the inputs of `optc run`.
type RunOptions struct {
	IO    *IO
	Infer infer.Options
	JSON  bool
}

func newCmdRun(io *IO, g *globals, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: io}
	var sf sessionFlags
	var df dataFlags
	var expose string
	c := &cobra.Command{
		Use:   "run MODEL --data PATH -o DIR",
		Short: "Run a model in ONNX Runtime and write its outputs as .npy files",
		Long: `Run a model in ONNX Runtime over the input data and write each output to
DIR/<output name>.npy (names made file-safe), batches joined along axis 0.
--outputs adds internal values as outputs (on a copy in memory; the model file
is not touched). Files appear in DIR only when all are complete.`,
		Args: exactArgs(1, "one model file"),
		RunE: func(_ *cobra.Command, args []string) error {
			var err error
			o := &opts.Infer
			o.Model, o.ORTLib = args[0], g.ortLib
			if o.OutDir == "" {
				return usageError{fmt.Errorf("run: -o DIR is required")}
			}
			if o.Session, err = sf.options(); err != nil {
				return err
			}
			if o.DataOpts, err = df.options(); err != nil {
				return err
			}
			o.Data = df.spec
			if expose != "" {
				o.Expose = strings.Split(expose, ",")
			}
			return runOrHook(runF, runRun, opts)
		},
	}
	c.Flags().StringVarP(&opts.Infer.OutDir, "output", "o", "", "folder for the output .npy files (required)")
	c.Flags().StringVar(&expose, "outputs", "", "internal values to return as well, comma-separated")
	c.Flags().BoolVar(&opts.JSON, "json", false, "print what was written as JSON")
	sf.register(c.Flags())
	df.register(c.Flags(), true)
	return c
}

func runRun(opts *RunOptions) error {
	if err := checkOutputs(nil, []string{opts.Infer.OutDir}); err != nil {
		return err
	}
	res, err := infer.Run(opts.Infer)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.IO.Out, res)
	}
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "output\tdtype\tshape\tfile\n")
	for _, f := range res.Files {
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", f.Name, f.DType, f.Shape, f.File)
	}
	fmt.Fprintf(w, "\n%d samples in %d runs\n", res.Samples, res.Batches)
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "not run: %s\n", s)
	}
	return w.Flush()
}
