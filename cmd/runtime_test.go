package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// mnistData returns the MNIST test images and labels as .npy files.
func mnistData(t *testing.T) (images, labels string) {
	dir := testenv.Data(t, "mnist")
	images, labels = filepath.Join(dir, "test_images.npy"), filepath.Join(dir, "test_labels.npy")
	testenv.Data(t, "mnist/test_labels.npy")
	return images, labels
}

func TestRunMNISTWritesOutputsAndIntermediates(t *testing.T) {
	ortenv.Require(t)
	images, labels := mnistData(t)
	out := filepath.Join(t.TempDir(), "out")
	status, stdout, stderr := run(t, "run", testenv.Model("mnist_cnn.onnx"), "--data", images, "--batch", "256",
		"-o", out, "--outputs", "/features/features.2/Relu_output_0")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "2004 samples in 8 runs") {
		t.Errorf("output:\n%s", stdout)
	}
	logits, err := data.ReadNpy(filepath.Join(out, "logits.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if len(logits.Dims) != 2 || logits.Dims[0] != 2004 || logits.Dims[1] != 10 {
		t.Fatalf("logits shape %v", logits.Dims)
	}
	lt, err := data.ReadNpy(labels)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lt.Int64s()
	scores, _ := logits.Float32s()
	correct := 0
	for i, label := range want {
		best := 0
		for c := range 10 {
			if scores[i*10+c] > scores[i*10+best] {
				best = c
			}
		}
		if int64(best) == label {
			correct++
		}
	}
	// The training script measured 1978/2004 in PyTorch.
	if correct != 1978 {
		t.Errorf("ORT classifies %d/2004 correctly, PyTorch did 1978", correct)
	}
	relu, err := data.ReadNpy(filepath.Join(out, "_features_features.2_Relu_output_0.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if got := relu.Dims; len(got) != 4 || got[0] != 2004 || got[1] != 16 || got[2] != 28 {
		t.Errorf("intermediate shape %v, want [2004 16 28 28]", got)
	}
	vals, _ := relu.Float32s()
	for _, v := range vals[:10000] {
		if v < 0 {
			t.Fatal("a Relu output is negative")
		}
	}
}

func TestRunBadInputLeavesNoOutput(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// Wrong dtype: int64 labels fed as images.
	_, labels := mnistData(t)
	status, stdout, stderr := run(t, "run", testenv.Model("mnist_cnn.onnx"), "--data", labels, "-o", out)
	failsCleanly(t, status, 1, stdout, stderr, `"input"`)
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed run created the output folder")
	}
	status, stdout, stderr = run(t, "run", testenv.Model("mnist_cnn.onnx"), "-o", out)
	failsCleanly(t, status, 2, stdout, stderr, "--data is required")
	status, stdout, stderr = run(t, "run", testenv.Model("mnist_cnn.onnx"), "--data", "random", "-o", out, "--outputs", "nope")
	failsCleanly(t, status, 1, stdout, stderr, `no value "nope"`)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestCompareSameModelExternalData(t *testing.T) {
	ortenv.Require(t)
	images, labels := mnistData(t)
	ext := filepath.Join(t.TempDir(), "ext.onnx")
	if status, _, stderr := run(t, "convert", testenv.Model("mnist_cnn.onnx"), "-o", ext, "--external-data"); status != 0 {
		t.Fatal(stderr)
	}
	status, stdout, stderr := run(t, "compare", testenv.Model("mnist_cnn.onnx"), ext, "--data", images, "--labels", labels, "--batch", "500", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res compare.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	o := res.Outputs[0]
	if !res.Pass || o.MaxAbs != 0 || o.Top1Agree != 1 || res.Samples != 2004 {
		t.Errorf("identical models differ: %+v", o)
	}
	if res.Accuracy == nil || res.Accuracy.A != res.Accuracy.B || res.Accuracy.A < 98 {
		t.Errorf("accuracy %+v", res.Accuracy)
	}
}

func TestCompareDetectsDifferenceAndSaysWhatWouldPass(t *testing.T) {
	ortenv.Require(t)
	images, labels := mnistData(t)
	// The same network with one BatchNormalization's epsilon raised a
	// thousandfold: a small, real change in what it computes.
	changed := filepath.Join(t.TempDir(), "eps.onnx")
	writeWithEpsilon(t, testenv.Model("mnist_cnn.onnx"), changed, 1e-2)
	status, stdout, stderr := run(t, "compare", testenv.Model("mnist_cnn.onnx"), changed, "--data", images,
		"--labels", labels, "--batch", "500", "--atol", "logits:1e-4")
	failsCleanly(t, status, 1, "", stderr, "out of tolerance: logits")
	if !strings.Contains(stderr, "passes with atol >=") {
		t.Errorf("no smallest passing tolerance in %q", stderr)
	}
	for _, want := range []string{"smallest passing atol", "top-1", "accuracy on 2004 labels"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	status, _, stderr = run(t, "compare", testenv.Model("mnist_cnn.onnx"), changed, "--data", images, "--atol", "10")
	if status != 0 {
		t.Errorf("a loose tolerance still failed: %s", stderr)
	}
	status, _, stderr = run(t, "compare", testenv.Model("mnist_cnn.onnx"), changed, "--data", images, "--atol", "nosuch:1")
	if status != 1 || !strings.Contains(stderr, `"nosuch"`) {
		t.Errorf("unknown output in --atol: status %d, %q", status, stderr)
	}
}

func TestBenchSweep(t *testing.T) {
	ortenv.Require(t)
	status, stdout, stderr := run(t, "bench", testenv.Model("mnist_cnn.onnx"), "--data", "random", "--batch", "1,4",
		"--iterations", "30", "--threads", "1", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Batches) != 2 || res.Batches[1].Batch != 4 || res.Batches[0].Latency.N != 30 {
		t.Fatalf("batches %+v", res.Batches)
	}
	for _, b := range res.Batches {
		l := b.Latency
		if !(l.Min > 0 && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) || b.Throughput <= 0 {
			t.Errorf("batch %d: inconsistent statistics %+v", b.Batch, l)
		}
	}
	if res.ColdStart.SessionCreateMs <= 0 || res.Harness.N != 500 || res.ORTVersion == "" {
		t.Errorf("cold start %+v, harness %+v, ort %q", res.ColdStart, res.Harness, res.ORTVersion)
	}
	status, _, stderr = run(t, "bench", testenv.Model("mnist_cnn.onnx"))
	if status != 2 || !strings.Contains(stderr, "--data is required") {
		t.Errorf("bench without data: status %d %q", status, stderr)
	}
}

// writeWithEpsilon saves a copy of the model at in whose first
// BatchNormalization uses epsilon eps.
func writeWithEpsilon(t *testing.T, in, out string, eps float32) {
	t.Helper()
	saveWithFirstEdited(t, in, out, "BatchNormalization", func(n *graph.Node) {
		n.SetAttr(&graph.Attr{Name: "epsilon", Type: graph.AttrFloat, Float: eps})
	})
}
