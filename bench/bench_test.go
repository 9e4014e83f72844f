package bench

import (
	"testing"

	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
)

// TestConcurrentRequests runs requests from several goroutines sharing one
// session (make test runs it under -race): every iteration is timed once,
// however the iterations divide among the workers.
func TestConcurrentRequests(t *testing.T) {
	ortenv.Require(t)
	for _, c := range []struct{ workers, iterations int }{{4, 22}, {3, 2}, {1, 5}} {
		r, err := Run(Options{Model: testenv.Model("mnist_cnn.onnx"), Data: "random", Batches: []int{1, 2},
			Session: ort.DefaultOptions(), Iterations: c.iterations, Warmup: 1, Concurrency: c.workers})
		if err != nil {
			t.Fatal(err)
		}
		if r.Concurrency != c.workers || len(r.Batches) != 2 {
			t.Fatalf("%d workers: result %+v", c.workers, r)
		}
		for _, b := range r.Batches {
			l := b.Latency
			if l.N != c.iterations {
				t.Errorf("%d workers, batch %d: %d runs timed, want %d", c.workers, b.Batch, l.N, c.iterations)
			}
			if !(l.Min > 0 && l.Min <= l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) || b.Throughput <= 0 {
				t.Errorf("%d workers, batch %d: inconsistent figures %+v, throughput %v", c.workers, b.Batch, l, b.Throughput)
			}
		}
	}
}
