package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/report/schema"
)

// sample is a small report with every section filled, latencies given as
// the per-run p50 values of each model at batch 1.
func sample(inRuns, artRuns []float64, task, cosine float64) *Report {
	acc := 98.5
	lat := func(runs []float64) *latency.Timing {
		b := latency.BatchTiming{Batch: 1, Latency: latency.Latency{Min: runs[0] * 0.9, P50: latency.Median(runs), P90: latency.Median(runs) * 1.1, P95: latency.Median(runs) * 1.2,
			P99: latency.Median(runs) * 1.5, Max: latency.Median(runs) * 2, Mean: latency.Median(runs), CV: 0.05}, Throughput: 1000 / latency.Median(runs)}
		for _, r := range runs {
			b.Repeats = append(b.Repeats, latency.WindowTiming{P50: r, P90: r * 1.1, P99: r * 1.5, Throughput: 1000 / r})
		}
		return &latency.Timing{ColdStartMs: 12, Batches: []latency.BatchTiming{b}}
	}
	in := &Model{Name: "in/<model>.onnx", Role: "input", Precision: "fp32", Bytes: 4000, Params: 900, Nodes: 10,
		Ops:      []graph.OpCount{{Op: "Conv", Count: 4}, {Op: "BatchNormalization", Count: 4}, {Op: "Relu", Count: 2}},
		Accuracy: &Accuracy{Samples: 100, Task: &acc}, Latency: lat(inRuns)}
	art := &Model{Name: "model.int8.onnx", Role: "artifact", Target: "ort", Precision: "int8", Bytes: 1200, Params: 900, Nodes: 14,
		Ops:      []graph.OpCount{{Op: "Conv", Count: 4}, {Op: "QuantizeLinear", Count: 5}, {Op: "DequantizeLinear", Count: 5}},
		Accuracy: &Accuracy{Samples: 100, Task: &task, Outputs: []OutputAccuracy{{Name: "logits", Cosine: jsonfloat.Float(cosine), SNRdB: 30, MaxAbs: 0.2, MeanAbs: 0.01, Top1Agree: 0.99, Top5Agree: 1}}},
		Latency:  lat(artRuns)}
	art.Delta = delta(in, art)
	return &Report{Schema: Schema, Kind: "build", Input: in.Name, Models: []*Model{in, art},
		Passes:       []Pass{{Name: "fuse-conv-bn", Runs: 2, Removed: 4, Rewritten: 4}},
		Quantization: []*Quantization{{Target: "ort", Model: "model.int8.onnx", Method: "percentile", CalibSamples: 200, Quantized: 4, SQNR: []TensorSQNR{{"a", 21.5}, {"b", 33}, {"c", 40}}}},
		Placement: &schema.Placement{Schema: schema.PlacementVersion, Mode: schema.ModeAuto, Recommended: schema.RecommendFP32,
			Chosen: schema.CandidateAllINT8, Reason: "FP32 (INT8 was 1.70x slower at batch 1)", CPU: "Test CPU", Level: "all",
			Regions:       []schema.Region{{ID: "r0", Op: "Conv", Decision: schema.DecisionFloat}, {ID: "r1", Op: "Conv", Decision: schema.DecisionINT8}},
			Timings:       []schema.PlacementTiming{{Threads: 1, Batch: 1, P50Ms: map[string]float64{schema.CandidateFP32: 1, schema.CandidateAllINT8: 1.7}}},
			SearchSeconds: 4.2, BudgetSeconds: 60},
		Pruning: &Pruning{Methods: []*schema.PruneReport{{Method: "channels:auto", ParamsBefore: 900, ParamsAfter: 600, Layers: []schema.PruneLayer{
			{Node: "conv1", Op: "Conv", Params: 144, Ratio: 0.5, Removed: 8, Refit: "least squares"},
			{Node: "conv0", Op: "Conv", Params: 72, Skipped: "channels:auto: pruned alone at 0.5 it breaks the budget"}}}},
			Data: "eval.npy", Samples: 100, Accuracy: &schema.LabelAccuracy{A: 98.5, B: 98.2, DropPoints: 0.3}, MinCosine: 0.998,
			Latency: &schema.LatencyDelta{Batch: 1, BeforeP50: 1, AfterP50: 0.8}},
		EvalData: "eval.npy", HeldOut: true,
		Environment: Environment{OS: "linux", Arch: "amd64", CPU: "Test CPU", CPUFeatures: []string{"avx2"}, Cores: 2, Level: "all", ORTVersion: "1.24.1"}}
}

var steady = []float64{10, 10.1, 9.9, 10.05, 9.95}

// The schema: written with its version and read back unchanged; other
// versions and files that are not reports are refused by name.
func TestSchemaRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995)
	if err := r.WriteFolder(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.json", "report.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	got, err := Load(dir) // a folder means its report.json
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip changed the report:\n%s\n%s", a, b)
	}
	var raw map[string]any
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["schema"] != float64(Schema) {
		t.Errorf("schema field %v, want %d", raw["schema"], Schema)
	}
	m := raw["models"].([]any)[1].(map[string]any)
	for _, key := range []string{"name", "role", "bytes", "params", "nodes", "ops", "accuracy", "latency", "delta"} {
		if _, ok := m[key]; !ok {
			t.Errorf("model lacks %q: %v", key, m)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`{"schema": 2, "models": [{}]}`, "report schema 2, this optc reads 1"},
		{`{"input": "x"}`, "not an optc report"},
		{`[1, 2]`, "not a report"},
	} {
		p := filepath.Join(t.TempDir(), "report.json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want %q naming the file", tc.body, err, tc.want)
		}
	}
}

func TestDeltasAndMarkdown(t *testing.T) {
	r := sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995)
	d := r.Models[1].Delta
	if d.BytesPercent != -70 || d.Nodes != 4 || *d.AccuracyPoints != -1 || d.Speedup[0].P50 != 2 {
		t.Errorf("delta %+v (speed-up %+v)", d, d.Speedup)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1200 B (-70.0%)", "14 (+4)", "97.50% (-1.00 pt)", "2.00x", "| `a` | 21.5 dB |", "median of 5 runs",
		"ort artifact: FP32 (INT8 was 1.70x slower at batch 1)", "1 of 2 regions int8", "measured in 4.2 s of a 60 s budget", "| 1 | 1 | 1.700 ms | 1.000 ms |",
		"Pruning channels:auto: 1 of 2 layers pruned (refit on the calibration data: 1 least squares); parameters 900 -> 600 (-33.3%)",
		"| `conv1` | Conv | 144 | 0.5 | 8 | 0.0% -> 0.0% | least squares | - |", "pruned alone at 0.5 it breaks the budget",
		"accuracy 98.50% -> 98.20% (drop 0.30 points)", "p50 1.000 ms -> 0.800 ms (0.80x)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
}

// report.html must open offline: no scripts, no external references, every
// chart inline; text from the report is escaped.
func TestHTMLIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := sample(steady, steady, 98, 0.999).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, b.String())
	if !strings.Contains(b.String(), "in/&lt;model&gt;.onnx") {
		t.Error("the model name is not escaped")
	}
}

// A percentile the timing windows were too short for (0 in report.json,
// listed in unreported) is no point in the charts, and no line passes
// through it: a "-" stands in its place, as in the tables.
func TestChartsLeaveOutUnreported(t *testing.T) {
	r := sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 98, 0.999)
	l := &r.Models[1].Latency.Batches[0].Latency
	l.Drop(5) // p90, p95 and p99 need more runs than 5
	if len(l.Unreported) != 3 {
		t.Fatalf("unreported %v", l.Unreported)
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	figure := func(id string) string {
		i := strings.Index(page, `<figure id="`+id+`">`)
		if i < 0 {
			t.Fatalf("no %s chart", id)
		}
		return page[i : i+strings.Index(page[i:], "</figure>")]
	}
	art := regexp.QuoteMeta("model.int8.onnx")
	for _, id := range []string{"latency-percentiles", "p99"} {
		svg := figure(id)
		if regexp.MustCompile(art + `: 0 ms`).MatchString(svg) {
			t.Errorf("%s chart plots an unreported percentile as 0 ms", id)
		}
		want := map[string]int{"latency-percentiles": 3, "p99": 1}[id]
		if got := strings.Count(svg, "model.int8.onnx: - (not reported)"); got != want {
			t.Errorf("%s chart: %d \"-\" marks for the artifact, want %d", id, got, want)
		}
	}
	// The artifact's line in the percentile chart joins min and p50 only.
	if n := len(regexp.MustCompile(`<circle [^>]*><title>`+art+`: `).FindAllString(figure("latency-percentiles"), -1)); n != 2 {
		t.Errorf("the percentile chart has %d points of the artifact, want 2 (min, p50)", n)
	}
	if !strings.Contains(page, "| - |") && !strings.Contains(page, "<td>-</td>") {
		t.Error("the tables do not show the unreported percentiles as -")
	}
}

// checkSelfContained fails when page could fetch anything or lacks a chart.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)https?://`), regexp.MustCompile(`(?i)<script`), regexp.MustCompile(`(?i)<link`),
		regexp.MustCompile(`(?i)<img`), regexp.MustCompile(`(?i)@import`), regexp.MustCompile(`(?i)url\(`),
		regexp.MustCompile(`(?i)<iframe`),
	} {
		if loc := bad.FindStringIndex(page); loc != nil {
			t.Errorf("report.html is not self-contained: %q at %d", page[loc[0]:min(loc[1]+40, len(page))], loc[0])
		}
	}
	for _, id := range []string{"latency-percentiles", "throughput", "p99", "ops"} {
		if !strings.Contains(page, `<figure id="`+id+`"><svg`) {
			t.Errorf("report.html lacks the %s chart", id)
		}
	}
}

func TestGates(t *testing.T) {
	old := sample(steady, steady, 98, 0.9999)
	for _, tc := range []struct {
		name  string
		new   *Report
		gates config.Gates
		fail  []string // gates that must fail, in order
	}{
		{"same", sample(steady, steady, 98, 0.9999),
			config.Gates{MaxAccuracyDrop: 0.5, MinCosine: 0.999, MaxLatencyRegression: 5, MaxSize: 2000}, nil},
		{"accuracy", sample(steady, steady, 90, 0.9999), config.Gates{MaxAccuracyDrop: 0.5}, []string{"max-accuracy-drop"}},
		{"cosine", sample(steady, steady, 98, 0.99), config.Gates{MinCosine: 0.999}, []string{"min-cosine"}},
		{"size", sample(steady, steady, 98, 0.9999), config.Gates{MaxSize: 1000}, []string{"max-size"}},
		// Noisy runs whose median is 8% slower but whose interval reaches
		// below the 5% limit: noise, not a regression.
		{"noisy", sample(steady, []float64{8, 14, 10.8, 7, 13}, 98, 0.9999), config.Gates{MaxLatencyRegression: 5}, nil},
		// Every run 30% slower: a regression.
		{"slower", sample(steady, []float64{13, 13.1, 12.9, 13.05, 12.95}, 98, 0.9999), config.Gates{MaxLatencyRegression: 5},
			[]string{"max-latency-regression"}},
		{"speed-up", sample(steady, steady, 98, 0.9999), config.Gates{MinSpeedup: 1.5}, []string{"min-speedup"}},
	} {
		d := Compare(old, tc.new, tc.gates)
		var failed []string
		for _, g := range d.Failed() {
			failed = append(failed, g.Gate)
		}
		if strings.Join(failed, ",") != strings.Join(tc.fail, ",") {
			var out bytes.Buffer
			d.Write(&out)
			t.Errorf("%s: failed %v, want %v\n%s", tc.name, failed, tc.fail, out.String())
		}
		if len(tc.fail) > 0 && len(d.Gates) == 0 {
			t.Errorf("%s: no gate was checked", tc.name)
		}
	}
}

// The message of a failed gate names both values and the limit.
func TestGateMessageAndDeterminism(t *testing.T) {
	old := sample(steady, steady, 98, 0.9999)
	new := sample(steady, []float64{13, 13.1, 12.9, 13.05, 12.95}, 90, 0.9999)
	g := config.Gates{MaxAccuracyDrop: 1, MaxLatencyRegression: 5, Percentile: "p50"}
	var a, b bytes.Buffer
	if err := Compare(old, new, g).Write(&a); err != nil {
		t.Fatal(err)
	}
	Compare(old, new, g).Write(&b)
	if a.String() != b.String() {
		t.Errorf("two diffs of the same reports differ:\n%s\n%s", a.String(), b.String())
	}
	for _, want := range []string{
		"FAIL max-accuracy-drop model.int8.onnx: task accuracy 98.00% -> 90.00% (-8.00 pt; allowed drop 1 pt)",
		"FAIL max-latency-regression model.int8.onnx batch 1: p50 10.000 -> 13.000 ms: +30.0% [",
		"pass max-accuracy-drop input model",
		"CV ",
	} {
		if !strings.Contains(a.String(), want) {
			t.Errorf("diff output lacks %q:\n%s", want, a.String())
		}
	}
}

// Without labels the accuracy gate cannot be judged, and says so rather
// than passing.
func TestAccuracyGateNeedsLabels(t *testing.T) {
	old, new := sample(steady, steady, 98, 1), sample(steady, steady, 98, 1)
	for _, r := range []*Report{old, new} {
		for _, m := range r.Models {
			m.Accuracy.Task = nil
		}
	}
	f := Compare(old, new, config.Gates{MaxAccuracyDrop: 1}).Failed()
	if len(f) != 1 || !strings.Contains(f[0].Detail, "eval labels") {
		t.Errorf("failed %+v", f)
	}
}

// Chart ticks are round numbers from 0 (or below, for negative values)
// to the first step at or above the largest value.
func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 0.965, "0 0.2 0.4 0.6 0.8 1"},
		{0, 4.64, "0 1 2 3 4 5"},
		{0, 18800, "0 5k 10k 15k 20k"},
		{0, 37600, "0 10k 20k 30k 40k"},
		{0, 4800, "0 1000 2000 3000 4000 5000"},
		{0, 2.4e6, "0 0.5M 1M 1.5M 2M 2.5M"},
		{0, 13.6, "0 5 10 15"},
		{0, 0.00042, "0 1e-4 2e-4 3e-4 4e-4 5e-4"},
		{-3.7, 51.4, "-20 0 20 40 60"},
		{0, 0, "0 0.2 0.4 0.6 0.8 1"},
	} {
		ticks, step := niceTicks(c.lo, c.hi)
		got := tickLabels(ticks, step)
		if strings.Join(got, " ") != c.want {
			t.Errorf("ticks of [%g, %g]: %q, want %q", c.lo, c.hi, strings.Join(got, " "), c.want)
		}
	}
}

// A percentile the timing windows cannot hold is not compared: windows of
// 22 runs report their slowest run as "p99", so the latency gates at p99
// fail and say why, while p50 is compared as before.
func TestGateNeedsRunsForPercentile(t *testing.T) {
	withRuns := func(r *Report, perWindow int) *Report {
		for _, m := range r.Models {
			for i := range m.Latency.Batches {
				b := &m.Latency.Batches[i]
				b.N = perWindow * len(b.Repeats)
			}
		}
		return r
	}
	for _, c := range []struct {
		perWindow  int
		percentile string
		fail       []string
	}{
		{22, "p99", []string{"max-latency-regression", "max-latency-regression", "min-speedup"}},
		{22, "p50", nil},
		{200, "p99", nil},
	} {
		old := withRuns(sample(steady, steady, 98, 0.9999), c.perWindow)
		new := withRuns(sample(steady, []float64{5, 5.1, 4.9, 5.05, 4.95}, 98, 0.9999), c.perWindow)
		d := Compare(old, new, config.Gates{MaxLatencyRegression: 5, MinSpeedup: 1.5, Percentile: c.percentile})
		var failed []string
		for _, g := range d.Failed() {
			failed = append(failed, g.Gate)
		}
		var out bytes.Buffer
		d.Write(&out)
		if strings.Join(failed, ",") != strings.Join(c.fail, ",") {
			t.Errorf("%d runs a window, %s: failed %v, want %v\n%s", c.perWindow, c.percentile, failed, c.fail, out.String())
		}
		if len(c.fail) > 0 && (!strings.Contains(out.String(), "p99 b1    not compared: each timing window at batch 1 held 22 runs in the old report's and 22 runs in the new report's, and p99 needs 100") ||
			!strings.Contains(out.String(), "FAIL min-speedup model.int8.onnx batch 1: each timing window at batch 1 held 22 runs in the input model's and 22 runs in the artifact's")) {
			t.Errorf("%d runs a window, %s: the output does not say why:\n%s", c.perWindow, c.percentile, out.String())
		}
	}
}
