package cmd

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/ort"
)

func newCmdVersion(io *IO, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of optc, Go and the ONNX Runtime library found",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(io.Out, "optc %s\ngo   %s %s/%s\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			// A missing runtime is reported, not an error: version must
			// work on a machine without it.
			path, err := ort.Init(g.ortLib)
			if err != nil {
				fmt.Fprintf(io.Out, "ort  not found: %s\n", oneLine(err.Error()))
				return nil
			}
			v, _ := ort.Version()
			fmt.Fprintf(io.Out, "ort  %s (%s)\n", v, path)
			return nil
		},
	}
}
