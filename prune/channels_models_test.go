package prune

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// optimized runs the -O2 pipeline on path into a temp file, checked in
// ORT against the original as optc optimize does.
func optimized(t testing.TB, path string, dopts data.Options) string {
	t.Helper()
	ortenv.Require(t)
	m := testgraph.LoadFile(t, path)
	before := testgraph.Marshal(t, m)
	pipeline, _ := passes.Select(2, nil, nil)
	if _, err := passes.Run(m, pipeline, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	after := testgraph.Marshal(t, m)
	if err := difftest.Compare(before, after, difftest.Options{DataOpts: dopts, Atol: 1e-5, Rtol: 1e-4}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o2.onnx")
	if err := os.WriteFile(out, after, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func pruneFile(t testing.TB, path string, ratio float64, opts Options) (*schema.PruneReport, []byte) {
	t.Helper()
	return pruneLoaded(t, path, func(m *graph.Model) (*schema.PruneReport, error) { return Channels(m, ratio, opts) })
}

// pruneLoaded loads the model at path and prunes it with verifiedPrune.
func pruneLoaded(t testing.TB, path string, prune func(*graph.Model) (*schema.PruneReport, error)) (*schema.PruneReport, []byte) {
	t.Helper()
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return verifiedPrune(t, m, prune)
}

func logReport(t testing.TB, rep *schema.PruneReport) {
	t.Helper()
	for _, l := range rep.Layers {
		t.Logf("  %-12s %-28s params %7d removed %3d %s", l.Op, l.Node, l.Params, l.Removed, l.Skipped)
	}
	t.Logf("params %d -> %d (%.1f%% fewer)", rep.ParamsBefore, rep.ParamsAfter,
		100*float64(rep.ParamsBefore-rep.ParamsAfter)/float64(rep.ParamsBefore))
}

func TestChannelsMNIST(t *testing.T) {
	images := testenv.Data(t, "mnist/test_images.npy")
	labels := testenv.Data(t, "mnist/test_labels.npy")
	for _, o2 := range []bool{true, false} {
		path := testenv.Model("mnist_cnn.onnx")
		name := "BN"
		if o2 {
			path, name = optimized(t, path, data.Options{}), "O2"
		}
		for _, ratio := range []float64{0.25, 0.5} {
			t.Run(fmt.Sprintf("%s/%g", name, ratio), func(t *testing.T) {
				rep, b := pruneFile(t, path, ratio, Options{})
				logReport(t, rep)
				if rep.ParamsAfter >= rep.ParamsBefore {
					t.Errorf("params %d -> %d", rep.ParamsBefore, rep.ParamsAfter)
				}
				res, err := compare.Models(compare.Options{ModelA: path, ModelB: "pruned", BInMemory: graph.Serialized{Bytes: b},
					Data: images, DataOpts: data.Options{Batch: 64}, Labels: labels})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("accuracy %.4f -> %.4f over %d images", res.Accuracy.A, res.Accuracy.B, res.Samples)
				// No threshold on the accuracy: without fine-tuning it is what it
				// is (TestChannelsMNISTSameAsZeroed checks the slicing).
				if res.Samples != 2004 || res.Accuracy == nil {
					t.Errorf("scored %d images", res.Samples)
				}
			})
		}
	}
}

func clsModel(t testing.TB) (string, data.Options) {
	ocr := testenv.Data(t, "ocr-models")
	dopts := data.Options{High: 1, Spec: data.Spec{Shapes: map[string][]int64{"x": {1, 3, 48, 192}}}}
	return optimized(t, filepath.Join(ocr, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), dopts), dopts
}

func TestChannelsPaddleOCRCls(t *testing.T) {
	o2, dopts := clsModel(t)
	rep, b := pruneFile(t, o2, 0.25, Options{})
	logReport(t, rep)
	// The acceptance figure: at least 15% fewer parameters (the speed-up
	// is measured by BenchmarkChannelsCls, not asserted).
	if fewer := 1 - float64(rep.ParamsAfter)/float64(rep.ParamsBefore); fewer < 0.15 {
		t.Errorf("params %d -> %d: %.1f%% fewer, want at least 15%%", rep.ParamsBefore, rep.ParamsAfter, 100*fewer)
	}
	// Runs in ORT with outputs of the original's shapes.
	res, err := compare.Models(compare.Options{ModelA: o2, ModelB: "pruned", BInMemory: graph.Serialized{Bytes: b},
		Data: "random", DataOpts: data.Options{High: 1, Samples: 4, Spec: data.Spec{Shapes: dopts.Shapes}},
		Atol: map[string]float64{"": 1e9}, Rtol: map[string]float64{"": 1e9}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Outputs {
		t.Logf("output %q: max abs diff %.3g, top-1 agreement %.2f", o.Name, o.MaxAbs, o.Top1Agree)
	}
	if len(res.Outputs) != 1 || res.Samples != 4 {
		t.Errorf("%d outputs over %d samples", len(res.Outputs), res.Samples)
	}
}

// BenchmarkChannelsCls measures PaddleOCR cls after -O2 against the same
// pruned to 0.25: ORT level all, batch 8, one thread, alternating the two
// three times and taking medians of p50.
//
//	go test -run='^$' -bench=ChannelsCls -benchtime=1x ./prune
func BenchmarkChannelsCls(b *testing.B) {
	var opts Options
	if m := os.Getenv("OPTC_CHANNEL_MULTIPLE"); m != "" {
		fmt.Sscan(m, &opts.ChannelMultiple)
	}
	o2, dopts := clsModel(b)
	rep, pb := pruneFile(b, o2, 0.25, opts)
	pruned := filepath.Join(b.TempDir(), "pruned.onnx")
	if err := os.WriteFile(pruned, pb, 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rep.ParamsBefore), "params-before")
	b.ReportMetric(float64(rep.ParamsAfter), "params-after")
	for range b.N {
		var base, pr []float64
		for range 3 {
			base = append(base, p50(b, o2, dopts))
			pr = append(pr, p50(b, pruned, dopts))
		}
		b.ReportMetric(latency.Median(base), "o2-p50-ms")
		b.ReportMetric(latency.Median(pr), "pruned-p50-ms")
		b.ReportMetric(latency.Median(pr)/latency.Median(base), "p50-ratio")
	}
}

func p50(b *testing.B, model string, dopts data.Options) float64 {
	sess := ort.DefaultOptions()
	sess.Level, sess.IntraOpThreads = ort.LevelAll, 1
	r, err := bench.Run(bench.Options{Model: model, Data: "random", DataOpts: dopts, Batches: []int{8},
		Session: sess, Duration: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return r.Batches[0].Latency.P50
}

// zeroedTwin zeroes, in the model at path, the output channels (weight
// rows and bias) that Channels removes from each layer with the report's
// count, chosen by the same scoring: for layers pruned on their own (no
// coupling) the pruned model must compute exactly what the zeroed one
// does, which checks every slice on a real model.
func zeroedTwin(t *testing.T, path string, rep *schema.PruneReport) []byte {
	t.Helper()
	m := testgraph.LoadFile(t, path)
	removed := map[string]int64{}
	for _, l := range rep.Layers {
		removed[l.Node] = l.Removed
	}
	g := m.Graph
	for _, n := range g.Nodes {
		if n.OpType != "Conv" || removed[n.Name] == 0 {
			continue
		}
		w := n.Input(1).ConstantTensor()
		grp := &group{channels: w.Dims[0], sources: []*source{{node: n}}}
		keep, err := keepChannels(grp, removed[n.Name])
		if err != nil {
			t.Fatal(err)
		}
		kept := map[int]bool{}
		for _, k := range keep {
			kept[k] = true
		}
		for i := 1; i <= 2; i++ {
			v := n.Input(i)
			if v == nil {
				continue
			}
			f, _ := v.ConstantTensor().Float32s()
			f = slices.Clone(f)
			per := len(f) / int(w.Dims[0])
			for c := 0; c < int(w.Dims[0]); c++ {
				if !kept[c] {
					clear(f[c*per : (c+1)*per])
				}
			}
			nt, _ := graph.NewFloat32Tensor(g.UniqueName(v.Name+"_zeroed"), v.ConstantTensor().Dims, f)
			nv, _ := g.AddInitializer(nt)
			n.SetInput(i, nv)
		}
	}
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestChannelsMNISTSameAsZeroed(t *testing.T) {
	images := testenv.Data(t, "mnist/test_images.npy")
	path := optimized(t, testenv.Model("mnist_cnn.onnx"), data.Options{})
	for _, ratio := range []float64{0.25, 0.5} {
		rep, pruned := pruneFile(t, path, ratio, Options{})
		zeroed := zeroedTwin(t, path, rep)
		difftest.Check(t, zeroed, pruned, difftest.Options{Data: images, DataOpts: data.Options{Batch: 64}, Atol: 1e-4, Rtol: 1e-4})
	}
}
