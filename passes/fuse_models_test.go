package passes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// The fusions on real models: MNIST (Conv+BN+Relu) and PaddleOCR's cls,
// det and rec models (BN in Constant nodes, HardSwish written out, opsets
// 9 and 11), each checked against the original in ONNX Runtime.

// fusedModel is a model before and after a pipeline.
type fusedModel struct {
	before, after []byte
	m             *graph.Model
	rep           *Report
	opsBefore     map[string]int
}

func fusionOpCounts(g *graph.Graph) map[string]int {
	c := testgraph.OpCounts(g)
	c["(nodes)"] = len(g.Nodes)
	c["(nodes without Constant)"] = len(g.Nodes) - c["Constant"]
	return c
}

func runFusions(t *testing.T, path string, pipeline []*Pass, fusedConv bool) *fusedModel {
	t.Helper()
	before, m := testgraph.ReadModel(t, path)
	fm := &fusedModel{before: before, m: m, opsBefore: fusionOpCounts(m.Graph)}
	var err error
	fm.rep, err = Run(m, pipeline, Options{VerifyEach: true, FusedConv: fusedConv})
	if err != nil {
		t.Fatal(err)
	}
	if fm.rep.Rounds > 2 {
		t.Errorf("the pipeline took %d rounds to settle, want 2 (the second changes nothing)", fm.rep.Rounds)
	}
	if fm.after, err = graph.Marshal(m); err != nil {
		t.Fatal(err)
	}
	after := fusionOpCounts(m.Graph)
	for _, op := range []string{"(nodes)", "(nodes without Constant)", "BatchNormalization", "Conv", "Add", "Clip", "Mul", "Div", "HardSigmoid", "HardSwish", "FusedConv", "Gemm", "MatMul"} {
		if fm.opsBefore[op]+after[op] > 0 {
			t.Logf("%-24s %4d -> %4d", op, fm.opsBefore[op], after[op])
		}
	}
	for _, p := range fm.rep.Passes {
		t.Logf("%-22s %+v", p.Name, p.Stats)
	}
	return fm
}

// maxError writes both models and compares them with compare.Models,
// logging the largest absolute error of each output.
func (fm *fusedModel) maxError(t *testing.T, opts compare.Options) *compare.Result {
	t.Helper()
	dir := t.TempDir()
	opts.ModelA, opts.ModelB = filepath.Join(dir, "before.onnx"), filepath.Join(dir, "after.onnx")
	for p, b := range map[string][]byte{opts.ModelA: fm.before, opts.ModelB: fm.after} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts.Session = ort.Options{Level: ort.LevelDisable, Provider: "cpu"}
	res, err := compare.Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Outputs {
		t.Logf("output %q over %d samples: max abs error %.3g, max rel error %.3g", o.Name, res.Samples, o.MaxAbs, o.MaxRel)
	}
	return res
}

func TestFuseConvBNOnMNIST(t *testing.T) {
	ortenv.Require(t)
	images := testenv.Data(t, "mnist/test_images.npy")
	labels := testenv.Data(t, "mnist/test_labels.npy")
	for _, fusedConv := range []bool{false, true} {
		name := "notes"
		pipeline := []*Pass{fuseConvBN, deadCode}
		if fusedConv {
			name = "FusedConv"
			pipeline = []*Pass{fuseConvBN, fuseConvActivation, deadCode}
		}
		t.Run(name, func(t *testing.T) {
			fm := runFusions(t, testenv.Model("mnist_cnn.onnx"), pipeline, fusedConv)
			ops := fusionOpCounts(fm.m.Graph)
			if fm.opsBefore["BatchNormalization"] != 3 || ops["BatchNormalization"] != 0 || len(fm.m.Graph.Initializers) != 8 {
				t.Errorf("BatchNormalization %d -> %d, %d initializers left (want 3 -> 0; 3 weights, 3 biases, fc's 2)", fm.opsBefore["BatchNormalization"], ops["BatchNormalization"], len(fm.m.Graph.Initializers))
			}
			if fusedConv && ops["FusedConv"] != 3 {
				t.Errorf("%d FusedConv, want 3", ops["FusedConv"])
			}
			difftest.Check(t, fm.before, fm.after, difftest.Options{Data: images, DataOpts: data.Options{Batch: 64}, Atol: 1e-4, Rtol: 1e-4})
			res := fm.maxError(t, compare.Options{Data: images, DataOpts: data.Options{Batch: 64}, Labels: labels})
			if o := res.Outputs[0]; res.Samples != 2004 || o.Top1Agree != 1 {
				t.Errorf("top-1 agreement %v over %d images, want 1 over 2004", o.Top1Agree, res.Samples)
			}
			t.Logf("accuracy %.4f before, %.4f after", res.Accuracy.A, res.Accuracy.B)
		})
	}
}

func TestFusionsOnPaddleOCR(t *testing.T) {
	ortenv.Require(t)
	all := []*Pass{fuseConvBN, fuseHardSwish, fuseConvActivation, deadCode}
	for _, tc := range []struct {
		name, file string
		shape      []int64
		fusedConv  bool
	}{
		{"cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", []int64{4, 3, 48, 192}, false},
		{"cls FusedConv", "ch_ppocr_mobile_v2.0_cls_infer.onnx", []int64{4, 3, 48, 192}, true},
		{"det", "ch_PP-OCRv4_det_infer.onnx", []int64{1, 3, 64, 64}, false},
		{"rec", "ch_PP-OCRv4_rec_infer.onnx", []int64{1, 3, 48, 160}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testenv.Data(t, filepath.Join("ocr-models", tc.file))
			fm := runFusions(t, path, all, tc.fusedConv)
			ops := fusionOpCounts(fm.m.Graph)
			bn := fm.rep.Passes[0].Stats.Removed
			hs := fm.rep.Passes[1].Stats.Removed / 4
			t.Logf("fused %d of %d BatchNormalization, %d HardSwish patterns", bn, fm.opsBefore["BatchNormalization"], hs)
			if ops["(nodes)"] >= fm.opsBefore["(nodes)"] || bn == 0 || hs == 0 {
				t.Errorf("nodes %d -> %d, %d BN and %d HardSwish fused", fm.opsBefore["(nodes)"], ops["(nodes)"], bn, hs)
			}
			if tc.name == "cls" && ops["BatchNormalization"] != 0 {
				t.Errorf("%d BatchNormalization left in cls, want 0", ops["BatchNormalization"])
			}
			if tc.fusedConv && ops["FusedConv"] == 0 {
				t.Errorf("no FusedConv")
			}
			opts := data.Options{Spec: data.Spec{Shapes: map[string][]int64{"x": tc.shape}}, Samples: 8, Batch: int(tc.shape[0])}
			difftest.Check(t, fm.before, fm.after, difftest.Options{DataOpts: opts, Atol: 1e-4, Rtol: 1e-3})
			fm.maxError(t, compare.Options{Data: "random", DataOpts: opts})
		})
	}
}
