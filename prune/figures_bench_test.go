package prune

import (
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
)

// pruneWith prunes the model at path with meth, data-driven when d is set,
// and returns the report and the pruned model's bytes (after Verify).
func pruneWith(t testing.TB, path string, meth Method, opts Options, d *Data) (*Report, []byte) {
	t.Helper()
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	opts.Data = d
	rep, err := Apply(m, meth, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("pruned model fails Verify: %v", err)
	}
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return rep, b
}

// scored compares the pruned model with the unpruned one at path on
// images and labels.
func scored(t testing.TB, path string, pruned []byte, images, labels string, dopts data.Options) *compare.Result {
	t.Helper()
	res, err := compare.Models(compare.Options{ModelA: path, ModelB: "pruned", BInMemory: graph.Serialized{Bytes: pruned},
		Data: images, DataOpts: dopts, Labels: labels, Atol: map[string]float64{"": 1e9}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mnistData(t testing.TB) (calib *Data, images, labels string) {
	calib = &Data{Spec: testenv.Data(t, "mnist/train_images.npy"),
		Opts: data.Options{Batch: 64, Samples: 512, Shuffle: true, Seed: 1}, Session: ort.DefaultOptions()}
	return calib, testenv.Data(t, "mnist/test_images.npy"), testenv.Data(t, "mnist/test_labels.npy")
}

func TestFiguresMNISTQuick(t *testing.T) {
	path := optimized(t, testenv.Model("mnist_cnn.onnx"), data.Options{})
	calib, images, labels := mnistData(t)
	for _, spec := range []string{"2:4", "magnitude:0.75", "channels:0.25"} {
		meth, _ := ParseMethod(spec)
		for _, d := range []*Data{nil, calib} {
			rep, b := pruneWith(t, path, meth, Options{}, d)
			res := scored(t, path, b, images, labels, data.Options{Batch: 64})
			for _, l := range rep.Layers {
				t.Logf("   %s %s %v->%v refit=%s skip=%s", l.Node, l.Op, l.Before, l.After, l.Refit, l.Skipped)
			}
			t.Logf("%s data=%v: acc %.2f -> %.2f", spec, d != nil, 100*res.Accuracy.A, 100*res.Accuracy.B)
		}
	}
}
