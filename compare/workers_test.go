package compare

import (
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
)

// TestWorkersAgree: however many sessions run the batches side by side,
// the comparison is the one a single session makes, to the bit: the
// statistics take the batches in order (a last batch shorter than the
// others, labels, a replayed reference), and a single-threaded session
// computes the same on every worker.
func TestWorkersAgree(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Model("mnist_cnn.onnx")
	m, err := graph.LoadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// B: the model with its first weights 2% larger, so that every
	// statistic has something to measure.
	w := m.Graph.Initializers[0]
	vals, err := w.Const.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		vals[i] *= 1.02
	}
	if w.Const, err = graph.NewFloat32Tensor(w.Name, w.Const.Dims, vals); err != nil {
		t.Fatal(err)
	}
	b, err := graph.MarshalReferencing(m)
	if err != nil {
		t.Fatal(err)
	}
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	opts := Options{ModelA: model, ModelB: "perturbed", BInMemory: b, Data: testenv.Data(t, "mnist/test_images.npy"),
		Labels: testenv.Data(t, "mnist/test_labels.npy"), DataOpts: data.Options{Batch: 4, Samples: 67}, Session: sess, Workers: 1}
	one, err := Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	if one.Batches != 17 || one.Outputs[0].MaxAbs == 0 || one.Accuracy == nil {
		t.Fatalf("the single session's comparison measured nothing: %s", asJSON(t, one))
	}
	opts.Reference = NewReference()
	for _, workers := range []int{2, 3, 5, 0, 3} { // the last replays A
		opts.Workers = workers
		opts.Session.IntraOpThreads = 1
		if workers == 0 {
			opts.Session.IntraOpThreads = 0 // one single-threaded session per core
		}
		res, err := Models(opts)
		if err != nil {
			t.Fatalf("%d workers: %v", workers, err)
		}
		if got, want := asJSON(t, res), asJSON(t, one); got != want {
			t.Errorf("%d workers: %s\nwant %s", workers, got, want)
		}
	}
}
