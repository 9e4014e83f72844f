package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/remeasure"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
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
	if d.Remeasure == nil || d.Remeasure.Confidence != 0.99 || d.Remeasure.MinRounds != remeasure.MinRounds || d.Remeasure.TimeS != 3 {
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
			if r.Verdict != report.VerdictFail || r.Ratio.Low <= 1.1 || r.Ratio.Median < 1.3 || r.Rounds < remeasure.MinRounds {
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
	failAllCleanly(t, []failCase{
		{[]string{"diff", a, a, "--remeasure", "--percentile", "p99"}, 2, "--remeasure times the median only: give --percentile p50, not p99"},
		{[]string{"diff", a, a, "--remeasure", "--remeasure-time", "0s"}, 2, "--remeasure-time 0s: want a positive duration"},
		{[]string{"diff", a, a, "--remeasure", "--undecided", "maybe"}, 2, `--undecided "maybe": want pass or fail`},
		{[]string{"diff", a, a, "--undecided", "fail"}, 2, "--undecided is for --remeasure"},
		{[]string{"diff", a, noORT, "--remeasure"}, 1, filepath.Join(noORT, "ort", "model.ort") + ": missing from the build folder (its report.json times it)"},
		{[]string{"diff", noManifest, a, "--remeasure"}, 1, filepath.Join(noManifest, "manifest.json") + ": no such file: --remeasure needs the build folders"},
	})
}

// TestGateRates measures optc diff --remeasure's false-alarm and
// detection rates against a 10% gate (make gate-rates; docs/ci.md has
// the table): $OPTC_GATE_RATES times, a conv stack of 7 convolutions is
// built while every core is kept busy (A), and again on a quiet machine
// (B), at ORT level disable (C: about 1.7x slower), with one convolution
// more (D: an eighth conv, a seventh more work; the ratio measured is
// printed) and under load again (E); then A is diffed against B, C and
// D, and B against E (a loaded NEW build, which makes the recorded runs
// look slower), with --remeasure ($OPTC_GATE_RATES_TIME each, default
// 20s) and, for comparison, without (the builds' recorded runs). It
// prints the verdicts' counts and the median rounds, time and ratio of
// each case.
func TestGateRates(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("OPTC_GATE_RATES"))
	if n <= 0 {
		t.Skip("OPTC_GATE_RATES is not set: make gate-rates runs this (N rounds of 4 builds and 3 remeasured diffs; minutes, on a quiet machine)")
	}
	ortenv.Require(t)
	limit := os.Getenv("OPTC_GATE_RATES_TIME")
	if limit == "" {
		limit = "20s"
	}
	dir := t.TempDir()
	base, deeper := convStackFile(t, dir, 7), convStackFile(t, dir, 8)
	type tally struct {
		name                    string
		verdicts, recorded      map[string]int
		rounds, seconds, ratios []float64
	}
	cases := []*tally{{name: "same config, OLD built under load"}, {name: "same config, NEW built under load"},
		{name: "NEW at ORT level disable"}, {name: "NEW with one conv more"}}
	for _, c := range cases {
		c.verdicts, c.recorded = map[string]int{}, map[string]int{}
	}
	for i := range n {
		// Timed as a build times by default (latency.duration 1s), so that
		// the recorded runs' verdicts beside are what a CI build gets.
		build := func(name, model string, loaded bool, extra ...string) string {
			if loaded {
				defer busy()()
			}
			return buildConvStack(t, dir, name, model, append([]string{"--latency-duration", "1s"}, extra...)...)
		}
		a, b, e := build("a", base, true), build("b", base, false), build("e", base, true)
		pairs := [][2]string{{a, b}, {b, e}, {a, build("c", base, false, "--level", "disable")}, {a, build("d", deeper, false)}}
		for k, c := range cases {
			status, stdout, stderr := run(t, "diff", pairs[k][0], pairs[k][1], "--json", "--remeasure", "--max-latency-regression", "10", "--remeasure-time", limit)
			var d remeasureJSON
			if status > 1 || json.Unmarshal([]byte(stdout), &d) != nil {
				t.Fatalf("round %d, %s: status %d: %s", i+1, c.name, status, stderr)
			}
			for _, m := range d.Models {
				for _, r := range m.Remeasured {
					c.verdicts[r.Verdict]++
					c.rounds = append(c.rounds, float64(r.Rounds))
					c.seconds = append(c.seconds, r.Seconds)
					c.ratios = append(c.ratios, r.Ratio.Median)
				}
			}
			status, stdout, _ = run(t, "diff", pairs[k][0], pairs[k][1], "--json", "--max-latency-regression", "10")
			var rec remeasureJSON
			if status > 1 || json.Unmarshal([]byte(stdout), &rec) != nil {
				t.Fatalf("round %d, %s, recorded: status %d", i+1, c.name, status)
			}
			for _, g := range rec.Gates {
				if g.Gate == "max-latency-regression" && g.Model != "input model batch 1" {
					c.recorded[map[bool]string{true: "pass", false: "FAIL"}[g.Pass]]++
				}
			}
		}
		t.Logf("round %d of %d done", i+1, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gate rates: %d rounds; conv stack of 7 (8) 3x3 convs at 32 channels on 16x16, 1 thread, batch 1; gate +10%%, --remeasure-time %s; 2 artifacts a diff\n", n, limit)
	fmt.Fprintf(&b, "%-36s %5s %5s %5s %9s %8s %8s %8s   %s\n", "case", "gates", "pass", "FAIL", "undecided", "rounds", "seconds", "ratio", "recorded runs: pass/FAIL")
	for _, c := range cases {
		fmt.Fprintf(&b, "%-36s %5d %5d %5d %9d %8.0f %8.2f %8.3f   %d/%d\n", c.name, len(c.rounds), c.verdicts["pass"], c.verdicts["FAIL"], c.verdicts["undecided"],
			latency.Median(c.rounds), latency.Median(c.seconds), latency.Median(c.ratios), c.recorded["pass"], c.recorded["FAIL"])
	}
	fmt.Fprintf(&b, "(rounds, seconds and ratio: medians over the gates)\n")
	fmt.Print(b.String())
}

// busy keeps every core spinning until the returned function is called.
func busy() (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := 0; !done.Load(); x++ {
			}
		}()
	}
	return func() { done.Store(true); wg.Wait() }
}
