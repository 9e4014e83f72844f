package ptq_test

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// mnistTechniqueOptions quantize the MNIST CNN into dir, judged on 1,000
// held-out test images, the guard off (each test turns it on as needed).
func mnistTechniqueOptions(t *testing.T, dir string) ptq.Options {
	return ptq.Options{Input: testenv.Model("mnist_cnn.onnx"), Output: filepath.Join(dir, "q.onnx"),
		CalibData: testenv.Data(t, "mnist/train_images.npy"), CalibOpts: data.Options{Samples: 256, Batch: 64},
		EvalData: testenv.Data(t, "mnist/test_images.npy"), EvalOpts: data.Options{Samples: 1000, Batch: 100},
		EvalLabels: testenv.Data(t, "mnist/test_labels.npy"), NoLatency: true, NoGuard: true}
}

// plainAndWith quantizes with opts as they are, then with technique
// alone, and returns both results: each technique is judged against the
// plain INT8 model.
func plainAndWith(t *testing.T, opts ptq.Options, technique schema.Technique) (plain, with *ptq.Result) {
	t.Helper()
	plain, err := ptq.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Techniques = []schema.Technique{technique}
	with, err = ptq.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return plain, with
}

// narrowedCache quantizes with opts once to write a calibration cache into
// dir, then writes a copy of it there as name in which the MNIST CNN's
// third conv input (features.5's Relu) has the range [0, hi(its measured
// max)], and returns the copy's path: a range forced narrow, for the guard
// and the techniques to make up for.
func narrowedCache(t *testing.T, opts ptq.Options, dir, name string, hi func(measured float64) float64) string {
	t.Helper()
	cache := filepath.Join(dir, "calib.json")
	opts.CalibCache = cache
	if _, err := ptq.Run(opts); err != nil {
		t.Fatal(err)
	}
	c, err := calibrate.ReadCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Tensors {
		if c.Tensors[i].Name == "/features/features.5/Relu_output_0" {
			c.Tensors[i].Min, c.Tensors[i].Max = 0, hi(c.Tensors[i].Max)
		}
	}
	path := filepath.Join(dir, name)
	if err := calibrate.WriteCache(path, c); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSmoothQuant: on the zoo's ViT, SmoothQuant rescales the LayerNorm
// outputs its qkv and first MLP layers read (through the attention's
// Transpose); ptq runs the rescaled float model against the input in ONNX
// Runtime before calibrating, and fails if the numbers drifted.
func TestSmoothQuant(t *testing.T) {
	ortenv.Require(t)
	opts := ptq.Options{Input: testenv.Data(t, "zoo/vit_tiny/dynbatch.onnx"), Output: filepath.Join(t.TempDir(), "q.onnx"),
		CalibData: testenv.Data(t, "zoo/vit_tiny/calib.npy"), NoLatency: true, NoGuard: true,
		Techniques: []schema.Technique{quantize.TechniqueSmoothQuant}}
	res, err := ptq.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Techniques.SmoothQuant; s == nil || len(s.Groups) != 4 {
		t.Fatalf("smoothquant %+v: want the 4 LayerNorm outputs of the 2 blocks", s)
	}
}

// TestBiasCorrection: a range forced narrow on the MNIST CNN's third conv
// input clips it, which shifts that conv's output down on average: the
// INT8 model loses accuracy. Bias correction, measured on the calibration
// data, cancels the shift per channel and gets most of it back; asked
// for or not, the guard's first try is it.
func TestBiasCorrection(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	opts := mnistTechniqueOptions(t, dir)
	opts.CalibCache = narrowedCache(t, opts, dir, "narrow.json", func(measured float64) float64 { return measured / 8 })
	plain, corrected := plainAndWith(t, opts, quantize.TechniqueBiasCorrection)
	p, b := plain.Accuracy.Accuracy, corrected.Accuracy.Accuracy
	t.Logf("top-1 drop: plain %.2f points, bias-corrected %.2f", p.DropPoints, b.DropPoints)
	tr := corrected.Techniques
	if tr == nil || tr.Bias == nil || tr.Bias.Layers == 0 || corrected.Quantize.BiasShifted != tr.Bias.Layers {
		t.Fatalf("techniques %+v, %d biases shifted: want every measured layer corrected", tr, corrected.Quantize.BiasShifted)
	}
	if p.DropPoints < 1 || b.DropPoints > p.DropPoints/2 {
		t.Errorf("the clipped range costs %.2f points, %.2f with bias correction: want at least 1, then at most half", p.DropPoints, b.DropPoints)
	}

	// The guard, on: the clipped model misses it; bias correction is
	// tried first and recorded.
	opts.Techniques, opts.NoGuard = nil, false
	res, err := ptq.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := res.Guard
	if len(g.Tried) != 1 || g.Tried[0].Name() != "bias-correction" || !g.Tried[0].Kept {
		t.Fatalf("guard tried %+v: want bias correction, kept", g.Tried)
	}
	if res.Techniques == nil || !res.Techniques.ByGuard || !g.Pass {
		t.Errorf("guard %+v, techniques %+v: want it passed with the guard's bias correction", g, res.Techniques)
	}
}

// TestGPTQ: GPTQ's rounding of the MNIST CNN's INT8 weights lowers the
// layers' output error on the calibration inputs below round-to-nearest's
// and costs no accuracy.
func TestGPTQ(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	opts := mnistTechniqueOptions(t, dir)
	plain, res := plainAndWith(t, opts, quantize.TechniqueGPTQ)
	g := res.Techniques.GPTQ
	t.Logf("gptq: %+v; top-1 drop %.2f (nearest %.2f)", g, res.Accuracy.Accuracy.DropPoints, plain.Accuracy.Accuracy.DropPoints)
	if g == nil || g.Layers != 4 || g.ErrorRatio <= 0 || g.ErrorRatio >= 1 {
		t.Fatalf("gptq %+v: want the 4 layers rounded, their output error below round-to-nearest's", g)
	}
	if res.Accuracy.Accuracy.DropPoints > plain.Accuracy.Accuracy.DropPoints+0.2 {
		t.Errorf("gptq drops %.2f points, round-to-nearest %.2f", res.Accuracy.Accuracy.DropPoints, plain.Accuracy.Accuracy.DropPoints)
	}
}

// TestEqualize: cross-layer equalization of the MNIST CNN's two
// conv -> Relu -> conv pairs keeps the float function (ptq checks the
// rescaled model against the input before calibrating) and, with one
// weight scale per tensor, does not cost cosine.
func TestEqualize(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	perTensor := false
	opts := mnistTechniqueOptions(t, dir)
	opts.Quant.PerChannel = &perTensor
	plain, res := plainAndWith(t, opts, quantize.TechniqueEqualize)
	pairs := res.Techniques.Equalized
	cos := func(r *ptq.Result) float64 { return float64(r.Accuracy.Outputs[0].Cosine) }
	t.Logf("%d pairs; cosine %.5f, per-tensor plain %.5f", len(pairs), cos(res), cos(plain))
	if len(pairs) != 2 || pairs[0].SpreadAfter >= pairs[0].SpreadBefore {
		t.Fatalf("pairs %+v: want the two conv -> Relu -> conv pairs, their channel ranges evened", pairs)
	}
	if cos(res) < cos(plain)-1e-4 {
		t.Errorf("cosine %.5f with equalization, %.5f without", cos(res), cos(plain))
	}
}
