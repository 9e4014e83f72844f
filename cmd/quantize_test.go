package cmd

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// TestQuantizeMNIST is the acceptance check of INT8 on the MNIST CNN:
// top-1 within 0.5 points of float on the held-out digits, at ORT level
// all; the calibration cache is written, then reused with the same result.
func TestQuantizeMNIST(t *testing.T) {
	ortenv.Require(t)
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "calib.json")
	args := func(out string) []string {
		return append(mnistINT8Args(t, "quantize", out, "512"), "--calib-cache", cache)
	}
	first := filepath.Join(tmp, "q1.onnx")
	var res struct {
		Calibration struct {
			FromCache bool `json:"from_cache"`
		}
		Accuracy int8AccuracyJSON
		HeldOut  bool `json:"eval_data_held_out"`
		SQNR     []struct {
			Tensor string  `json:"tensor"`
			DB     float64 `json:"sqnr_db"`
		} `json:"tensor_sqnr"`
	}
	decode(t, run2json(t, append(args(first), "--json")...), &res)
	if len(res.SQNR) < 4 {
		t.Errorf("per-tensor SQNR for %d tensors", len(res.SQNR))
	}
	for i, s := range res.SQNR {
		if s.DB < 20 || i > 0 && s.DB < res.SQNR[i-1].DB {
			t.Errorf("SQNR %v: below 20 dB or not worst first", res.SQNR)
			break
		}
	}
	acc := res.Accuracy.Accuracy
	if acc.A < 98 || acc.A-acc.B > 0.5 || !res.HeldOut || res.Calibration.FromCache {
		t.Errorf("float %.2f%%, int8 %.2f%%, held out %v, from cache %v", acc.A, acc.B, res.HeldOut, res.Calibration.FromCache)
	}
	second := filepath.Join(tmp, "q2.onnx")
	decode(t, run2json(t, append(args(second), "--json")...), &res)
	if !res.Calibration.FromCache {
		t.Error("the calibration cache was not reused")
	}
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Error("the same model and ranges gave different INT8 bytes")
	}
	// The target's former spelling still works, says so, and means ort.
	third := filepath.Join(tmp, "q3.onnx")
	status, _, stderr := run(t, append(args(third), "--target", "ort-cpu")...)
	c, _ := os.ReadFile(third)
	if status != 0 || !strings.Contains(stderr, "--target ort-cpu is deprecated: the target is now spelled ort") || !bytes.Equal(a, c) {
		t.Errorf("--target ort-cpu: status %d, same bytes as ort %v, stderr %q", status, bytes.Equal(a, c), stderr)
	}
	if testgraph.OpCounts(testgraph.LoadFile(t, first).Graph)["QuantizeLinear"] == 0 {
		t.Error("no QuantizeLinear in the INT8 model")
	}
}

func TestQuantizeBadInput(t *testing.T) {
	ortenv.Require(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "q.onnx")
	// NaN in the calibration data.
	vals := make([]float32, 4*28*28)
	vals[100] = float32(math.NaN())
	nanT, _ := graph.NewFloat32Tensor("input", []int64{4, 1, 28, 28}, vals)
	nanFile := filepath.Join(tmp, "nan.npy")
	if err := data.WriteNpy(nanFile, nanT); err != nil {
		t.Fatal(err)
	}
	// A cache made for another model.
	otherCache := filepath.Join(tmp, "other.json")
	os.WriteFile(otherCache, []byte(`{"version":1,"model":"00","data":"00","samples":1,"method":"entropy","tensors":[{"name":"x","min":0,"max":1}]}`+"\n"), 0o644)
	// A model with nothing to quantize.
	relu := filepath.Join(tmp, "relu.onnx")
	g := graph.NewGraph("relu")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 4))
	y.Type = x.Type
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	g.AddNode("Relu", []*graph.Value{x}, []*graph.Value{y})
	if err := graph.Save(&graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g}, relu, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"NaN", []string{testenv.Model("mnist_cnn.onnx"), "-o", out, "--calib-data", nanFile}, "NaN"},
		{"wrong data", []string{testenv.Model("mnist_cnn.onnx"), "-o", out, "--calib-data", filepath.Join(testenv.Data(t, "mnist"), "test_labels.npy")}, `"input"`},
		{"cache of another model", []string{testenv.Model("mnist_cnn.onnx"), "-o", out, "--calib-cache", otherCache}, "another model"},
		{"nothing to quantize", []string{relu, "-o", out, "--calib-data", "random", "--calib-batch", "1"}, "no operator was quantized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, stdout, stderr := run(t, append([]string{"quantize"}, c.args...)...)
			failsCleanly(t, status, 1, stdout, stderr, c.want)
			if _, err := os.Stat(out); err == nil {
				t.Error("a failed quantize wrote its output")
			}
		})
	}
}

// run2json runs optc and returns stdout, failing the test on a non-zero
// status.
func run2json(t *testing.T, args ...string) string {
	t.Helper()
	status, stdout, stderr := run(t, args...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	return stdout
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
}

// mnistINT8Args is `optc quantize` or `optc build` (command) of the MNIST
// CNN into out, calibrated on samples of the training digits and checked
// on the held-out digits with their labels: the start of the command line
// of the MNIST INT8 tests.
func mnistINT8Args(t *testing.T, command, out, samples string) []string {
	images, labels := mnistData(t)
	return []string{command, testenv.Model("mnist_cnn.onnx"), "-o", out,
		"--calib-data", testenv.Data(t, "mnist/train_images.npy"), "--calib-samples", samples,
		"--eval-data", images, "--eval-labels", labels}
}

// int8AccuracyJSON is the accuracy section of quantize's --json as the
// MNIST tests read it: top-1 of the float model (A) and of the INT8 one
// (B), in percent.
type int8AccuracyJSON struct {
	Accuracy struct {
		A float64 `json:"accuracy_a"`
		B float64 `json:"accuracy_b"`
	} `json:"accuracy"`
}

// TestQuantizeQOperator: --format qoperator writes the MNIST CNN's convs as
// QLinearConv (the Gemm stays QDQ, its output is the float logits) and
// keeps INT8 accuracy; a wrong format is a usage error.
func TestQuantizeQOperator(t *testing.T) {
	ortenv.Require(t)
	out := filepath.Join(t.TempDir(), "q.onnx")
	var res struct {
		Quantize struct {
			Format    string `json:"format"`
			QOperator struct {
				QLinearConv int `json:"qlinear_conv"`
				KeptQDQ     []struct {
					Op string `json:"op"`
				} `json:"kept_qdq"`
			} `json:"qoperator"`
		} `json:"quantize"`
		Accuracy int8AccuracyJSON
	}
	decode(t, run2json(t, append(mnistINT8Args(t, "quantize", out, "256"), "--format", "qoperator", "--json")...), &res)
	q := res.Quantize
	if q.Format != "qoperator" || q.QOperator.QLinearConv != 3 || len(q.QOperator.KeptQDQ) != 1 || q.QOperator.KeptQDQ[0].Op != "Gemm" {
		t.Errorf("quantize report %+v", q)
	}
	if acc := res.Accuracy.Accuracy; acc.A-acc.B > 0.5 {
		t.Errorf("float %.2f%%, qoperator int8 %.2f%%", acc.A, acc.B)
	}
	ops := testgraph.OpCounts(testgraph.LoadFile(t, out).Graph)
	if ops["QLinearConv"] != 3 || ops["Conv"] != 0 || ops["Relu"] != 0 {
		t.Errorf("written model ops %v", ops)
	}
	status, stdout, stderr := run(t, "quantize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--format", "qlinear", "--calib-data", "random")
	failsCleanly(t, status, 2, stdout, stderr, `--format: "qlinear"`)
}

// TestQuantizeFallsBack: with a criterion the full INT8 model misses, the
// most sensitive layer (the one whose float measures best, the rest
// INT8) falls back to float and the criterion then holds.
func TestQuantizeFallsBack(t *testing.T) {
	ortenv.Require(t)
	dir := testenv.Data(t, "mnist")
	testenv.Data(t, "mnist/train_images.npy")
	var res struct {
		FellBack    []string `json:"fell_back"`
		Sensitivity []struct {
			Node      string  `json:"node"`
			MinCosine float64 `json:"min_cosine"`
		} `json:"sensitivity"`
		Accuracy struct {
			Outputs []struct {
				RelError float64 `json:"rel_error"`
			} `json:"outputs"`
		} `json:"accuracy"`
	}
	decode(t, run2json(t, "quantize", testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(t.TempDir(), "q.onnx"),
		"--calib-data", filepath.Join(dir, "train_images.npy"), "--calib-samples", "512", "--method", "entropy",
		"--max-rel-error", "0.02", "--eval-data", filepath.Join(dir, "test_images.npy"), "--json"), &res)
	if len(res.Sensitivity) != 4 || len(res.FellBack) == 0 {
		t.Fatalf("sensitivity %+v, fell back %v", res.Sensitivity, res.FellBack)
	}
	// The most sensitive layer is the one whose float measures best.
	most := res.Sensitivity[0]
	for _, s := range res.Sensitivity {
		if s.MinCosine > most.MinCosine {
			most = s
		}
	}
	if res.FellBack[0] != most.Node || res.Accuracy.Outputs[0].RelError > 0.02 {
		t.Errorf("fell back %v (most sensitive %s), relative error %.5f", res.FellBack, most.Node, res.Accuracy.Outputs[0].RelError)
	}
	status, stdout, stderr := run(t, "quantize", testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(t.TempDir(), "q.onnx"),
		"--calib-data", filepath.Join(dir, "train_images.npy"), "--max-accuracy-drop", "0.5")
	failsCleanly(t, status, 2, stdout, stderr, "needs --eval-labels") // a missing flag: usage
}

// TestQuantizePaddleOCRCls is the acceptance check on the PaddleOCR
// text-direction classifier (opset 9, upgraded to 13 on the way):
// calibrated on 200 rendered text lines, measured on 1,000 others, INT8
// agrees with float on at least 99% of the lines with cosine >= 0.999.
func TestQuantizePaddleOCRCls(t *testing.T) {
	ortenv.Require(t)
	tl := testenv.Data(t, "textlines/cls_labels.npy")
	dir := filepath.Dir(tl)
	model := filepath.Join(testenv.Data(t, "ocr-models"), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	var res struct {
		Accuracy struct {
			Outputs []struct {
				Cosine    float64 `json:"cosine_similarity"`
				Top1Agree float64 `json:"top1_agreement"`
			} `json:"outputs"`
			Accuracy struct {
				A float64 `json:"accuracy_a"`
				B float64 `json:"accuracy_b"`
			} `json:"accuracy"`
		} `json:"accuracy"`
		UpgradedOpset int `json:"upgraded_opset_nodes"`
	}
	decode(t, run2json(t, "quantize", model, "-o", filepath.Join(t.TempDir(), "cls.int8.onnx"),
		"--calib-data", filepath.Join(dir, "cls_calib.npy"), "--eval-data", filepath.Join(dir, "cls_images.npy"),
		"--eval-labels", tl, "--shape", "x:1,3,48,192", "--json"), &res)
	o := res.Accuracy.Outputs[0]
	t.Logf("float %.2f%%, int8 %.2f%%, agreement %.2f%%, cosine %.5f, %d nodes upgraded to opset 13",
		res.Accuracy.Accuracy.A, res.Accuracy.Accuracy.B, 100*o.Top1Agree, o.Cosine, res.UpgradedOpset)
	if o.Top1Agree < 0.99 || o.Cosine < 0.999 || res.UpgradedOpset == 0 {
		t.Errorf("agreement %.4f (want >= 0.99), cosine %.5f (want >= 0.999), upgraded %d nodes", o.Top1Agree, o.Cosine, res.UpgradedOpset)
	}
}

// TestQuantizeProgress: optc quantize says what it is doing on stderr, a
// line per step as build does (on a terminal and in a CI log alike), and
// nothing with --quiet.
func TestQuantizeProgress(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	args := mnistINT8Args(t, "quantize", filepath.Join(dir, "q.onnx"), "64")
	var out, errOut, progress bytes.Buffer
	if status := Main(args, &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Progress: &progress}); status != 0 {
		t.Fatalf("status %d: %s", status, errOut.String())
	}
	for _, want := range []string{"quantize: checking the INT8 model against float on ", "quantize: per-tensor SQNR on "} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("no %q line:\n%s", want, progress.String())
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
		if !strings.HasPrefix(l, "quantize: ") {
			t.Errorf("a progress line %q", l)
		}
	}
	progress.Reset()
	os.Remove(filepath.Join(dir, "q.onnx"))
	if status := Main(append(args, "-q"), &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Progress: &progress}); status != 0 || progress.Len() > 0 {
		t.Errorf("--quiet: status %d, progress %q", status, progress.String())
	}
}

// TestQuantizeBudget: optc quantize --budget stops calibration at 30% of
// the budget (on a batch boundary, after at least 16 samples) and says
// where in --json; a negative budget is a usage error, and --dynamic,
// which calibrates nothing, takes none.
func TestQuantizeBudget(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Data(t, "mnist")
	dir := t.TempDir()
	status, stdout, stderr := run(t, "quantize", testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(dir, "q.onnx"),
		"--calib-data", filepath.Join(mnist, "train_images.npy"), "--calib-samples", "7000", "--calib-batch", "16",
		"--eval-data", filepath.Join(mnist, "test_images.npy"), "--budget", "300ms", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res struct {
		StoppedAt   map[string]int `json:"stopped_at"`
		Calibration struct {
			Samples int  `json:"samples"`
			Stopped bool `json:"stopped_by_budget"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	n := res.StoppedAt["calibration samples"]
	if !res.Calibration.Stopped || n != res.Calibration.Samples || n < 16 || n >= 7000 || n%16 != 0 {
		t.Errorf("calibration %+v, stopped at %v: want it stopped by the budget on a batch of 16", res.Calibration, res.StoppedAt)
	}
	status, stdout, stderr = run(t, "quantize", "m.onnx", "-o", filepath.Join(dir, "b.onnx"), "--calib-data", "random", "--budget", "-1s")
	failsCleanly(t, status, 2, stdout, stderr, "--budget: -1s (want a positive duration, or 0 for none)")
	status, stdout, stderr = run(t, "quantize", "m.onnx", "-o", filepath.Join(dir, "d.onnx"), "--dynamic", "--budget", "1m")
	failsCleanly(t, status, 2, stdout, stderr, "--budget is for static INT8, not --dynamic")
}
