package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/convstack"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/report"
)

// convStackFile writes a conv stack of n 3x3 convolutions at 32 channels
// on 16x16 inputs: 0.4 ms a run at ORT's level all on one thread, and
// about 1.7x that at level disable (no Conv+Relu fusion, no NCHWc
// layout), so that a deployment at the wrong level is clearly slower.
func convStackFile(t *testing.T, dir string, layers int) string {
	t.Helper()
	m, err := convstack.Layers(32, 16, layers)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("convstack%d.onnx", layers))
	if err := graph.Save(m, p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildConvStack builds model into dir/name for the ort target, one
// thread, timed briefly at batch 1; extra flags after.
func buildConvStack(t *testing.T, dir, name, model string, extra ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := append([]string{"build", model, "-o", out, "--threads", "1", "--latency-batches", "1", "--latency-duration", "50ms", "--force"}, extra...)
	if status, _, stderr := run(t, args...); status != 0 {
		t.Fatalf("build %s: %s", name, stderr)
	}
	return out
}

// remeasureJSON is what the tests read of optc diff --remeasure --json.
type remeasureJSON struct {
	Models []struct {
		Name       string              `json:"name"`
		Remeasured []report.Remeasured `json:"remeasured"`
	} `json:"models"`
	Gates     []report.GateResult       `json:"gates"`
	Remeasure *report.RemeasureSettings `json:"remeasure"`
}

// optc diff --remeasure times both builds again: two builds of the same
// config pass a 10% gate (or are undecided, which passes), and the same
// model deployed at ORT level disable fails it, its sessions at the level
// its build recorded.
func TestDiffRemeasure(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model := convStackFile(t, dir, 8)
	a, b := buildConvStack(t, dir, "a", model), buildConvStack(t, dir, "b", model)
	slow := buildConvStack(t, dir, "disable", model, "--level", "disable")

	gate := []string{"--remeasure", "--max-latency-regression", "10", "--remeasure-time", "3s"}
	status, stdout, stderr := run(t, append([]string{"diff", a, b}, gate...)...)
	if status != 0 {
		t.Fatalf("same config: status %d: %s\n%s", status, stderr, stdout)
	}
	for _, want := range []string{"remeasure: both builds' artifacts timed again here", "remeasured b1   p50 ", "max-latency-regression model.fp32.onnx batch 1: remeasured p50",
		"max-latency-regression ort/model.ort batch 1: remeasured p50"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("same config: output lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("same config:\n%s", stdout)

	status, stdout, stderr = run(t, append([]string{"diff", a, slow, "--json"}, gate...)...)
	if status != 1 || !strings.Contains(stderr, "max-latency-regression (model.fp32.onnx batch 1): remeasured p50") {
		t.Fatalf("level disable: status %d, stderr %q", status, stderr)
	}
	var d remeasureJSON
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if d.Remeasure == nil || d.Remeasure.Confidence != 0.99 || d.Remeasure.MinRounds != report.MinRounds || d.Remeasure.TimeS != 3 {
		t.Errorf("--json remeasure settings %+v", d.Remeasure)
	}
	seen := 0
	for _, m := range d.Models {
		for _, r := range m.Remeasured {
			seen++
			if r.OldSession.Level != "all" || r.NewSession.Level != "disable" || r.OldSession.Threads != 1 || r.NewSession.Threads != 1 {
				t.Errorf("%s: sessions %+v -> %+v, want each build's own level at 1 thread", m.Name, r.OldSession, r.NewSession)
			}
			// Level disable really runs slower: the session got the level.
			if r.Verdict != report.VerdictFail || r.Ratio.Low <= 1.1 || r.Ratio.Median < 1.3 || r.Rounds < report.MinRounds {
				t.Errorf("%s b%d: %+v, want FAIL with the whole interval past +10%%", m.Name, r.Batch, r)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d remeasured artifacts, want 2 (model.fp32.onnx, ort/model.ort)", seen)
	}
	t.Logf("level disable: %s", stderr)
}

// What --remeasure needs and refuses: build folders with their files,
// p50, a positive time, pass or fail for --undecided; its flags alone.
func TestDiffRemeasureErrors(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	a := buildConvStack(t, dir, "a", convStackFile(t, dir, 8))
	noORT := filepath.Join(dir, "no-ort")
	noManifest := filepath.Join(dir, "no-manifest")
	for _, d := range []string{noORT, noManifest} {
		if err := os.CopyFS(d, os.DirFS(a)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(noORT, "ort", "model.ort"))
	os.Remove(filepath.Join(noManifest, "manifest.json"))
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"diff", a, a, "--remeasure", "--percentile", "p99"}, 2, "--remeasure times the median only: give --percentile p50, not p99"},
		{[]string{"diff", a, a, "--remeasure", "--remeasure-time", "0s"}, 2, "--remeasure-time 0s: want a positive duration"},
		{[]string{"diff", a, a, "--remeasure", "--undecided", "maybe"}, 2, `--undecided "maybe": want pass or fail`},
		{[]string{"diff", a, a, "--undecided", "fail"}, 2, "--undecided is for --remeasure"},
		{[]string{"diff", a, noORT, "--remeasure"}, 1, filepath.Join(noORT, "ort", "model.ort") + ": missing from the build folder (its report.json times it)"},
		{[]string{"diff", noManifest, a, "--remeasure"}, 1, filepath.Join(noManifest, "manifest.json") + ": no such file: --remeasure needs the build folders"},
	} {
		status, stdout, stderr := run(t, tc.args...)
		failsCleanly(t, status, tc.status, stdout, stderr, tc.want)
	}
}
