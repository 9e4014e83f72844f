// Package cmd is optc's command line: thin cobra commands that parse flags
// into an options struct and call a library function.
package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Version is optc's version, set at link time (-ldflags "-X optc/cmd.Version=...").
var Version = "0.1.0-dev"

// IO is where a command reads and writes, so tests can capture it.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// StdIO is the process's standard streams.
func StdIO() *IO { return &IO{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// usageError marks a mistake in how optc was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// NewRoot returns the optc command with all subcommands.
func NewRoot(io *IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "optc",
		Short:         "Optimize, quantize and compile ONNX models, and prove the result with real runs",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g := &globals{}
	root.PersistentFlags().StringVar(&g.ortLib, "ort-lib", "", "path to libonnxruntime.so (else $OPTC_ORT_LIB, $ONNXRUNTIME_SHARED_LIBRARY_PATH, the cache, the system)")
	root.AddCommand(
		newCmdInspect(io, nil),
		newCmdConvert(io, nil),
		newCmdOptimize(io, g, nil),
		newCmdPasses(io),
		newCmdQuantize(io, g, nil),
		newCmdBuild(io, g, nil),
		newCmdLint(io, nil),
		newCmdRun(io, g, nil),
		newCmdCompare(io, g, nil),
		newCmdBench(io, g, nil),
		newCmdDiff(io, nil),
		newCmdVersion(io, g),
	)
	registerCompletions(root)
	return root
}

// Main runs optc with args and returns the process exit status: 0, 1 for
// a failure, 2 for a usage error. Errors are printed as one line.
func Main(args []string, io *IO) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(io.ErrOut, "optc: internal error (please report it): %v\n", r)
			status = 1
		}
	}()
	root := NewRoot(io)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(io.ErrOut, "optc: %s\n", oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		return 2
	}
	return 1
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: expects %s, got %d arguments (see optc %s --help)", cmd.Name(), what, len(args), cmd.Name())}
		}
		return nil
	}
}

// writeJSON prints v as indented JSON: what --json gives every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
