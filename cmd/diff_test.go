package cmd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// damageFirstConv writes a copy of src whose first Conv has its weights
// multiplied by scale: a model that still runs but computes something else.
func damageFirstConv(t *testing.T, src, dst string, scale float32) {
	t.Helper()
	saveWithFirstEdited(t, src, dst, "Conv", func(n *graph.Node) {
		w := n.Input(1)
		vals, err := w.ConstantTensor().Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			vals[i] *= scale
		}
		damaged, err := graph.NewFloat32Tensor(w.ConstantTensor().Name, w.ConstantTensor().Dims, vals)
		if err != nil {
			t.Fatal(err)
		}
		if w.Const != nil {
			w.Const = damaged
		} else {
			w.Producer().SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: damaged})
		}
	})
}

// saveWithFirstEdited writes a copy of the model at src to dst in which
// edit has changed the first node of type op; the test fails when src
// has none. The tests that need a model slightly off another make it so.
func saveWithFirstEdited(t *testing.T, src, dst, op string, edit func(n *graph.Node)) {
	t.Helper()
	m, err := graph.LoadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	i := slices.IndexFunc(m.Graph.Nodes, func(n *graph.Node) bool { return n.OpType == op })
	if i < 0 {
		t.Fatalf("%s has no %s", src, op)
	}
	edit(m.Graph.Nodes[i])
	if err := graph.Save(m, dst, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Two builds of the same model pass optc diff's accuracy, cosine and size
// gates; a build of a copy with one damaged conv fails the accuracy gate,
// and the message names the gate and both accuracies. Latency gates are
// exercised on fixed reports in the report package (timings here would
// make the test depend on the machine's load).
func TestDiffBuilds(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model := testenv.Model("mnist_cnn.onnx")
	damaged := filepath.Join(dir, "damaged.onnx")
	damageFirstConv(t, model, damaged, -1)
	mnist := "../testdata/mnist"
	build := func(name, model string, extra ...string) string {
		out := filepath.Join(dir, name)
		status, _, stderr := run(t, append([]string{"build", model, "-o", out, "--image-color", "gray", "--image-scale", "0.00392156862745098",
			"--eval-data", mnist + "/eval", "--eval-labels", mnist + "/eval_labels.npy", "--eval-samples", "200",
			"--latency-batches", "1", "--latency-duration", "50ms"}, extra...)...)
		if status != 0 {
			t.Fatalf("build %s: %s", name, stderr)
		}
		for _, f := range []string{"report.json", "report.md", "report.html"} {
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Error(err)
			}
		}
		return out
	}
	a, b, bad := build("a", model), build("b", model, "--threads", "1"), build("bad", damaged)
	page, err := os.ReadFile(filepath.Join(a, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"http://", "https://", "<script", "<link"} {
		if strings.Contains(string(page), ref) {
			t.Errorf("a build's report.html holds %q", ref)
		}
	}

	gates := []string{"--max-accuracy-drop", "0.5", "--min-cosine", "0.9999", "--max-size", "1000000"}
	status, stdout, stderr := run(t, append([]string{"diff", a, filepath.Join(b, "report.json")}, gates...)...)
	if status != 0 {
		t.Fatalf("same model: status %d: %s\n%s", status, stderr, stdout)
	}
	// What changed between the builds comes first: the option, and the
	// input model's content when it changed.
	for _, want := range []string{"changed (options, inputs, versions, decisions):\n  runtime.threads  0 -> 1\n\n",
		"pass max-accuracy-drop model.fp32.onnx", "pass min-cosine", "pass max-size", "p50 b1", " runs (CV "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff output lacks %q:\n%s", want, stdout)
		}
	}

	status, stdout, stderr = run(t, append([]string{"diff", a, bad}, gates...)...)
	// The comparison is printed; the error names each failed gate on one line.
	if status != 1 || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "max-accuracy-drop (model.fp32.onnx): task accuracy 98.50% -> ") {
		t.Errorf("damaged model: status %d, stderr %q", status, stderr)
	}
	if !strings.Contains(stdout, "FAIL max-accuracy-drop input model") || !strings.Contains(stdout, "  input model  sha256 ") ||
		!strings.Contains(stdout, "  model        "+model+" -> "+damaged+"\n") {
		t.Errorf("diff output:\n%s", stdout)
	}
	t.Logf("%s", stderr)
}

func TestDiffUsage(t *testing.T) {
	dir := t.TempDir()
	notReport := filepath.Join(dir, "x.json")
	os.WriteFile(notReport, []byte(`{"input": "m.onnx"}`), 0o644)
	cfg := filepath.Join(dir, "optc.yaml")
	os.WriteFile(cfg, []byte("gates: {percentile: p95}\n"), 0o644)
	failAllCleanly(t, []failCase{
		{[]string{"diff", "a"}, 2, "expects two reports"},
		{[]string{"diff", "a", "b", "--percentile", "p42"}, 2, `gates.percentile: "p42"`},
		{[]string{"diff", "a", "b", "--min-cosine", "1.5"}, 2, "gates.min_cosine"},
		{[]string{"diff", notReport, notReport}, 1, "not an optc report"},
		{[]string{"diff", filepath.Join(dir, "none"), notReport}, 1, "none"},
		{[]string{"diff", "a", "b", "--config", cfg}, 1, "gates.percentile"},
	})
}

// quantize and bench write the same report as a build with --report.
func TestReportFlag(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	mnist := "../testdata/mnist"
	model := testenv.Model("mnist_cnn.onnx")
	q, b := filepath.Join(dir, "q"), filepath.Join(dir, "b")
	status, _, stderr := run(t, "quantize", model, "-o", filepath.Join(dir, "m.int8.onnx"), "--report", q,
		"--calib-data", mnist+"/calib", "--eval-data", mnist+"/eval", "--eval-labels", mnist+"/eval_labels.npy",
		"--image-color", "gray", "--image-scale", "0.00392156862745098")
	if status != 0 {
		t.Fatalf("quantize: %s", stderr)
	}
	status, _, stderr = run(t, "bench", model, "--data", "random", "--batch", "1,4", "--duration", "50ms", "--report", b)
	if status != 0 {
		t.Fatalf("bench: %s", stderr)
	}
	for _, tc := range []struct {
		dir, kind string
		models    int
	}{{q, "quantize", 2}, {b, "bench", 1}} {
		r, err := report.Load(tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != tc.kind || len(r.Models) != tc.models || r.Models[0].Nodes == 0 || r.Environment.ORTVersion == "" {
			t.Errorf("%s report: kind %q, %d models, input nodes %d, ORT %q", tc.kind, r.Kind, len(r.Models), r.Models[0].Nodes, r.Environment.ORTVersion)
		}
		if tc.kind == "quantize" && (len(r.Quantization) != 1 || len(r.Quantization[0].SQNR) == 0 || r.Models[1].Accuracy.Task == nil) {
			t.Errorf("quantize report lacks SQNR or accuracy: %+v", r.Quantization)
		}
		if tc.kind == "bench" && len(r.Models[0].Latency.Batches) != 2 {
			t.Errorf("bench report latency %+v", r.Models[0].Latency)
		}
		if _, err := os.Stat(filepath.Join(tc.dir, "report.html")); err != nil {
			t.Error(err)
		}
	}
}
