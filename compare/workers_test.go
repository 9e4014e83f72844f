package compare

import (
	"runtime"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// TestWorkersAgree: however many sessions run the batches side by side,
// the comparison is the one a single session makes, to the bit: the
// statistics take the batches in order (a last batch shorter than the
// others, labels, a replayed reference), and a single-threaded session
// computes the same on every worker.
func TestWorkersAgree(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Model("mnist_cnn.onnx")
	m := testgraph.LoadFile(t, model)
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

// TestWorkersBoundedByMemory: sessions side by side only on the CPU with
// no thread count asked for, and only as many as fit ParallelBytes; a
// model that cannot be sized, or one pair over the bound, runs alone with
// the threads asked for.
func TestWorkersBoundedByMemory(t *testing.T) {
	cores := min(runtime.NumCPU(), MaxWorkers)
	cpu := ort.DefaultOptions()
	for _, c := range []struct {
		name      string
		opts      Options
		perWorker int64
		want      int
		threads   int
	}{
		{"small", Options{Session: cpu}, 10 << 20, cores, 1},
		{"half the bound", Options{Session: cpu}, ParallelBytes / 2, min(cores, 2), 1},
		{"over the bound", Options{Session: cpu}, ParallelBytes + 1, 1, 0},
		{"unsized", Options{Session: cpu}, -1, 1, 0},
		{"threads asked for", Options{Session: ort.Options{IntraOpThreads: 3}}, 10 << 20, 1, 3},
		{"cuda", Options{Session: ort.Options{Provider: "cuda"}}, 10 << 20, 1, 0},
		{"workers asked for", Options{Session: cpu, Workers: 3}, ParallelBytes * 4, 3, 0},
	} {
		n, s := workers(c.opts, c.perWorker)
		want, threads := c.want, c.threads
		if want < 2 && c.opts.Workers == 0 {
			threads = c.opts.Session.IntraOpThreads // one session as asked
		}
		if n != want || s.IntraOpThreads != threads {
			t.Errorf("%s: %d workers of %d threads, want %d of %d", c.name, n, s.IntraOpThreads, want, threads)
		}
	}
}
