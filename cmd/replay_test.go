package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestBuildReplayUnderLoad: an INT8 build for every target times its
// placement, its nchwc stage and its Triton sweep, and records them in
// decisions.json. A second build with --replay, run while every core is
// kept busy by other processes, times none of them and writes the same
// files, byte for byte, except ORT's .ort file (ORT does not serialize it
// deterministically) and the reports, which hold timings; the manifest
// differs only in the .ort file's digest.
func TestBuildReplayUnderLoad(t *testing.T) {
	ortenv.Require(t)
	root := t.TempDir()
	build := func(out string, extra ...string) (int, string, string) {
		args := append(mnistINT8Args(t, "build", out, "64"), "--int8", "--target", "all",
			"--eval-samples", "128", "--latency-duration", "50ms", "--placement-budget", "5s")
		return run(t, append(args, extra...)...)
	}
	first, second := filepath.Join(root, "first"), filepath.Join(root, "second")
	if status, _, stderr := build(first); status != 0 {
		t.Fatal(stderr)
	}
	var rec struct {
		Placement struct{ Mode string } `json:"placement"`
		NCHWc     struct{ Block int }   `json:"nchwc"`
		Targets   struct {
			Triton struct {
				Swept     bool `json:"swept"`
				Instances int  `json:"instances"`
			} `json:"triton"`
		} `json:"targets"`
	}
	readJSONFile(t, filepath.Join(first, "decisions.json"), &rec)
	if rec.Placement.Mode != "auto" || rec.NCHWc.Block == 0 || !rec.Targets.Triton.Swept || rec.Targets.Triton.Instances == 0 {
		t.Fatalf("decisions.json of a measuring build: %+v", rec)
	}

	busyCores(t)
	status, stdout, stderr := build(second, "--replay", first)
	if status != 0 {
		t.Fatal(stderr)
	}
	for _, timed := range []string{"placement: timing", "placement: profiling", "sweep batch sizes", "nchwc: timing"} {
		if strings.Contains(stderr, timed) {
			t.Errorf("the replaying build timed something (%q):\n%s", timed, stderr)
		}
	}
	if want := "replayed from " + filepath.Join(first, "decisions.json") + ": placement, nchwc, triton"; !strings.Contains(stdout, want) {
		t.Errorf("the table does not say %q:\n%s", want, stdout)
	}
	var report struct {
		Details struct {
			ReplayedFrom string `json:"replayed_from"`
		} `json:"details"`
	}
	readJSONFile(t, filepath.Join(second, "report.json"), &report)
	if report.Details.ReplayedFrom != filepath.Join(first, "decisions.json") {
		t.Errorf("report.json replayed_from %q", report.Details.ReplayedFrom)
	}
	md, _ := os.ReadFile(filepath.Join(second, "report.md"))
	if !bytes.Contains(md, []byte("replayed from")) {
		t.Errorf("report.md does not say the decisions were replayed")
	}

	a, b := folderFiles(t, first), folderFiles(t, second)
	if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
		t.Fatalf("different files:\n%v\n%v", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
	for path, content := range a {
		switch {
		case strings.HasSuffix(path, ".ort"), path == "report.json", path == "report.md", path == "report.html":
			continue // ONNX Runtime does not write an .ort the same way twice
		case path == "manifest.json":
			content, b[path] = withoutORTDigests(t, content), withoutORTDigests(t, b[path])
		}
		if !bytes.Equal(content, b[path]) {
			t.Errorf("%s differs between the build and its replay", path)
		}
	}
}

// TestBuildReplayOtherModel: a record replayed on a build whose optimized
// model differs (another -O) is refused, naming the record and the digests.
func TestBuildReplayOtherModel(t *testing.T) {
	ortenv.Require(t)
	root := t.TempDir()
	first := filepath.Join(root, "first")
	model := testenv.Model("mnist_cnn.onnx")
	if status, _, stderr := run(t, "build", model, "-o", first, "--latency-batches", "1", "--latency-duration", "20ms"); status != 0 {
		t.Fatal(stderr)
	}
	status, stdout, stderr := run(t, "build", model, "-O", "0", "-o", filepath.Join(root, "second"), "--replay", first,
		"--latency-batches", "1", "--latency-duration", "20ms")
	failsCleanly(t, status, 1, stdout, lastLine(stderr), filepath.Join(first, "decisions.json")+": it was recorded for a model.fp32.onnx with sha256")
	if _, err := os.Stat(filepath.Join(root, "second")); !os.IsNotExist(err) {
		t.Error("a refused replay left its output folder")
	}
	status, stdout, stderr = run(t, "build", model, "-o", filepath.Join(root, "third"), "--replay", first, "--nchwc", "off")
	failsCleanly(t, status, 2, stdout, stderr, "--nchwc: \"off\" with replay")
}

// busyCores keeps every core busy with processes of their own until the test
// ends: a replayed build must not depend on what timing would measure.
func busyCores(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var procs []*exec.Cmd
	for range runtime.NumCPU() {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
	}
	t.Cleanup(func() {
		cancel()
		for _, c := range procs {
			c.Wait()
		}
	})
}

// folderFiles reads every file under dir by its slash path.
func folderFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		r, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(r)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withoutORTDigests is a manifest with the digests of its .ort files
// (kind ort-model) blanked.
func withoutORTDigests(t *testing.T, manifest []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	for _, a := range m["artifacts"].([]any) {
		if e := a.(map[string]any); e["kind"] == "ort-model" {
			e["sha256"] = ""
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestBuildReplayBudgetStops: within a small budget calibration stops at
// its share, on a batch boundary after at least 16 samples, and the
// guard's first check and every artifact's check after at least 32; the
// build says so (and that it overran the budget), records the counts in
// decisions.json, and a replay of it, which times nothing, calibrates and
// checks on the same samples and writes the same calibration and INT8
// model, byte for byte.
func TestBuildReplayBudgetStops(t *testing.T) {
	ortenv.Require(t)
	root := t.TempDir()
	build := func(out string, extra ...string) (int, string, string) {
		args := append(mnistINT8Args(t, "build", out, "20000"), "--int8", "--target", "ort", "--calib-batch", "16",
			"--eval-samples", "0", "--budget", "300ms")
		return runProgress(t, append(args, extra...)...)
	}
	first, second := filepath.Join(root, "first"), filepath.Join(root, "second")
	status, stdout, stderr := build(first)
	if status != 0 {
		t.Fatal(stderr)
	}
	var rec struct {
		QuantizeStops map[string]map[string]int `json:"quantize_stops"`
		CheckStops    map[string]int64          `json:"check_stops"`
	}
	readJSONFile(t, filepath.Join(first, "decisions.json"), &rec)
	checks := checkStops(t, first, rec.CheckStops, stderr)
	if g := rec.QuantizeStops["ort"][ptq.GuardCheckLoop]; g < schema.MinCheckSamples || g >= 2004 || !strings.Contains(stderr, fmt.Sprintf("the check stopped after %d samples", g)) {
		t.Errorf("decisions.json: quantize stops %v, want the guard's first check stopped after at least %d of 2004 samples, and said so", rec.QuantizeStops, schema.MinCheckSamples)
	}
	if !strings.Contains(stderr, "more than 10% past its 300ms budget") {
		t.Errorf("the build does not say it overran its budget:\n%s", stderr)
	}
	n := rec.QuantizeStops["ort"]["calibration samples"]
	if n < 16 || n >= 20000 || n%16 != 0 {
		t.Fatalf("decisions.json: quantize stops %v, want calibration stopped on a batch of 16 after at least 16 samples", rec.QuantizeStops)
	}
	if want := fmt.Sprintf("calibration stopped after %d samples: its share of the budget was spent", n); !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
	if want := fmt.Sprintf("calibration stopped at its share of the budget after %d samples", n); !strings.Contains(stdout, want) {
		t.Errorf("the notes do not say %q:\n%s", want, stdout)
	}
	var report struct {
		Details struct {
			INT8 map[string]struct { // by scheme
				Calibration struct {
					Samples int  `json:"samples"`
					Stopped bool `json:"stopped_by_budget"`
				} `json:"calibration"`
			} `json:"int8"`
		} `json:"details"`
	}
	readJSONFile(t, filepath.Join(first, "report.json"), &report)
	if c := report.Details.INT8["ort"].Calibration; c.Samples != n || !c.Stopped {
		t.Errorf("report.json calibration %+v, want %d samples, stopped", c, n)
	}

	status, stdout, stderr = build(second, "--replay", first)
	if status != 0 {
		t.Fatal(stderr)
	}
	if want := fmt.Sprintf("calibration stopped after %d samples: as the replayed build's did", n); !strings.Contains(stderr, want) {
		t.Errorf("the replay's stderr does not say %q:\n%s", want, stderr)
	}
	if !strings.Contains(stdout, "ort quantization's budget stops") {
		t.Errorf("the replay's table does not name the replayed stops:\n%s", stdout)
	}
	a, b := folderFiles(t, first), folderFiles(t, second)
	for _, path := range []string{"calibration.json", "model.int8.onnx", "decisions.json"} {
		if a[path] == nil || !bytes.Equal(a[path], b[path]) {
			t.Errorf("%s differs between the build and its replay (or is missing)", path)
		}
	}
	if again := checkStops(t, second, rec.CheckStops, ""); !maps.Equal(again, checks) {
		t.Errorf("the replay's checks %v, the build's %v: want the same figures on the same samples", again, checks)
	}
}

// checkStops checks that the budget stopped every artifact check of the
// build in dir at the same count, at least schema.MinCheckSamples and before
// the data's 2,004 samples, as decisions.json records them (stops), with
// the line that says so on stderr (when given); it returns each check's
// samples and figures, by artifact.
func checkStops(t *testing.T, dir string, stops map[string]int64, stderr string) map[string]string {
	t.Helper()
	var report struct {
		Details struct {
			Artifacts []struct {
				Path  string `json:"path"`
				Check *struct {
					Samples   int64   `json:"samples"`
					Stopped   bool    `json:"stopped_by_budget"`
					MinCosine float64 `json:"min_cosine"`
					Accuracy  *struct {
						B float64 `json:"accuracy_b"`
					} `json:"accuracy"`
				} `json:"check"`
			} `json:"artifacts"`
		} `json:"details"`
	}
	readJSONFile(t, filepath.Join(dir, "report.json"), &report)
	got := map[string]string{}
	var n int64
	for _, a := range report.Details.Artifacts {
		c := a.Check
		if c == nil {
			continue
		}
		if n == 0 {
			n = c.Samples
		}
		if !c.Stopped || c.Samples != n || c.Samples < schema.MinCheckSamples || c.Samples >= 2004 || stops[a.Path] != n || c.Accuracy == nil {
			t.Errorf("%s: %s check %+v (recorded stop %d), want stopped by the budget after %d samples, as every other", dir, a.Path, c, stops[a.Path], n)
		}
		acc := -1.0
		if c.Accuracy != nil {
			acc = c.Accuracy.B
		}
		got[a.Path] = fmt.Sprintf("%d samples, cosine %v, accuracy %v", c.Samples, c.MinCosine, acc)
	}
	if len(got) < 3 || len(stops) != len(got) {
		t.Errorf("%s: checks %v, recorded stops %v: want every artifact's check stopped", dir, got, stops)
	}
	if want := fmt.Sprintf("this check and every later one stop after %d samples", n); stderr != "" && !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
	return got
}

// TestBuildRefusesImpossibleBudget: a budget shorter than the least the
// build must run at the model's own speed (here the checks of every
// artifact and the guard's on the 32 evaluation images a budget stops
// them at, and the timing windows) is refused before calibration, in one
// line that names the budget it would need; nothing is written.
func TestBuildRefusesImpossibleBudget(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Data(t, "mnist")
	out := filepath.Join(t.TempDir(), "out")
	status, stdout, stderr := run(t, "build", testenv.Model("mnist_cnn.onnx"), "--int8", "--target", "all", "-o", out,
		"--calib-data", filepath.Join(mnist, "train_images.npy"),
		"--eval-data", filepath.Join(mnist, "test_images.npy"), "--eval-labels", filepath.Join(mnist, "test_labels.npy"),
		"--eval-samples", "0", "--budget", "1ms")
	failsCleanly(t, status, 1, stdout, stderr, "budget 1ms is too short for this model on this machine")
	if !strings.Contains(stderr, "7 artifact checks on 32 samples") || !strings.Contains(stderr, "or more (or --budget 0 for none)") {
		t.Errorf("the refusal does not say why or what budget would do: %s", stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused build wrote %s", out)
	}
}
