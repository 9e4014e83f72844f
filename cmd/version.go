package cmd

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newCmdVersion(io *IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print optc's version and the Go version it was built with",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(io.Out, "optc %s\ngo   %s %s/%s\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
