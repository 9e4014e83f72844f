package cmd

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// The accuracy guard judges every output, through the CLI with its
// defaults, on the kinds of model issue 38 found it blind to: a
// spectrogram, a [1, 1] score, a dense map, a detector and a language
// model's logits.

// verdictJSON is what these tests read of quantize's --json.
type verdictJSON struct {
	Calibration struct {
		Samples int `json:"samples"`
	} `json:"calibration"`
	Accuracy struct {
		Samples int    `json:"samples"`
		Data    string `json:"data"`
	} `json:"accuracy"`
	HeldOut bool `json:"eval_data_held_out"`
	Guard   struct {
		Pass    bool `json:"pass"`
		Off     bool `json:"off"`
		HeldOut bool `json:"held_out"`
		Checks  []struct {
			Metric   string `json:"metric"`
			Output   string `json:"output"`
			Limit    float64
			Measured json.RawMessage `json:"measured"`
			Pass     bool            `json:"pass"`
			Detail   string          `json:"detail"`
		} `json:"checks"`
	} `json:"guard"`
}

// metrics maps each check's "metric of output" to whether it passed.
func (v verdictJSON) metrics() map[string]bool {
	m := map[string]bool{}
	for _, c := range v.Guard.Checks {
		m[c.Metric+" of "+c.Output] = c.Pass
	}
	return m
}

func seededFloats(seed uint64, n int, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64() * scale)
	}
	return w
}

// logMel is an audio front-end: a strided conv (an STFT's real part),
// its power, a mel-like projection (positive weights) and Log, with a
// static batch of 1: float32[1, 1, 4096] -> logmel float32[1, 253, 8].
func logMel(t *testing.T, dir string) string {
	b := testgraph.New(t, "logmel", 13)
	x := b.Input("audio", 1, 1, 4096)
	conv := b.Node("stft", "Conv", x, b.Floats("stft_w", []int64{16, 1, 64}, seededFloats(1, 16*64, 0.125)...))
	conv.SetAttr(&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{16}})
	pow := b.Node("power", "Mul", conv.Output(0), conv.Output(0))
	tr := b.Node("frames", "Transpose", pow.Output(0))
	tr.SetAttr(&graph.Attr{Name: "perm", Type: graph.AttrInts, Ints: []int64{0, 2, 1}})
	mel := make([]float32, 16*8)
	for i := range mel {
		mel[i] = float32(1+i%5) / 16
	}
	mm := b.Node("mel", "MatMul", tr.Output(0), b.Floats("mel_w", []int64{16, 8}, mel...))
	lg := b.NodeTo("log", "Log", b.Value("logmel"), mm.Output(0))
	b.Output(lg.Output(0), 1, 253, 8)
	return save(t, b, dir, "logmel.onnx")
}

// wakeWord is a keyword spotter's head: static batch 1, one sigmoid score
// float32[1, 1], where any cosine is 1.
func wakeWord(t *testing.T, dir string) string {
	b := testgraph.New(t, "wake", 13)
	x := b.Input("features", 1, 640)
	g1 := b.Node("fc1", "Gemm", x, b.Floats("w1", []int64{640, 32}, seededFloats(2, 640*32, 0.05)...), b.Floats("b1", []int64{32}, seededFloats(3, 32, 0.1)...))
	r := b.Node("relu", "Relu", g1.Output(0))
	g2 := b.Node("fc2", "Gemm", r.Output(0), b.Floats("w2", []int64{32, 1}, seededFloats(4, 32, 0.3)...), b.Floats("b2", []int64{1}, 0))
	s := b.NodeTo("score", "Sigmoid", b.Value("score"), g2.Output(0))
	b.Output(s.Output(0), 1, 1)
	return save(t, b, dir, "wake.onnx")
}

// unet is a U-Net-like image-to-image model: two convs down, a transposed
// conv up, a skip Add and a conv to three channels, float32[N, 3, 32, 32]
// in and out.
func unet(t *testing.T, dir string) string {
	b := testgraph.New(t, "unet", 13)
	x := b.Input("image", 1, 3, 32, 32)
	x.Type.Shape[0] = graph.SymbolicDim("N")
	pad := &graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}}
	c1 := b.Node("enc", "Conv", x, b.Floats("w_enc", []int64{8, 3, 3, 3}, seededFloats(5, 8*27, 0.3)...), b.Floats("b_enc", []int64{8}, seededFloats(6, 8, 0.1)...))
	c1.SetAttr(pad)
	r1 := b.Node("enc_relu", "Relu", c1.Output(0))
	c2 := b.Node("down", "Conv", r1.Output(0), b.Floats("w_down", []int64{8, 8, 3, 3}, seededFloats(7, 8*72, 0.15)...))
	c2.SetAttr(pad)
	c2.SetAttr(&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{2, 2}})
	r2 := b.Node("down_relu", "Relu", c2.Output(0))
	up := b.Node("up", "ConvTranspose", r2.Output(0), b.Floats("w_up", []int64{8, 8, 2, 2}, seededFloats(8, 8*32, 0.25)...))
	up.SetAttr(&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{2, 2}})
	skip := b.Node("skip", "Add", up.Output(0), r1.Output(0))
	c3 := b.NodeTo("dec", "Conv", b.Value("restored"), skip.Output(0), b.Floats("w_dec", []int64{3, 8, 3, 3}, seededFloats(9, 3*72, 0.15)...))
	c3.SetAttr(pad)
	b.Output(c3.Output(0), 1, 3, 32, 32)
	b.Graph.Outputs[0].Type.Shape[0] = graph.SymbolicDim("N")
	return save(t, b, dir, "unet.onnx")
}

func save(t *testing.T, b *testgraph.Builder, dir, name string) string {
	t.Helper()
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := graph.Save(b.Model, p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGuardSpectrogramInf: a log-mel front-end calibrated on loud clips
// and checked on speech-scale ones: its INT8 power spectrum rounds to 0
// and Log makes -Inf everywhere. The guard refuses it (exit 3, nothing
// written), naming the output and the count.
func TestGuardSpectrogramInf(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model := logMel(t, dir)
	clips := func(name string, seed uint64, amplitude float64) string {
		p := filepath.Join(dir, name)
		r := rand.New(rand.NewPCG(seed, 1))
		writeNpy(t, p, graph.Float, []int64{48, 1, 4096}, func(int) float32 { return float32(amplitude * (2*r.Float64() - 1)) })
		return p
	}
	out := filepath.Join(dir, "q.onnx")
	status, stdout, stderr := run(t, "quantize", model, "-o", out, "--calib-data", clips("loud.npy", 1, 1),
		"--eval-data", clips("speech.npy", 2, 0.002))
	if status != ExitRefused {
		t.Fatalf("status %d, want %d (refused): %s\n%s", status, ExitRefused, stderr, stdout)
	}
	for _, want := range []string{"accuracy guard refused the INT8 model", "NaN/Inf values of logmel where float is finite"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused model was written: %v", err)
	}
}

// TestGuardScalarOutput: a static batch of 1 and one score per sample.
// Random calibration draws 64 samples (not one run), the check 64 fresh
// ones, and the score is judged by its relative error over them: a
// cosine of 1-element vectors is not shown as the verdict.
func TestGuardScalarOutput(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	var res verdictJSON
	decode(t, run2json(t, "quantize", wakeWord(t, dir), "-o", filepath.Join(dir, "q.onnx"), "--calib-data", "random", "--no-guard", "--json"), &res)
	if res.Calibration.Samples != 64 || res.Accuracy.Samples != 64 || !res.HeldOut || !res.Guard.Off {
		t.Errorf("calibrated on %d samples, checked on %d (held out %v, guard off %v)", res.Calibration.Samples, res.Accuracy.Samples, res.HeldOut, res.Guard.Off)
	}
	m := res.metrics()
	if _, ok := m["relative error of score"]; !ok || len(m) != 1 {
		t.Errorf("checks %v: want the score's relative error alone", m)
	}
	// Without --no-guard the same figures decide: exit 0 or 3, never
	// "nothing to check".
	status, stdout, stderr := run(t, "quantize", wakeWord(t, dir), "-o", filepath.Join(dir, "q2.onnx"), "--calib-data", "random")
	if (status != 0 && status != ExitRefused) || strings.Contains(stdout+stderr, "nothing to check") || !strings.Contains(stdout, "relative error of score") {
		t.Errorf("status %d\n%s%s", status, stdout, stderr)
	}
	if !strings.Contains(stdout, "fresh random inputs (a smoke test") {
		t.Errorf("random checks are not labelled a smoke test:\n%s", stdout)
	}
}

// TestGuardDenseOutput: a U-Net-like model's image output is judged per
// sample (worst cosine, worst relative error); a range forced too narrow
// through the calibration cache breaks it and the guard refuses, naming
// the output; the build then still writes every other artifact and exits 3.
func TestGuardDenseOutput(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model := unet(t, dir)
	cache := filepath.Join(dir, "calib.json")
	var res verdictJSON
	decode(t, run2json(t, "quantize", model, "-o", filepath.Join(dir, "q.onnx"), "--calib-data", "random", "--calib-cache", cache, "--json"), &res)
	m := res.metrics()
	for _, k := range []string{"min sample cosine of restored", "max sample relative error of restored"} {
		if pass, ok := m[k]; !ok || !pass {
			t.Errorf("%s: %v (checks %v)", k, pass, m)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	setRange(t, cache, bad, "up_out", -0.05, 0.05) // the skip Add reads it quantized: no layer fallback recovers it
	status, stdout, stderr := run(t, "quantize", model, "-o", filepath.Join(dir, "bad.onnx"), "--calib-data", "random", "--calib-cache", bad)
	if status != ExitRefused || !strings.Contains(stderr, "min sample cosine of restored") || !strings.Contains(stdout, "accuracy guard: FAILED") {
		t.Fatalf("status %d, stderr %q\n%s", status, stderr, stdout)
	}

	// The build: INT8 refused, FP32 shipped, everything else made.
	outDir := filepath.Join(dir, "build")
	status, stdout, stderr = run(t, "build", model, "--int8", "--calib-data", "random", "--calib-cache", bad, "--target", "all", "-o", outDir, "--budget", "60s")
	if status != ExitRefused || !strings.Contains(stderr, "model.int8.onnx not written") {
		t.Fatalf("build: status %d, stderr %q\n%s", status, stderr, stdout)
	}
	if !strings.Contains(stdout, "REFUSED") {
		t.Errorf("the table does not show the refusal:\n%s", stdout)
	}
	if !strings.Contains(stderr, "weighted layers kept float") {
		t.Errorf("the refusal does not say how the fallback ended: %q", stderr)
	}
	for _, f := range []string{"model.fp32.onnx", "ort/model.ort", "tensorrt/model.fp16.onnx", "openvino/model.onnx", "report.md"} {
		if _, err := os.Stat(filepath.Join(outDir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outDir, "model.int8.onnx")); !os.IsNotExist(err) {
		t.Errorf("model.int8.onnx written although refused")
	}
	var rep struct {
		Verdict struct {
			Status  string   `json:"status"`
			Refused []string `json:"refused"`
		} `json:"verdict"`
	}
	js, err := os.ReadFile(filepath.Join(outDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, string(js), &rep)
	// The tensorrt scheme leaves the skip Add float (TensorRT fuses it into
	// the conv), so its INT8 model may pass: what is refused is what is
	// missing.
	if rep.Verdict.Status != "refused" || !slices.Contains(rep.Verdict.Refused, "model.int8.onnx") {
		t.Errorf("report verdict %+v", rep.Verdict)
	}
	for _, f := range []string{"model.int8.onnx", "tensorrt/model.int8.qdq.onnx"} {
		_, err := os.Stat(filepath.Join(outDir, f))
		if refused := slices.Contains(rep.Verdict.Refused, f); refused != os.IsNotExist(err) {
			t.Errorf("%s: refused %v, on disk: %v", f, refused, err)
		}
	}
	if strings.Contains(string(js), ".tmp-") {
		t.Error("report.json names the build's temporary folder")
	}
}

// TestGuardDetector: PaddleOCR's text detector calibrated and checked on
// random images (the README's own example): its probability map is
// judged per sample and the guard refuses it, saying the figures are a
// smoke test on random inputs.
func TestGuardDetector(t *testing.T) {
	ortenv.Require(t)
	if testing.Short() {
		t.Skip("PP-OCRv4 det: tens of seconds")
	}
	model := filepath.Join(testenv.Data(t, "ocr-models"), "ch_PP-OCRv4_det_infer.onnx")
	out := filepath.Join(t.TempDir(), "det.int8.onnx")
	status, stdout, stderr := run(t, "quantize", model, "-o", out, "--calib-data", "random", "--shape", "x:?,3,160,160")
	if status != ExitRefused {
		t.Fatalf("status %d, want %d: %s\n%s", status, ExitRefused, stderr, stdout)
	}
	for _, want := range []string{"min sample cosine of sigmoid_0.tmp_0", "fresh random inputs"} {
		if !strings.Contains(stderr+stdout, want) {
			t.Errorf("output does not say %q:\n%s\n%s", want, stdout, stderr)
		}
	}
}

// TestGuardLMLogits: a causal language model's [B, T, V] logits are
// judged per sample and by top-1 agreement per position on the positions
// clear of near-ties.
func TestGuardLMLogits(t *testing.T) {
	ortenv.Require(t)
	dir := testenv.Data(t, "zoo/lm_tiny")
	var res verdictJSON
	decode(t, run2json(t, "quantize", filepath.Join(dir, "dynamic.onnx"), "-o", filepath.Join(t.TempDir(), "q.onnx"),
		"--calib-data", filepath.Join(dir, "calib.npy"), "--eval-data", filepath.Join(dir, "heldout.npy"), "--json"), &res)
	var top1 string
	for _, c := range res.Guard.Checks {
		if c.Metric == "top-1 agreement" && c.Output == "logits" {
			top1 = c.Detail
		}
	}
	if !res.Guard.Pass || !strings.Contains(top1, "positions") || !strings.Contains(top1, "clear of near-ties") {
		t.Errorf("guard pass %v, top-1 check %q, checks %v", res.Guard.Pass, top1, res.metrics())
	}
	for _, k := range []string{"min sample cosine of logits", "max sample relative error of logits"} {
		if _, ok := res.metrics()[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
}

// TestGuardNearTies: a plain stack of 3x3 convs whose pooled features are
// [N, C] but not class scores: many rows are near-ties, which noise
// flips. Top-1 agreement counts only the rows clear of them, so the
// model is judged by its cosine and relative error and passes; both
// agreement figures are shown.
func TestGuardNearTies(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	b := testgraph.New(t, "features", 13)
	x := b.Input("x", 1, 32, 16, 16)
	x.Type.Shape[0] = graph.SymbolicDim("N")
	cur := x
	for i := range 8 {
		c := b.Node("conv"+string(rune('0'+i)), "Conv", cur, b.Floats("w"+string(rune('0'+i)), []int64{32, 32, 3, 3}, seededFloats(uint64(10+i), 32*32*9, 0.7/96)...))
		c.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
		cur = b.Node("relu"+string(rune('0'+i)), "Relu", c.Output(0)).Output(0)
	}
	pool := b.Node("pool", "GlobalAveragePool", cur)
	flat := b.NodeTo("flatten", "Flatten", b.Value("features"), pool.Output(0))
	b.Output(flat.Output(0), 1, 32)
	b.Graph.Outputs[0].Type.Shape[0] = graph.SymbolicDim("N")
	model := save(t, b, dir, "features.onnx")
	var res verdictJSON
	status, stdout, stderr := run(t, "quantize", model, "-o", filepath.Join(dir, "q.onnx"), "--calib-data", "random", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	decode(t, stdout, &res)
	for _, c := range res.Guard.Checks {
		if strings.HasPrefix(c.Metric, "top-1") {
			var v float64
			_ = json.Unmarshal(c.Measured, &v)
			t.Logf("%s: %.4f (%s)", c.Metric, v, c.Detail)
			if !strings.Contains(c.Detail, "over all") && !strings.Contains(c.Detail, "clear of near-ties") || math.IsNaN(v) {
				t.Errorf("top-1 check %+v", c)
			}
		}
	}
}
