package ptq_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/tensorrt/trtlint"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
	"github.com/optc-dev/optc/tools/textlines"
)

// TestTensorRTLintClean quantizes every kind of model optc quantizes with
// the tensorrt scheme, the way `optc quantize --target tensorrt` does
// (ptq.Run), and checks that `optc lint --target tensorrt` finds nothing
// in the result and that the Q/DQ model, run in ONNX Runtime, stays close
// to the float one (lowest cosine over the outputs, on held-out data). The
// cosine floors sit a little under what was measured (docs/tensorrt.md).
func TestTensorRTLintClean(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	ocr := func(f string) string { return filepath.Join(testenv.Data(t, "ocr-models"), f) }
	type tc struct {
		name        string
		model       func(t *testing.T) string
		calib, eval func(t *testing.T) string
		calibOpts   data.Options
		evalOpts    data.Options
		minCosine   float64
		long        bool
	}
	file := func(rel string) func(t *testing.T) string {
		return func(t *testing.T) string { return testenv.Data(t, rel) }
	}
	random := func(*testing.T) string { return "random" }
	cases := []tc{
		{name: "mnist", model: func(*testing.T) string { return testenv.Model("mnist_cnn.onnx") },
			calib: file("mnist/train_images.npy"), eval: file("mnist/test_images.npy"),
			calibOpts: data.Options{Batch: 32, Samples: 128}, evalOpts: data.Options{Batch: 100, Samples: 500}, minCosine: 0.999},
		{name: "convstack", model: func(t *testing.T) string { return saved(t, dir, "convstack", convstackModel(t)) },
			calib: random, eval: random,
			calibOpts: data.Options{High: 1, Samples: 32, Batch: 8, Seed: 1}, evalOpts: data.Options{High: 1, Samples: 32, Batch: 8, Seed: 2}, minCosine: 0.995},
		{name: "resnet", model: func(t *testing.T) string { return saved(t, dir, "resnet", residualNet(t)) },
			calib: random, eval: random,
			calibOpts: data.Options{Low: -1, High: 1, Samples: 32, Batch: 8, Seed: 1}, evalOpts: data.Options{Low: -1, High: 1, Samples: 32, Batch: 8, Seed: 2}, minCosine: 0.995},
		{name: "paddleocr-cls", model: func(t *testing.T) string { return ocr("ch_ppocr_mobile_v2.0_cls_infer.onnx") },
			calib: file("textlines/cls_calib.npy"), eval: file("textlines/cls_images.npy"),
			calibOpts: data.Options{Batch: 32, Samples: 64}, evalOpts: data.Options{Batch: 50, Samples: 200}, minCosine: 0.995},
		{name: "paddleocr-rec", model: func(t *testing.T) string { return ocr("ch_PP-OCRv4_rec_infer.onnx") },
			calib: file("textlines/cls_calib.npy"), eval: file("textlines/cls_images.npy"),
			calibOpts: data.Options{Batch: 8, Samples: 16}, evalOpts: data.Options{Batch: 8, Samples: 16}, minCosine: 0.96, long: true},
		{name: "paddleocr-det", model: func(t *testing.T) string { return ocr("ch_PP-OCRv4_det_infer.onnx") },
			calib:     func(t *testing.T) string { return pages(t, dir, "det_calib.npy", 1, 8) },
			eval:      func(t *testing.T) string { return pages(t, dir, "det_eval.npy", 2, 4) },
			calibOpts: data.Options{Batch: 4}, evalOpts: data.Options{Batch: 4}, minCosine: 0.97, long: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.long && testing.Short() {
				t.Skip("a PP-OCRv4 model: tens of seconds")
			}
			in := c.model(t)
			out := filepath.Join(dir, c.name+".int8.qdq.onnx")
			sess := ort.DefaultOptions()
			sess.IntraOpThreads = 1
			res, err := ptq.Run(ptq.Options{Input: in, Output: out, CalibData: c.calib(t), CalibOpts: c.calibOpts,
				Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetTensorRT},
				EvalData: c.eval(t), EvalOpts: c.evalOpts, Session: sess, NoLatency: true,
				NoGuard: true}) // every layer quantized: the lint is what is tested
			if err != nil {
				t.Fatal(err)
			}
			m, err := graph.LoadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fs := trtlint.Check(m)
			for _, f := range fs {
				t.Errorf("lint: %s %s %s: %s", f.Severity, f.Rule, f.Node, f.Message)
			}
			cos := 1.0
			for _, o := range res.Accuracy.Outputs {
				cos = math.Min(cos, float64(o.Cosine))
			}
			t.Logf("%d nodes quantized, %d skipped, %d Q/DQ pairs; lint: %d findings; cosine %.5f",
				len(res.Quantize.Quantized), len(res.Quantize.Skipped), res.Quantize.QDQPairs, len(fs), cos)
			if cos < c.minCosine {
				t.Errorf("cosine %.5f < %v", cos, c.minCosine)
			}
			if len(res.Quantize.Skipped) > 0 {
				t.Errorf("skipped: %+v", res.Quantize.Skipped)
			}
		})
	}
}

func saved(t *testing.T, dir, name string, m *graph.Model) string {
	t.Helper()
	p := filepath.Join(dir, name+".onnx")
	if err := graph.Save(m, p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func convstackModel(t *testing.T) *graph.Model {
	m, err := convstack.Model(16, 16)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pages writes n text pages (textlines.Page, 320x320) of seed as a .npy:
// the PP-OCRv4 detector's input with text for it to find.
func pages(t *testing.T, dir, name string, seed uint64, n int) string {
	t.Helper()
	const h, w = 320, 320
	vals := make([]float32, n*3*h*w)
	for i := range n {
		textlines.Page(seed, i, h, w, vals[i*3*h*w:(i+1)*3*h*w])
	}
	tt, err := graph.NewFloat32Tensor("x", []int64{int64(n), 3, h, w}, vals)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := data.WriteNpy(p, tt); err != nil {
		t.Fatal(err)
	}
	return p
}

// residualNet is a small ResNet: a stem conv-bn, a basic block (two 3x3
// conv-bn, the block input added back, relu) and a downsampling block
// whose shortcut is a strided 1x1 conv-bn, then global pooling and a Gemm.
// BatchNormalization is folded by the passes before quantization, as ptq
// does for every model. The stem has no Relu (a linear bottleneck, as in
// MobileNetV2/V3 and the PaddleOCR models), so the first Add reads two conv
// outputs, the first of which the block's first conv reads too: the Q/DQ
// must go on that one for the Add to fuse into the second.
func residualNet(t *testing.T) *graph.Model {
	b := testgraph.New(t, "resnet", 13)
	r := rand.New(rand.NewPCG(3, 4))
	x := b.Input("x", 1, 8, 16, 16)
	x.Type.Shape[0] = graph.SymbolicDim("N")
	he := func(name string, dims ...int64) *graph.Value {
		n, fan := int64(1), dims[1]
		for _, d := range dims {
			n *= d
		}
		for _, d := range dims[2:] {
			fan *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(r.NormFloat64() * math.Sqrt(2/float64(fan)))
		}
		return b.Floats(name, dims, vals...)
	}
	vec := func(name string, c int64, lo, hi float64) *graph.Value {
		vals := make([]float32, c)
		for i := range vals {
			vals[i] = float32(lo + (hi-lo)*r.Float64())
		}
		return b.Floats(name, []int64{c}, vals...)
	}
	convBN := func(name string, in *graph.Value, cin, cout, k, stride int64) *graph.Value {
		conv := b.Node(name, "Conv", in, he(name+"_w", cout, cin, k, k))
		p := (k - 1) / 2
		conv.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{p, p, p, p}})
		conv.SetAttr(&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{stride, stride}})
		bn := b.Node(name+"_bn", "BatchNormalization", conv.Output(0), vec(name+"_gamma", cout, 0.5, 1.5),
			vec(name+"_beta", cout, -0.2, 0.2), vec(name+"_mean", cout, -0.1, 0.1), vec(name+"_var", cout, 0.5, 1.5))
		return bn.Output(0)
	}
	relu := func(name string, in *graph.Value) *graph.Value { return b.Node(name, "Relu", in).Output(0) }
	stem := convBN("stem", x, 8, 16, 3, 1)
	c := convBN("b1_conv2", relu("b1_relu1", convBN("b1_conv1", stem, 16, 16, 3, 1)), 16, 16, 3, 1)
	b1 := relu("b1_relu", b.Node("b1_add", "Add", stem, c).Output(0))
	c = convBN("b2_conv2", relu("b2_relu1", convBN("b2_conv1", b1, 16, 32, 3, 2)), 32, 32, 3, 1)
	short := convBN("b2_down", b1, 16, 32, 1, 2)
	b2 := relu("b2_relu", b.Node("b2_add", "Add", c, short).Output(0))
	pool := b.Node("pool", "GlobalAveragePool", b2)
	flat := b.Node("flatten", "Flatten", pool.Output(0))
	fc := b.Node("fc", "Gemm", flat.Output(0), he("fc_w", 10, 32), vec("fc_b", 10, -0.1, 0.1))
	fc.SetAttr(&graph.Attr{Name: "transB", Type: graph.AttrInt, Int: 1})
	b.Output(fc.Output(0), 1, 10)
	fc.Output(0).Type.Shape[0] = graph.SymbolicDim("N")
	return b.Model
}
