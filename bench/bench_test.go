package bench

import (
	"testing"
	"time"

	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
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

// A warm-up bounded by time is predicted to end by the bound plus one run
// (the run that crosses it; at least one run, at most Warmup); without a
// bound it is Warmup runs whatever they cost.
func TestWarmupCost(t *testing.T) {
	run := 100 * time.Millisecond
	cases := []struct {
		warmup int
		within time.Duration
		want   time.Duration
	}{
		{10, 0, time.Second},
		{10, 2 * time.Second, time.Second},                   // ten runs fit
		{10, 250 * time.Millisecond, 350 * time.Millisecond}, // three runs cross it
		{10, time.Millisecond, 101 * time.Millisecond},       // at least one run
		{2, 500 * time.Millisecond, 200 * time.Millisecond},  // never more than Warmup
	}
	for _, c := range cases {
		if got := warmupCost(Options{Warmup: c.warmup, WarmupDuration: c.within}, run); got != c.want {
			t.Errorf("Warmup %d within %s: %s, want %s", c.warmup, c.within, got, c.want)
		}
	}
}
