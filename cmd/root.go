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

	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ptq"
)

// IO is where a command reads and writes, so tests can capture it.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// Progress receives the stage lines of long commands (build): stderr
	// for the process, on a terminal and in logs alike; nil in tests that
	// check the one-line failure contract on ErrOut.
	Progress io.Writer
}

// StdIO is the process's standard streams, their writes gated by
// ExitOnSignal's line (interruptGate). Progress lines go to stderr with a
// heartbeat: a command that has said nothing for heartbeatEvery repeats
// its last step with the time it has run.
func StdIO() *IO {
	out, errOut := gatedWriter{os.Stdout}, gatedWriter{os.Stderr}
	return &IO{In: os.Stdin, Out: out, ErrOut: errOut, Progress: newHeartbeat(errOut, heartbeatEvery)}
}

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
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{flagHint(c, err)} })
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
		newCmdDiff(io, g, nil),
		newCmdRuntime(io, nil, nil),
		newCmdVersion(io, g),
	)
	registerCompletions(root)
	// cobra's completion command prints its help and exits 0 when no
	// shell (or an unknown one) is named; that is a usage error.
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp.Name() == "completion" {
		var shells []string
		for _, s := range comp.Commands() {
			shells = append(shells, s.Name())
		}
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("completion: name a shell: %s", choice.Or(shells))}
			}
			return usageError{fmt.Errorf("completion: unknown shell %q (want %s)", args[0], choice.Or(shells))}
		}
	}
	setExamples(root)
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
	// What killed optc processes left beside a file or folder written now
	// is removed as it is written, one line each (build says so itself).
	atomicfile.SetStaleReporter(func(msg string) { fmt.Fprintf(io.ErrOut, "optc: %s\n", msg) })
	if hb, ok := io.Progress.(*heartbeat); ok {
		defer hb.stop()
	}
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
	if ptq.IsGuardError(err) || errors.As(err, new(refusedError)) {
		return ExitRefused
	}
	return 1
}

// ExitRefused is the exit status when the accuracy guard refused an INT8
// model: optc quantize wrote nothing; optc build wrote and checked every
// other artifact (the ORT deployment FP32), so a pipeline can tell "INT8
// refused, FP32 shipped" from a failed build (1).
const ExitRefused = 3

// refusedError is a build that succeeded but for the INT8 models the
// accuracy guard refused.
type refusedError struct{ what []string }

func (e refusedError) Error() string {
	return "accuracy guard: " + strings.Join(e.what, "; ") + "; every other artifact was written and checked (exit 3)"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// flagHints point a flag that other commands take at what this command
// takes instead.
var flagHints = map[string]map[string]string{
	"build": {
		"batch":         "build takes --calib-batch, --eval-batch and --latency-batches",
		"data":          "build takes --calib-data and --eval-data",
		"samples":       "build takes --calib-samples and --eval-samples",
		"labels":        "build takes --eval-labels",
		"no-check":      "build always checks its passes; -O 1 (no fusions) or -O 0 (no passes) if the check fails",
		"provider":      "build runs and times its artifacts on ONNX Runtime's CPU provider; --target tensorrt makes the TensorRT artifacts",
		"inter-threads": "build sets --threads (intra-op) only",
	},
	"quantize": {
		"batch":   "quantize takes --calib-batch and --eval-batch",
		"data":    "quantize takes --calib-data and --eval-data",
		"samples": "quantize takes --calib-samples and --eval-samples",
		"labels":  "quantize takes --eval-labels",
		"int8":    "quantize always writes INT8",
	},
}

// flagHint adds the hint of flagHints to an unknown-flag error.
func flagHint(c *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if hint, ok := flagHints[c.Name()][name]; ok {
		return fmt.Errorf("%w; %s", err, hint)
	}
	return err
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: expects %s, got %d arguments (see %s --help)", cmd.Name(), what, len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// runOrHook does a command's work once its flags are parsed: runF when a
// test passed one (to see the parsed options without running anything),
// else run. Every command's RunE ends this way.
func runOrHook[O any](runF, run func(O) error, opts O) error {
	if runF != nil {
		return runF(opts)
	}
	return run(opts)
}

// writeJSON prints v as indented JSON: what --json gives every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
