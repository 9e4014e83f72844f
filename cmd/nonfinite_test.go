package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// cubeOverSquare saves a model computing y = x*x*x / (x*x), which is x,
// in float32 or, with fp16, with both intermediates stored as float16 (a
// Cast there and back, as an fp16 variant stores its activations): for
// |x| above ~40 the cube overflows float16 to Inf, above ~256 the square
// does too and Inf/Inf is NaN. It is an audio front-end's fp16 variant
// fed +-3000, made for real.
func cubeOverSquare(t *testing.T, path string, fp16 bool) {
	t.Helper()
	b := testgraph.New(t, "cube", 13)
	x := b.Input("x", 1, 2560)
	store := func(name string, v *graph.Value) *graph.Value {
		if !fp16 {
			return v
		}
		c := b.Node(name+"_to16", "Cast", v)
		c.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float16)})
		c = b.Node(name+"_to32", "Cast", c.Outputs()[0])
		c.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float)})
		return c.Outputs()[0]
	}
	sq := store("square", b.Node("square", "Mul", x, x).Outputs()[0])
	cube := store("cube", b.Node("cube", "Mul", sq, x).Outputs()[0])
	b.Output(b.NodeTo("div", "Div", b.Value("y"), cube, sq).Outputs()[0], 1, 2560)
	if err := graph.Save(b.Model, path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cubeOverSquarePair saves cubeOverSquare in float32 (a) and with fp16
// intermediates (b), the pair the compare tests compare.
func cubeOverSquarePair(t *testing.T) (a, b string) {
	t.Helper()
	dir := t.TempDir()
	a, b = filepath.Join(dir, "fp32.onnx"), filepath.Join(dir, "fp16.onnx")
	cubeOverSquare(t, a, false)
	cubeOverSquare(t, b, true)
	return a, b
}

// An fp16 model whose output is all NaN must not read as a perfect match:
// the table counts the NaN, cosine and SNR read n/a, and compare fails.
func TestCompareAllNaNFails(t *testing.T) {
	ortenv.Require(t)
	a, b := cubeOverSquarePair(t)

	status, stdout, stderr := run(t, "compare", a, b, "--data", "random", "--range", "300,3000", "--samples", "1")
	if status != 1 {
		t.Fatalf("status %d, want 1 (stderr %q)\n%s", status, stderr, stdout)
	}
	t.Logf("\n%s%s", stdout, stderr)
	for _, want := range []string{"finite pairs", "0 of 2560", "0/2560", "n/a", "FAIL: NaN/Inf in B",
		"FAIL y: 2560 NaN/Inf values in B where A is finite; statistics over 0 of 2560 finite pairs"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	for _, never := range []string{"1.000000", "+Inf"} {
		if strings.Contains(stdout, never) {
			t.Errorf("table reads %q for an all-NaN output:\n%s", never, stdout)
		}
	}
	if !strings.Contains(stderr, "out of tolerance: y (2560 NaN/Inf values in B where A is finite") {
		t.Errorf("stderr %q", stderr)
	}

	// --json says the same, losslessly.
	status, stdout, _ = run(t, "compare", a, b, "--data", "random", "--range", "300,3000", "--samples", "1", "--json")
	if status != 1 {
		t.Errorf("--json: status %d, want 1", status)
	}
	var res compare.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	o := res.Outputs[0]
	if res.Pass || o.Total != 2560 || o.Elements != 0 || o.NaN.B != 2560 || o.NewNonFinite != 2560 || o.Cosine.Finite() {
		t.Errorf("json: pass %v, %d of %d finite pairs, NaN %+v, cosine %v", res.Pass, o.Elements, o.Total, o.NaN, o.Cosine)
	}
	if !strings.Contains(stdout, `"cosine_similarity": "NaN"`) {
		t.Errorf("cosine not written as \"NaN\":\n%s", stdout)
	}
}

// Partly overflowing: the finite pairs are measured and the table says
// how many they are, and the Inf and NaN in B still fail the comparison
// however loose the tolerance.
func TestComparePartlyInfiniteFails(t *testing.T) {
	ortenv.Require(t)
	a, b := cubeOverSquarePair(t)
	status, stdout, stderr := run(t, "compare", a, b, "--data", "random", "--range", "-3000,3000", "--atol", "1e9", "--json")
	if status != 1 {
		t.Fatalf("status %d, want 1 (stderr %q)\n%s", status, stderr, stdout)
	}
	var res compare.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	o := res.Outputs[0]
	if o.Elements == 0 || o.Elements == o.Total || o.Inf.B == 0 || o.NaN.B == 0 || o.NewNonFinite != o.Total-o.Elements {
		t.Errorf("%d of %d finite pairs, NaN %+v, Inf %+v, new non-finite %d", o.Elements, o.Total, o.NaN, o.Inf, o.NewNonFinite)
	}
	if !o.Cosine.Finite() || o.Cosine < 0.99 {
		t.Errorf("cosine over the finite pairs %v", o.Cosine)
	}
}

// A model whose output is NaN wherever it is run optimizes: the check
// finds the optimized model NaN at the same places, which is no change.
func TestOptimizeKeepsIdenticalNaN(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "log.onnx"), filepath.Join(dir, "opt.onnx")
	b := testgraph.New(t, "log", 13)
	x := b.Input("x", 1, 16)
	// log(x - 5) of x in [0, 1): NaN everywhere; the Add of 0 is folded.
	shifted := b.Node("shift", "Sub", x, b.Floats("five", []int64{1}, 5)).Outputs()[0]
	zero := b.Node("zero", "Add", shifted, b.Floats("z", []int64{1}, 0)).Outputs()[0]
	b.Output(b.NodeTo("log", "Log", b.Value("y"), zero).Outputs()[0], 1, 16)
	if err := graph.Save(b.Model, in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := run(t, "optimize", in, "-o", out)
	if status != 0 {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	if !strings.Contains(stdout, "y: NaN/Inf at the same places in both models and finite nowhere") {
		t.Errorf("output does not say the check had nothing finite:\n%s", stdout)
	}
}
