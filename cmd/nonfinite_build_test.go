package cmd

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// reciprocalModel saves y = 1 / (x @ w) for x [1, 64, 1] and a 1x1 w: in
// float finite wherever x is not 0; in INT8 every |x| below half the
// quantization step rounds to exactly 0 and its reciprocal is Inf.
func reciprocalModel(t *testing.T, path string) {
	t.Helper()
	b := testgraph.New(t, "reciprocal", 13)
	x := b.Input("x", 1, 64, 1)
	h := b.Node("mm", "MatMul", x, b.Floats("w", []int64{1, 1}, 1.5)).Outputs()[0]
	y := b.NodeTo("recip", "Div", b.Value("y"), b.Floats("one", []int64{1}, 1), h).Outputs()[0]
	b.Output(y, 1, 64, 1)
	if err := graph.Save(b.Model, path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// audioLike writes n samples [64, 1] spread over +-3000, none of them 0.
func audioLike(t *testing.T, path string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	writeNpy(t, path, graph.Float, []int64{int64(n), 64, 1}, func(i int) float32 {
		v := rng.Float32()*6000 - 3000
		if i%16 == 0 {
			v = 0.5 + rng.Float32() // small values: 0 in INT8
		}
		return v
	})
}

// A build whose INT8 model is Inf where the float model is finite: the
// accuracy guard refuses it and the build ships FP32 (exit 3); with
// --allow-accuracy-loss it keeps it, flags the artifact in the table and
// the report, does not deploy it, and still exits 3.
func TestBuildNonFiniteINT8IsFlaggedAndNotDeployed(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model, calib, out := filepath.Join(dir, "recip.onnx"), filepath.Join(dir, "calib.npy"), filepath.Join(dir, "out")
	reciprocalModel(t, model)
	audioLike(t, calib, 16)
	args := []string{"build", model, "--int8", "-o", out, "--target", "ort", "--calib-data", calib,
		"--calib-batch", "1", "--eval-batch", "1", "--placement", "all-int8", "--latency-duration", "20ms", "--latency-batches", "1"}
	status, stdout, stderr := run(t, args...)
	if status != ExitRefused || !strings.Contains(stderr, "model.int8.onnx not written") || !strings.Contains(stderr, "NaN/Inf values of y where float is finite") {
		t.Fatalf("without --allow-accuracy-loss: status %d: %s", status, stderr)
	}
	if !strings.Contains(stderr, "no fallback: the model has one weighted layer") {
		t.Errorf("the refusal does not say why no fallback ran: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "model.int8.onnx")); !os.IsNotExist(err) {
		t.Errorf("the refused INT8 model was written")
	}
	out = filepath.Join(dir, "allowed")
	args[4] = out
	status, stdout, stderr = run(t, append(args, "--allow-accuracy-loss")...)
	if status != ExitRefused || !strings.Contains(stderr, "not recommended: model.int8.onnx") {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	t.Logf("\n%s", stdout)
	for _, want := range []string{"NaN/Inf", "NEW!", "NaN/Inf: model.int8.onnx is NaN or infinite where the input model is finite",
		"ort: the INT8 model is NaN/Inf at", "so it is not deployed", "accuracy guard FAILED, kept by allow_accuracy_loss",
		// 16 calibration samples: 12 calibrate, 4 check (held out, thin).
		"warning: checked on only 4 samples (fewer than 32)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	r, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Caveats; c.OnCalibrationData || c.CheckSamples != 4 || c.RandomCalibration {
		t.Errorf("report caveats %+v", c)
	}
	if r.Placement == nil || r.Placement.Recommended != "fp32" || !strings.Contains(r.Placement.Reason, "NaN/Inf") {
		t.Errorf("placement %+v", r.Placement)
	}
	for _, m := range r.Models {
		if m.Name == "ort/model.ort" && m.Precision != "fp32" {
			t.Errorf("the ORT artifact is %s", m.Precision)
		}
	}
	reportMDHas(t, out, "**NaN/Inf: `model.int8.onnx`", "> **warning: checked on only 4 samples", "NOT RECOMMENDED: `model.int8.onnx`")
}

// reportMDHas checks that the report.md in the build folder out says each
// of wants.
func reportMDHas(t *testing.T, out string, wants ...string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

// Ranges from random data: optc quantize, its report and a diff against
// it say so; the guard checks on fresh random draws. Ranges from a file
// too small to hold samples out are checked on those same few samples,
// and that is said too.
func TestQuantizeOnRandomDataWarns(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model, out, rep := filepath.Join(dir, "recip.onnx"), filepath.Join(dir, "int8.onnx"), filepath.Join(dir, "report")
	reciprocalModel(t, model)
	status, stdout, stderr := run(t, "quantize", model, "-o", out, "--calib-data", "random", "--calib-batch", "1",
		"--eval-batch", "1", "--range", "1,2", "--report", rep, "--allow-accuracy-loss")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if want := "warning: calibrated on random data: ranges do not reflect real inputs"; !strings.Contains(stdout, want) {
		t.Errorf("quantize output lacks %q:\n%s", want, stdout)
	}
	r, err := report.Load(rep)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Caveats; !c.RandomCalibration || c.OnCalibrationData || c.CheckSamples != 64 {
		t.Errorf("report caveats %+v, want random calibration checked on 64 fresh draws", c)
	}
	status, stdout, stderr = run(t, "diff", rep, rep)
	if status != 0 || !strings.Contains(stdout, "new: warning: calibrated on random data") {
		t.Errorf("diff: status %d %s\n%s", status, stderr, stdout)
	}

	// Three samples are too few to hold any out (data.MinSplit).
	vals := make([]float32, 3*64)
	for i := range vals {
		vals[i] = 1 + float32(i)/float32(len(vals))
	}
	few, _ := graph.NewFloat32Tensor("x", []int64{3, 64, 1}, vals)
	calib := filepath.Join(dir, "few.npy")
	if err := data.WriteNpy(calib, few); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr = run(t, "quantize", model, "-o", filepath.Join(dir, "few.onnx"), "--calib-data", calib, "--allow-accuracy-loss")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"warning: checked on the calibration samples themselves", "warning: checked on only 3 samples"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("quantize output lacks %q:\n%s", want, stdout)
		}
	}
}
