package cmd

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/tools/testenv"
)

// usageCases are mistakes in how optc is called, in every command: each
// must exit 2 (docs/errors.md) with one stderr line naming the problem,
// before any file is read. m.onnx does not exist: a usage error comes
// first.
var usageCases = []struct {
	args []string
	want string
}{
	{[]string{"frobnicate"}, "frobnicate"},
	{[]string{"inspect"}, "expects one model file"},
	{[]string{"inspect", "a.onnx", "b.onnx"}, "got 2 arguments"},
	{[]string{"inspect", "--json=maybe", "m.onnx"}, `"maybe"`},
	{[]string{"inspect", "--no-such-flag", "m.onnx"}, "--no-such-flag"},
	{[]string{"convert"}, "expects one input model"},
	{[]string{"convert", "m.onnx"}, "-o OUT is required"},
	{[]string{"convert", "m.onnx", "-o", "c.onnx", "--size-threshold", "-1"}, "--size-threshold"},
	{[]string{"convert", "m.onnx", "-o", "c.onnx", "--size-threshold", "many"}, `"many"`},
	{[]string{"optimize"}, "expects one input model"},
	{[]string{"optimize", "m.onnx"}, "-o OUT is required"},
	{[]string{"optimize", "m.onnx", "-o", "o.onnx", "--prune-scope", "nowhere"}, "--prune-scope"},
	{[]string{"optimize", "m.onnx", "-o", "o.onnx", "--check", "x"}, "--check"},
	{[]string{"optimize", "m.onnx", "-o", "o.onnx", "--prune", "2:4", "--calib-data", "x.npy", "--prune-damp", "often"}, "--prune-damp \"often\""},
	{[]string{"optimize", "m.onnx", "-o", "o.onnx", "--check", "-1"}, "--check"},
	{[]string{"optimize", "m.onnx", "-o", "o.onnx", "--prune", "magnitude:0.5", "--max-accuracy-drop", "1"}, "needs --labels"},
	{[]string{"convert", "m.onnx", "-o", "c.onnx", "--external-data", "--location", "../x.bin"}, `--location "../x.bin"`},
	{[]string{"passes", "extra"}, "expects no arguments"},
	{[]string{"quantize"}, "expects one input model"},
	{[]string{"quantize", "m.onnx"}, "-o OUT is required"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--target", "foo"}, `--target "foo"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--method", "foo"}, `"foo"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--format", "foo"}, `--format: "foo"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--technique", "smoothquant,adaround"}, `--technique: unknown technique "adaround"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--smoothquant-alpha", "2"}, "--smoothquant-alpha: 2 (want a value in [0, 1])"},
	{[]string{"build", "m.onnx", "-o", "b", "--technique", "adaround"}, `--technique: unknown technique "adaround"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--reduce-range", "maybe"}, `--reduce-range: "maybe"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--level", "foo"}, `"foo"`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--data", "x.npy"}, "--calib-data"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx"}, "--calib-data is required"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--percentile", "200"}, "--percentile: 200 (want 0 < p <= 100)"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--calib-batch", "-1"}, "--calib-batch -1"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--eval-data", "random", "--eval-samples", "-1"}, "--eval-samples -1"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--max-accuracy-drop", "2"}, "--eval-labels"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--min-cosine", "3"}, "--min-cosine: 3 (want 0 to 1)"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--weights", "int5"}, `--weights: "int5" (want int4 or int3)`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--weights", "int4", "--block-size", "48"}, "--block-size: 48 (want 32, 64 or 128)"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--weights", "int4", "--weight-rounding", "awq"}, `--weight-rounding: "awq" (want rtn or gptq)`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--weights", "int3", "--weight-rounding", "gptq"}, "--weight-rounding gptq needs --calib-data"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--weights", "int4", "--format", "qoperator"}, "--format is for INT8 quantization, not --weights"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--dynamic", "--weights", "int4"}, "--weights and --dynamic are two kinds of quantization"},
	{[]string{"build", "m.onnx", "-o", "out", "--dynamic", "--weights", "int4"}, "--dynamic and quantize.weights are two kinds of quantization: give one"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--dynamic", "--method", "entropy"}, "--method is for static INT8, not --dynamic"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--dynamic", "--target", "tensorrt"}, `--dynamic is for --target ort`},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--ort-contrib"}, "--ort-contrib is for --dynamic"},
	{[]string{"build"}, "give MODEL"},
	{[]string{"build", "a.onnx", "b.onnx"}, "at most one model"},
	{[]string{"build", "m.onnx"}, "-o DIR is required"},
	{[]string{"build", "m.onnx", "-o", "b", "--target", "foo"}, `--target: unknown target "foo"`},
	{[]string{"build", "m.onnx", "-o", "b", "--method", "foo"}, `--method: "foo"`},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "foo"}, `--eval-task: "foo" (want default, classification, lm, ctc, text-detection, segmentation or detection)`},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "lm", "--calib-data", "random"}, "--eval-task lm needs token ids"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "ctc", "--eval-data", "x.npy", "--eval-dict", "d.txt"}, "--eval-task ctc needs eval.labels: label strings"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "ctc", "--eval-data", "x.npy", "--eval-labels", "l.txt"}, "--eval-task ctc needs eval.dict: the model's character dictionary"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-dict", "d.txt"}, "--eval-dict needs eval.task ctc"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-output", "y"}, "--eval-output needs an eval.task that scores one output: ctc, text-detection, segmentation or detection"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--eval-task", "segmentation", "--eval-data", "x.npy"}, "--eval-task segmentation needs --eval-labels: class ids [N, H, W]"},
	{[]string{"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "random", "--eval-task", "lm"}, "--eval-task lm scores a weight-only language model"},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "x.npy", "--task", "ctc", "--labels", "l.txt"}, "--task ctc needs --dict"},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "x.npy", "--task", "text-detection"}, "--task text-detection needs --labels: boxes"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "lm", "--eval-data", "x.npy", "--eval-labels", "y.npy"}, "--eval-labels does not apply to eval.task lm"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-logits", "y"}, "--eval-logits needs eval.task lm"},
	{[]string{"build", "m.onnx", "-o", "b", "--max-perplexity-increase", "3"}, "--max-perplexity-increase needs eval.task lm"},
	{[]string{"build", "m.onnx", "-o", "b", "--latency-seq-lengths", "32"}, "--latency-seq-lengths needs eval.task lm"},
	{[]string{"build", "m.onnx", "-o", "b", "--eval-task", "lm", "--eval-data", "x.npy", "--max-perplexity-increase", "-1"}, "--max-perplexity-increase: -1 must not be negative"},
	{[]string{"build", "m.onnx", "-o", "b", "--format", "foo"}, `--format: "foo"`},
	{[]string{"build", "m.onnx", "-o", "b", "--level", "foo"}, `--level: "foo"`},
	{[]string{"build", "m.onnx", "-o", "b", "-O", "7"}, "--opt-level: 7"},
	{[]string{"build", "m.onnx", "-o", "b", "--reduce-range", "maybe"}, `--reduce-range: "maybe"`},
	{[]string{"build", "m.onnx", "-o", "b", "--calib-batch", "0"}, "--calib-batch: 0 (want at least 1)"},
	{[]string{"build", "m.onnx", "-o", "b", "--threads", "abc"}, `"abc"`},
	{[]string{"build", "m.onnx", "-o", "b", "--latency-duration", "5"}, "--latency-duration"},
	{[]string{"build", "m.onnx", "-o", "b", "--budget", "5"}, "--budget"},
	{[]string{"build", "m.onnx", "-o", "b", "--budget", "-1m"}, "--budget: -1m0s (want a positive duration, or 0 for none)"},
	{[]string{"build", "m.onnx", "-o", "b", "--image-color", "purple"}, `"purple"`},
	{[]string{"build", "m.onnx", "-o", "b", "--int8"}, "--calib-data"},
	{[]string{"build", "m.onnx", "-o", "b", "--batch", "8"}, "--calib-batch, --eval-batch and --latency-batches"},
	{[]string{"build", "m.onnx", "-o", "b", "--no-check"}, "-O 1"},
	{[]string{"lint", "m.onnx"}, `--target ""`},
	{[]string{"lint", "--target", "foo", "m.onnx"}, `--target "foo"`},
	{[]string{"run", "m.onnx"}, "-o DIR is required"},
	{[]string{"run", "m.onnx", "-o", "r"}, "--data is required"},
	{[]string{"run", "m.onnx", "-o", "r", "--data", "random", "--level", "foo"}, `"foo"`},
	{[]string{"run", "m.onnx", "-o", "r", "--data", "random", "--provider", "foo"}, `--provider "foo"`},
	{[]string{"run", "m.onnx", "-o", "r", "--data", "random", "--threads", "-1"}, "thread counts"},
	{[]string{"run", "m.onnx", "-o", "r", "--data", "random", "--shape", "x"}, "--shape"},
	{[]string{"compare", "m.onnx"}, "expects two model files"},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "random", "--check", "median"}, `"median"`},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "random", "--atol", "x:y"}, "--atol"},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "random", "--task", "foo"}, `--task: unknown task "foo" (want default, classification, lm, ctc, text-detection, segmentation or detection)`},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "random", "--task", "lm"}, "--task lm needs --data token ids, not random data"},
	{[]string{"compare", "a.onnx", "b.onnx", "--data", "x.npy", "--logits", "y"}, "--logits needs --task lm"},
	{[]string{"bench", "m.onnx"}, "--data is required"},
	{[]string{"bench", "m.onnx", "--data", "random", "--batch", "x"}, `--batch "x"`},
	{[]string{"bench", "m.onnx", "--data", "random", "--iterations", "-1"}, "--iterations"},
	{[]string{"diff", "a"}, "expects two reports"},
	{[]string{"diff", "a", "b", "--percentile", "p77"}, `"p77"`},
	{[]string{"diff", "a", "b", "--min-cosine", "2"}, "min_cosine"},
	{[]string{"version", "extra"}, "expects no arguments"},
	{[]string{"completion"}, "name a shell"},
	{[]string{"runtime", "frob"}, `unknown subcommand "frob"`},
	{[]string{"runtime", "install", "--platform", "foo"}, `platform "foo": want os/arch`},
	{[]string{"runtime", "list", "extra"}, "list: expects no arguments, got 1 arguments (see optc runtime list --help)"},
	{[]string{"completion", "fish2"}, `unknown shell "fish2"`},
}

// TestUsageErrors runs the optc binary, built once, on every usage
// mistake of every command: exit status 2, one stderr line naming the
// problem, nothing on stdout, nothing written.
func TestUsageErrors(t *testing.T) {
	bin := buildOptc(t)
	seen := map[string]bool{}
	for _, c := range usageCases {
		dir := t.TempDir()
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		status := 0
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		failsCleanly(t, status, 2, out.String(), errOut.String(), c.want)
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("optc %s: wrote %v", strings.Join(c.args, " "), entries)
		}
		seen[c.args[0]] = true
	}
	// Every command has at least one case.
	for _, c := range NewRoot(StdIO()).Commands() {
		if !c.Hidden && c.Name() != "help" && !seen[c.Name()] {
			t.Errorf("no usage case for optc %s", c.Name())
		}
	}
}

// TestBuildOutputHoldsModel: build without -o is a usage error even when
// the model lies in the current folder, and an -o that holds the model is
// refused naming both.
func TestBuildOutputHoldsModel(t *testing.T) {
	bin := buildOptc(t)
	dir := t.TempDir()
	b, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"build", "m.onnx"}, 2, "-o DIR is required"},
		{[]string{"build", "m.onnx", "-o", "."}, 1, "output folder . holds the input model m.onnx"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		}
		failsCleanly(t, status, c.status, out.String(), errOut.String(), c.want)
	}
}

// TestBuildFlagKeys: every flag of build that sets a config key is in
// buildFlagKeys (so that a bad value is reported under the flag's name),
// and docs/config.md's reference pairs that key with that flag.
func TestBuildFlagKeys(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // key cell -> flag cell
	for _, l := range strings.Split(string(doc), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) > 3 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			rows[cells[1]] = cells[2]
		}
	}
	root := NewRoot(StdIO())
	build, _, err := root.Find([]string{"build"})
	if err != nil {
		t.Fatal(err)
	}
	notConfig := map[string]bool{"config": true, "print-config": true, "json": true, "quiet": true, "help": true}
	check := func(name, short string) {
		if notConfig[name] {
			return
		}
		key, ok := buildFlagKeys[name]
		if !ok {
			t.Errorf("build --%s: not in buildFlagKeys", name)
			return
		}
		for keys, flags := range rows {
			if strings.Contains(keys, "`"+key+"`") {
				if !strings.Contains(flags, "`--"+name) && (short == "" || !strings.Contains(flags, "`-"+short+"`")) {
					t.Errorf("docs/config.md: key %s documents flag %s, want --%s", key, strings.TrimSpace(flags), name)
				}
				return
			}
		}
		t.Errorf("docs/config.md: no row for key %s (--%s)", key, name)
	}
	build.Flags().VisitAll(func(f *pflag.Flag) { check(f.Name, f.Shorthand) })
	build.InheritedFlags().VisitAll(func(f *pflag.Flag) { check(f.Name, f.Shorthand) })
	for name := range buildFlagKeys {
		if build.Flags().Lookup(name) == nil && build.InheritedFlags().Lookup(name) == nil {
			t.Errorf("buildFlagKeys names --%s, which build lacks", name)
		}
	}
}
