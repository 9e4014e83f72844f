package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/conformance"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// Outcomes of `optc optimize` with its default check on one backend test
// model.
const (
	sweepRan            = "ran"
	sweepNotExpressible = "not expressible"
	sweepCannotRun      = "ORT cannot run the original"
	sweepStaticBatch    = "static-batch (data cannot feed it)"
	sweepFailed         = "failed"
)

var sweepOutcomes = []string{sweepRan, sweepNotExpressible, sweepCannotRun, sweepStaticBatch, sweepFailed}

// TestBackendSweep runs what `optc optimize IN -o OUT` does, default
// check included, over the ONNX backend test models and classifies each:
// ran, not expressible (a value the ORT binding cannot carry, named),
// ORT cannot run the original (the unmodified model fails in ORT on the
// check's inputs too), static-batch, or failed. Nothing may fail or crash.
//
// Plain `go test` takes every 10th model and every model with a sequence,
// map or optional in its interface or its name; OPTC_SWEEP=full (make
// sweep) takes all of them and prints the table docs/optimize.md records.
func TestBackendSweep(t *testing.T) {
	ortenv.Require(t)
	root, models := conformance.Models(t)
	full := os.Getenv("OPTC_SWEEP") == "full"
	if !full {
		models = sweepSubset(t, models)
	}
	tmp := t.TempDir()
	counts := map[string]int{}
	var notes []string
	start := time.Now()
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail := sweepOne(t, p, filepath.Join(tmp, strings.ReplaceAll(rel, "/", "_")+".onnx"))
		counts[outcome]++
		switch outcome {
		case sweepFailed:
			t.Errorf("%s: %s", rel, detail)
		case sweepRan:
		default:
			notes = append(notes, fmt.Sprintf("%s: %s: %s", outcome, rel, detail))
		}
	}
	t.Logf("optc optimize (default check) over %d backend test models in %s:\n%s", len(models), time.Since(start).Round(time.Second), sweepTable(counts, len(models)))
	if full || testing.Verbose() {
		sort.Strings(notes)
		for _, n := range notes {
			t.Log(n)
		}
	}
}

// sweepTable is how many models ended in each outcome, and the total, as
// both sweeps log it.
func sweepTable(counts map[string]int, total int) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, o := range sweepOutcomes {
		fmt.Fprintf(w, "%s\t%d\t\n", o, counts[o])
	}
	fmt.Fprintf(w, "total\t%d\t\n", total)
	w.Flush()
	return b.String()
}

// sweepSubset is every 10th model, and every model with a non-tensor value
// in its interface or "optional", "sequence" or "_seq" in its name.
func sweepSubset(t *testing.T, models []string) []string {
	var out []string
	for i, p := range models {
		name := filepath.Base(filepath.Dir(p))
		if i%10 == 0 || strings.Contains(name, "optional") || strings.Contains(name, "sequence") ||
			strings.Contains(name, "_seq") || name == "test_if_opt" || hasNonTensor(p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no backend test models")
	}
	return out
}

func hasNonTensor(path string) bool {
	m, err := graph.LoadFile(path)
	if err != nil {
		return false
	}
	defer m.Close()
	ins, outs := ort.Interface(m)
	for _, io := range append(ins, outs...) {
		if io.Kind != graph.KindTensor {
			return true
		}
	}
	return false
}

// parseOptimize is `optc optimize args` up to the options it would run
// with.
func parseOptimize(t *testing.T, args ...string) *OptimizeOptions {
	t.Helper()
	var got *OptimizeOptions
	io := &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	c := newCmdOptimize(io, &globals{}, func(o *OptimizeOptions) error { got = o; return nil })
	c.SetArgs(args)
	c.SetOut(io.Out)
	c.SetErr(io.ErrOut)
	if err := c.Execute(); err != nil {
		t.Fatalf("optimize %v: %v", args, err)
	}
	return got
}

// sweepOne classifies one model. A panic is a failure, not the end of the
// sweep.
func sweepOne(t *testing.T, model, out string) (outcome, detail string) {
	defer func() {
		if r := recover(); r != nil {
			outcome, detail = sweepFailed, fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	optimizeWith := func(args ...string) error {
		_, err := optimize.Run(parseOptimize(t, append(args, model, "-o", out)...).Optimize)
		return err
	}
	err := optimizeWith()
	if outcome, detail, done := sweepVerdict(err); done {
		return outcome, detail
	}
	// Does ORT run the unmodified model? -O0 runs no pass: the check then
	// compares the original with itself on the same inputs.
	orig := optimizeWith("-O0")
	if orig != nil {
		if outcome, detail, done := sweepVerdict(orig); done {
			return outcome, detail
		}
		if strings.Contains(orig.Error(), "ONNX Runtime") {
			return sweepCannotRun, oneLine(orig.Error())
		}
		if strings.Contains(orig.Error(), "differs from the original") {
			return sweepCannotRun, "the original differs from itself on the check's inputs: " + oneLine(orig.Error())
		}
		return sweepFailed, oneLine(err.Error()) + " (the original alone: " + oneLine(orig.Error()) + ")"
	}
	// A difference that does not come back is ORT's: some kernels leave
	// outputs unwritten on inputs outside what the op defines (ReverseSequence
	// with sequence_lens 0), and a second run reads other memory.
	if again := optimizeWith(); again == nil && strings.Contains(err.Error(), "differs from the original") {
		return sweepCannotRun, "not reproducible in ORT on the check's inputs: " + oneLine(err.Error())
	}
	return sweepFailed, oneLine(err.Error())
}

// sweepVerdict classifies the outcomes that need no second run.
func sweepVerdict(err error) (outcome, detail string, done bool) {
	switch {
	case err == nil:
		return sweepRan, "", true
	case errors.Is(err, ort.ErrNotExpressible):
		return sweepNotExpressible, oneLine(err.Error()), true
	case strings.Contains(err.Error(), "static batch size"):
		return sweepStaticBatch, oneLine(err.Error()), true
	}
	return "", "", false
}

// TestBuildNonTensorModels runs `optc build` (float, ORT target) on models
// with optional, sequence and string values, and on plain ones: a plain
// model builds, and so does one with a tensor output beside an optional
// (checked and timed on the tensor); one with only values the ORT binding
// cannot carry fails with one line naming that value; nothing crashes.
func TestBuildNonTensorModels(t *testing.T) {
	ortenv.Require(t)
	root, _ := conformance.Models(t)
	mixed := testgraph.TensorBesideOptional(t, filepath.Join(root, "node/test_if_opt/model.onnx"))
	cases := []struct {
		model string
		value string // "": must build
	}{
		{"simple/test_single_relu_model", ""},
		{"node/test_loop11", ""},
		{"node/test_if", ""},
		{"node/test_conv_with_strides_padding", ""},
		{"node/test_if_opt", `"sequence"`},
		{"node/test_if_seq", `"res"`},
		{"node/test_identity_opt", `"opt_in"`},
		{"node/test_loop16_seq_none", `"opt_seq"`},
		{"node/test_sequence_insert_at_back", `"sequence"`},
		{"node/test_cast_FLOAT_to_STRING", `"output"`},
		{mixed, ""}, // the optional output is left out, named in a note
	}
	for _, c := range cases {
		model := c.model
		if !filepath.IsAbs(model) {
			model = filepath.Join(root, model, "model.onnx")
		}
		t.Run(filepath.Base(filepath.Dir(model)), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			opts, status, msg := parseBuild(t, model, "-o", out, "--latency-duration", "20ms", "--latency-batches", "1", "--eval-batch", "1")
			if status != 0 {
				t.Fatalf("flags: %s", msg)
			}
			var stdout bytes.Buffer
			opts.IO = &IO{In: strings.NewReader(""), Out: &stdout, ErrOut: &bytes.Buffer{}}
			err := buildRun(opts)
			switch {
			case c.value == "" && err != nil:
				t.Errorf("build failed: %v", err)
			case err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.value)):
				t.Errorf("error %q: want one line naming %s", err, c.value)
			case err != nil:
				t.Logf("%v", err)
			default:
				t.Logf("built")
			}
		})
	}
}

// TestBackendBuildSweep runs `optc build MODEL -o OUT` (float, ORT target,
// short timing) over the backend test models. A build may fail only where
// the optimize sweep classifies the model as not expressible or not run by
// ORT; a build that fails where optimize runs, a panic or a crash fails the
// test. Plain `go test` takes every 40th model; OPTC_SWEEP=full (make
// sweep) takes all of them.
func TestBackendBuildSweep(t *testing.T) {
	ortenv.Require(t)
	root, models := conformance.Models(t)
	if os.Getenv("OPTC_SWEEP") != "full" {
		var every []string
		for i, p := range models {
			if i%40 == 0 {
				every = append(every, p)
			}
		}
		models = every
	}
	tmp := t.TempDir()
	counts := map[string]int{}
	start := time.Now()
	for i, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail := buildSweepOne(t, p, filepath.Join(tmp, fmt.Sprintf("b%d", i)), filepath.Join(tmp, fmt.Sprintf("o%d.onnx", i)))
		counts[outcome]++
		if outcome == sweepFailed {
			t.Errorf("%s: %s", rel, detail)
		} else if outcome != sweepRan && testing.Verbose() {
			t.Logf("%s: %s: %s", outcome, rel, detail)
		}
	}
	t.Logf("optc build (ort target) over %d backend test models in %s (ran = built):\n%s", len(models), time.Since(start).Round(time.Second), sweepTable(counts, len(models)))
}

// buildSweepOne builds one model; when the build fails, the optimize
// sweep's classification of the model says whether that is allowed.
func buildSweepOne(t *testing.T, model, outDir, optimized string) (outcome, detail string) {
	defer func() {
		if r := recover(); r != nil {
			outcome, detail = sweepFailed, fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	opts, status, msg := parseBuild(t, model, "-o", outDir, "--latency-duration", "20ms")
	if status != 0 {
		return sweepFailed, "flags: " + msg
	}
	opts.IO = &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	err := buildRun(opts)
	if err == nil {
		return sweepRan, ""
	}
	if errors.Is(err, ort.ErrNotExpressible) {
		return sweepNotExpressible, oneLine(err.Error())
	}
	if outcome, why := sweepOne(t, model, optimized); outcome != sweepRan {
		return outcome, why
	}
	return sweepFailed, "build failed where optimize runs: " + oneLine(err.Error())
}
