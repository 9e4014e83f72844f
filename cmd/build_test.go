package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// parseBuild runs `optc build args` up to the options it would build with.
func parseBuild(t *testing.T, args ...string) (*BuildOptions, int, string) {
	t.Helper()
	var got *BuildOptions
	var out, errOut bytes.Buffer
	io := &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	c := newCmdBuild(io, &globals{}, func(o *BuildOptions) error { got = o; return nil })
	root := NewRoot(io)
	for _, sub := range root.Commands() {
		if sub.Name() == "build" {
			root.RemoveCommand(sub)
		}
	}
	root.AddCommand(c)
	root.SetArgs(append([]string{"build"}, args...))
	status := 0
	if err := root.Execute(); err != nil {
		status = 1
		errOut.WriteString(err.Error())
	}
	return got, status, errOut.String()
}

func TestBuildFlagsOverrideTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "optc.yaml")
	os.WriteFile(cfg, []byte(`
model: from-file.onnx
output: file-out
int8: true
targets: [tensorrt]
shapes: {x: [1, 3, 8, 8]}
calibration: {data: c.npy, samples: 50, method: entropy}
latency: {batches: [1, 2, 4], duration: 3s}
quantize: {exclude: [Gemm]}
`), 0o644)
	o, status, msg := parseBuild(t, "m.onnx", "--config", cfg, "--calib-samples", "10", "--target", "ort,triton",
		"--latency-batches", "8", "--shape", "y:2,2", "--exclude", "Conv", "--per-channel=false", "--latency-duration", "250ms",
		"--image-color", "gray", "--image-size", "28x30", "--image-mean", "0.5")
	if status != 0 {
		t.Fatal(msg)
	}
	c := o.Config
	want := config.Default()
	// The file's relative paths resolve against its folder.
	want.Model, want.Output, want.INT8 = "m.onnx", filepath.Join(dir, "file-out"), true
	want.Targets = []string{"ort", "triton"}
	want.Shapes = map[string][]int64{"y": {2, 2}}
	want.Calibration.Data, want.Calibration.Samples, want.Calibration.Method = filepath.Join(dir, "c.npy"), 10, "entropy"
	want.Latency.Batches = []int{8}
	want.Latency.Duration = config.Duration{Duration: 250 * time.Millisecond}
	want.Quantize.Exclude = []string{"Conv"}
	want.Quantize.PerChannel = false
	want.Image.Color, want.Image.Size, want.Image.Mean = "gray", []int{28, 30}, []float64{0.5}
	got, _ := config.Marshal(c)
	wanted, _ := config.Marshal(want)
	if !bytes.Equal(got, wanted) {
		t.Fatalf("effective config\n%s\nwant\n%s", got, wanted)
	}
	// Without flags the file's values stand.
	o, _, _ = parseBuild(t, "--config", cfg)
	if o.Config.Model != filepath.Join(dir, "from-file.onnx") || o.Config.Calibration.Samples != 50 || !reflect.DeepEqual(o.Config.Latency.Batches, []int{1, 2, 4}) {
		t.Fatalf("file values lost: %+v", o.Config)
	}
}

func TestBuildPrintConfigAndErrors(t *testing.T) {
	dir := t.TempDir()
	status, out, _ := run(t, "build", "m.onnx", "--int8", "--calib-data", "c.npy", "--print-config")
	if status != 0 || !strings.Contains(out, "model: m.onnx") || !strings.Contains(out, "int8: true") || !strings.Contains(out, "duration: 1s") {
		t.Fatalf("status %d:\n%s", status, out)
	}
	// The printed configuration is a valid config file.
	cfg := filepath.Join(dir, "printed.yaml")
	os.WriteFile(cfg, []byte(out), 0o644)
	if _, err := config.Load(cfg); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("int8: true\ncalibration:\n  date: x.npy\n"), 0o644)
	for _, tc := range []failCase{
		{[]string{"build", "--config", bad, "m.onnx"}, 1, "bad.yaml: line 3: unknown key date in calibration"},
		{[]string{"build", "m.onnx", "--target", "gpu", "-o", dir + "/o"}, 2, `--target: unknown target "gpu"`},
		{[]string{"build", "m.onnx", "--int8", "-o", dir + "/o"}, 2, "--int8 needs calibration.data"},
		{[]string{"build", "m.onnx", "--latency-batches", "x"}, 2, "latency-batches"},
		{[]string{"build", "a.onnx", "b.onnx"}, 2, "at most one model"},
		{[]string{"build", "-o", dir + "/o"}, 2, "give MODEL"},
	} {
		status, _, errOut := run(t, tc.args...)
		if status != tc.status || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: status %d, %q; want %d and %q on one line", tc.args, status, errOut, tc.status, tc.want)
		}
	}
}

// The README's quick start: an INT8 build of the bundled model, through
// the command line, prints its table and leaves the folder.
func TestBuildCommandMNIST(t *testing.T) {
	ortenv.Require(t)
	dir := testenv.Data(t, "mnist")
	out := filepath.Join(t.TempDir(), "build")
	status, stdout, stderr := run(t, "build", testenv.Model("mnist_cnn.onnx"), "--int8", "-o", out,
		"--calib-data", filepath.Join(dir, "train_images.npy"), "--calib-samples", "64",
		"--eval-data", filepath.Join(dir, "test_images.npy"), "--eval-labels", filepath.Join(dir, "test_labels.npy"),
		"--eval-samples", "256", "--latency-duration", "50ms", "--placement", "auto", "--placement-budget", "5s",
		"--technique", "gptq,bias-correction")
	if status != 0 {
		t.Fatal(stderr)
	}
	var rep struct {
		Quantization []struct {
			Techniques *struct {
				Applied []string `json:"applied"`
			} `json:"techniques"`
		} `json:"quantization"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, string(b), &rep)
	if len(rep.Quantization) == 0 || rep.Quantization[0].Techniques == nil || strings.Join(rep.Quantization[0].Techniques.Applied, ",") != "gptq,bias-correction" {
		t.Errorf("report.json quantization %+v: want the techniques asked for applied", rep.Quantization)
	}
	for _, want := range []string{"model.int8.onnx", "ort/model.ort", "speed-up b8", "ort artifact: ", "placement.json"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"manifest.json", "report.json", "model.int8.onnx", "ort/session.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	checkSchemeVariants(t, filepath.Join(out, "placement.json"))
	// A second build into the same folder is refused without --force.
	status, _, stderr = run(t, "build", testenv.Model("mnist_cnn.onnx"), "-o", out)
	if status != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("status %d: %s", status, stderr)
	}
}

// TestBuildStageLines: with stderr going to a file (a CI log), build says
// when each stage starts and ends, with its time; --quiet says nothing;
// --json keeps stdout one JSON document.
func TestBuildStageLines(t *testing.T) {
	ortenv.Require(t)
	bin := buildOptc(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		flags []string
	}{{"log", nil}, {"json", []string{"--json"}}, {"quiet", []string{"--quiet"}}} {
		cmd := exec.Command(bin, append([]string{"build", testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(dir, c.name),
			"--latency-batches", "1", "--latency-duration", "50ms"}, c.flags...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, stderr.String())
		}
		if c.name == "quiet" {
			if stderr.Len() != 0 {
				t.Errorf("--quiet: stderr %q", stderr.String())
			}
			continue
		}
		if c.name == "json" && !json.Valid(stdout.Bytes()) {
			t.Errorf("--json: stdout is not one JSON document: %.200s", stdout.String())
		}
		log := stderr.String()
		for i, stage := range []string{"load", "passes", "nchwc", "export", "verify", "report"} {
			start := fmt.Sprintf("build: [%d/6] %s ...\n", i+1, stage)
			done := regexp.MustCompile(fmt.Sprintf(`(?m)^build: \[%d/6\] %s done in [0-9]+\.[0-9]s \(peak RSS [0-9]+ MiB\)$`, i+1, stage))
			if !strings.Contains(log, start) || !done.MatchString(log) {
				t.Errorf("%s: stderr lacks the start or end line of %s:\n%s", c.name, stage, log)
			}
		}
	}
}

// checkSchemeVariants: the scheme variants are placement candidates on the
// user's path. Each was built, with its scheme recorded, and timed at the
// first batch size (a rejected one too: it was checked because it was the
// fastest left), or the budget left it out by name.
func checkSchemeVariants(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Schemes map[string]struct {
			Activations string `json:"activations"`
			PerChannel  bool   `json:"per_channel"`
			Format      string `json:"format"`
		} `json:"schemes"`
		Rejected []string `json:"rejected"`
		Checked  []string `json:"accuracy_checked"`
		NotTried []string `json:"not_tried"`
		Timings  []struct {
			P50Ms map[string]float64 `json:"p50_ms"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	want := map[string]func(a string, ch bool, format string) bool{
		"s8s8":       func(a string, ch bool, format string) bool { return a == "int8" && ch && format == "qdq" },
		"qoperator":  func(a string, ch bool, format string) bool { return a == "uint8" && ch && format == "qoperator" },
		"per-tensor": func(a string, ch bool, format string) bool { return a == "uint8" && !ch && format == "qdq" },
	}
	built := 0
	for name, ok := range want {
		s, isBuilt := f.Schemes[name]
		switch {
		case isBuilt:
			built++
			if !ok(s.Activations, s.PerChannel, s.Format) {
				t.Errorf("%s: recorded scheme %+v", name, s)
			}
			_, timed := f.Timings[0].P50Ms[name]
			rejected := strings.Contains(strings.Join(f.Rejected, "\n"), name+":")
			if !timed {
				t.Errorf("%s: built but not timed: %v", name, f.Timings[0].P50Ms)
			}
			if rejected && !slices.Contains(f.Checked, name) {
				t.Errorf("%s: rejected (%q) but not among the candidates checked %q", name, f.Rejected, f.Checked)
			}
		case !strings.Contains(strings.Join(f.NotTried, " "), name):
			t.Errorf("%s: neither built nor left out by the budget: %s", name, b)
		}
	}
	if built == 0 {
		t.Errorf("no scheme variant built: %s", b)
	}
}

// TestBuildConfigPathsFromItsFolder: a config's relative paths resolve
// against the config file's folder, whatever folder optc runs in (the
// test runs in cmd/, the demo config sits in testdata/mnist/); a missing
// one is an error naming the file, line and key.
func TestBuildConfigPathsFromItsFolder(t *testing.T) {
	root := testenv.RepoRoot()
	demo := filepath.Join(root, "testdata", "mnist", "optc.yaml")
	status, out, stderr := run(t, "build", "--config", demo, "--print-config")
	if status != 0 || !strings.Contains(out, "model: "+filepath.Join(root, "testdata", "models", "mnist_cnn.onnx")+"\n") ||
		!strings.Contains(out, "labels: "+filepath.Join(root, "testdata", "mnist", "eval_labels.npy")+"\n") {
		t.Errorf("status %d, %s:\n%s", status, stderr, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "optc.yaml")
	os.WriteFile(cfg, []byte("model: "+filepath.Join(root, "testdata", "models", "mnist_cnn.onnx")+"\noutput: out\nint8: true\ncalibration:\n  data: calib.npy\n"), 0o644)
	status, out, stderr = run(t, "build", "--config", cfg)
	failsCleanly(t, status, 1, out, stderr, "config "+cfg+": line 5: calibration.data: stat "+filepath.Join(dir, "calib.npy")+": no such file or directory (relative paths in a config resolve against its folder)")
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a build that failed its config check left an output folder")
	}
}
