package cmd

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

func TestLintFlags(t *testing.T) {
	var got *LintOptions
	c := newCmdLint(StdIO(), func(o *LintOptions) error { got = o; return nil })
	c.SetArgs([]string{"--target", "tensorrt", "--json", "m.onnx"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Model != "m.onnx" || got.Target != "tensorrt" || !got.JSON {
		t.Errorf("parsed %+v", got)
	}
	status, stdout, stderr := run(t, "lint", "m.onnx")
	failsCleanly(t, status, 2, stdout, stderr, "--target")
	status, stdout, stderr = run(t, "lint", "--target", "ort-gpu", "m.onnx")
	failsCleanly(t, status, 2, stdout, stderr, "want tensorrt")
	status, stdout, stderr = run(t, "lint", "--target", "tensorrt", filepath.Join(t.TempDir(), "missing.onnx"))
	failsCleanly(t, status, 1, stdout, stderr, "missing.onnx")
}

// qdqModel saves x -> QuantizeLinear -> DequantizeLinear -> y with the
// given zero point type and value.
func qdqModel(t *testing.T, zp graph.DataType, zpVal byte) string {
	t.Helper()
	g := graph.NewGraph("qdq")
	val := func(name string) *graph.Value {
		v, err := g.NewValue(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	init := func(name string, dt graph.DataType, data []byte) *graph.Value {
		tt, err := graph.NewTensor(name, dt, nil, data)
		if err != nil {
			t.Fatal(err)
		}
		v, err := g.AddInitializer(tt)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x, q, y := val("x"), val("x_q"), val("y")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 4))
	y.Type = x.Type
	s := init("s", graph.Float, binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5)))
	z := init("z", zp, []byte{zpVal})
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	for _, n := range []struct {
		op      string
		in, out *graph.Value
	}{{"QuantizeLinear", x, q}, {"DequantizeLinear", q, y}} {
		node, err := g.AddNode(n.op, []*graph.Value{n.in, s, z}, []*graph.Value{n.out})
		if err != nil {
			t.Fatal(err)
		}
		node.Name = n.op
	}
	path := filepath.Join(t.TempDir(), "qdq.onnx")
	if err := graph.Save(&graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 13}}, Graph: g}, path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLintTensorRT(t *testing.T) {
	clean := qdqModel(t, graph.Int8, 0)
	status, stdout, stderr := run(t, "lint", "--target", "tensorrt", clean)
	if status != 0 || stderr != "" || !strings.Contains(stdout, "no findings") {
		t.Errorf("clean model: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}

	bad := qdqModel(t, graph.Uint8, 128)
	status, stdout, stderr = run(t, "lint", "--target", "tensorrt", bad)
	if status != 1 || !strings.Contains(stderr, "4 errors") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("uint8 model: status %d, stderr %q", status, stderr)
	}
	for _, want := range []string{"severity", "qdq-type", "qdq-zero-point", "QuantizeLinear", "DequantizeLinear", "4 errors, 0 warnings"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}

	status, stdout, _ = run(t, "lint", "--target", "tensorrt", "--json", bad)
	var res struct {
		Errors   int `json:"errors"`
		Findings []struct {
			Rule, Severity, Node, Message string
		} `json:"findings"`
	}
	decode(t, stdout, &res)
	if status != 1 || res.Errors != 4 || len(res.Findings) != 4 || res.Findings[0].Rule != "qdq-type" || res.Findings[0].Node != "DequantizeLinear" || res.Findings[0].Message == "" {
		t.Errorf("JSON: status %d, %+v", status, res)
	}
	status, stdout, _ = run(t, "lint", "--target", "tensorrt", "--json", clean)
	decode(t, stdout, &res)
	if status != 0 || res.Errors != 0 || res.Findings == nil || len(res.Findings) != 0 {
		t.Errorf("JSON of the clean model: status %d, %s", status, stdout)
	}
}

// TestLintQuantizedMNIST: what `optc quantize --target tensorrt` writes
// passes `optc lint --target tensorrt` (warnings allowed, no errors); the
// ort artifact does not.
func TestLintQuantizedMNIST(t *testing.T) {
	ortenv.Require(t)
	train := testenv.Data(t, "mnist/train_images.npy")
	for _, c := range []struct {
		target string
		status int
	}{{"tensorrt", 0}, {"ort", 1}} {
		out := filepath.Join(t.TempDir(), c.target+".onnx")
		run2json(t, "quantize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--target", c.target,
			"--calib-data", train, "--calib-samples", "128", "--json")
		status, stdout, stderr := run(t, "lint", "--target", "tensorrt", out)
		if status != c.status {
			t.Errorf("%s artifact: lint status %d, want %d\n%s%s", c.target, status, c.status, stdout, stderr)
		}
	}
}

// TestLintQuantizedPaddleOCRCls: the tensorrt artifact of the PaddleOCR
// direction classifier (MobileNetV3: depthwise convs, HardSwish, residual
// Adds of two conv outputs) has no findings.
func TestLintQuantizedPaddleOCRCls(t *testing.T) {
	ortenv.Require(t)
	calib := testenv.Data(t, "textlines/cls_calib.npy")
	model := filepath.Join(testenv.Data(t, "ocr-models"), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	out := filepath.Join(t.TempDir(), "cls_trt.onnx")
	// Labelled eval data, as a user with labels gives it: the guard holds
	// at once, so the layer-by-layer fallback (what TestGuardPaddleOCRCls
	// covers, 5x the CPU time) does not run here.
	run2json(t, "quantize", model, "-o", out, "--target", "tensorrt", "--calib-data", calib,
		"--calib-samples", "64", "--eval-data", testenv.Data(t, "textlines/cls_images.npy"),
		"--eval-labels", testenv.Data(t, "textlines/cls_labels.npy"), "--eval-samples", "200",
		"--shape", "x:1,3,48,192", "--json")
	status, stdout, stderr := run(t, "lint", "--target", "tensorrt", "--json", out)
	var res struct {
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
	}
	decode(t, stdout, &res)
	t.Logf("lint: %d errors, %d warnings", res.Errors, res.Warnings)
	if status != 0 || res.Errors != 0 || res.Warnings != 0 {
		t.Errorf("status %d, %d errors: %s%s", status, res.Errors, stdout, stderr)
	}
}
