package bench

import (
	"time"

	"github.com/optc-dev/optc/latency"
)

// Timing is r's record: one window, no repeats.
func (r *Result) Timing() *latency.Timing {
	t := &latency.Timing{ColdStartMs: r.ColdStart.SessionCreateMs + r.ColdStart.FirstRunMs}
	for _, b := range r.Batches {
		t.Batches = append(t.Batches, latency.BatchTiming{Batch: b.Batch, Latency: b.Latency, Throughput: b.Throughput})
	}
	return t
}

// Repeated is the record of several windows over the same batch sizes:
// each figure the median over the windows, except the tail percentiles
// and extremes, taken over the runs of every window together when they
// kept them (BatchResult.Times). A percentile the runs are too few for is
// left out (Latency.Drop; Unreported names it): with pooled runs it is
// their total that must suffice, otherwise each window's own.
func Repeated(windows []*Result) *latency.Timing {
	t := &latency.Timing{}
	if len(windows) == 0 {
		return t
	}
	median := func(f func(*Result) float64) float64 {
		xs := make([]float64, len(windows))
		for i, w := range windows {
			xs[i] = f(w)
		}
		return latency.Median(xs)
	}
	t.ColdStartMs = median(func(r *Result) float64 { return r.ColdStart.SessionCreateMs + r.ColdStart.FirstRunMs })
	for i, first := range windows[0].Batches {
		at := func(f func(BatchResult) float64) float64 {
			return median(func(r *Result) float64 { return f(r.Batches[i]) })
		}
		m := latency.BatchTiming{Batch: first.Batch}
		fewest := first.Latency.N
		for _, w := range windows {
			x := w.Batches[i]
			m.Latency.N += x.Latency.N
			fewest = min(fewest, x.Latency.N)
			m.Repeats = append(m.Repeats, latency.WindowTiming{P50: x.Latency.P50, P90: x.Latency.P90, P99: x.Latency.P99, Throughput: x.Throughput})
		}
		m.Latency.Min = at(func(x BatchResult) float64 { return x.Latency.Min })
		m.Latency.P50 = at(func(x BatchResult) float64 { return x.Latency.P50 })
		m.Latency.P90 = at(func(x BatchResult) float64 { return x.Latency.P90 })
		m.Latency.P95 = at(func(x BatchResult) float64 { return x.Latency.P95 })
		m.Latency.P99 = at(func(x BatchResult) float64 { return x.Latency.P99 })
		m.Latency.Max = at(func(x BatchResult) float64 { return x.Latency.Max })
		if all, ok := pooledRuns(windows, i); ok {
			// A tail percentile is a statement about many runs: one short
			// window (22 runs of cls at batch 8) holds no p99, the
			// windows together may. The median stays the windows' median,
			// robust to a window that drew a slow session; the extremes
			// are the pooled runs' (a median of the windows' maxima can
			// lie below the pooled p99).
			p := latency.Summarize(all)
			m.Latency.P90, m.Latency.P95, m.Latency.P99 = p.P90, p.P95, p.P99
			m.Latency.Min, m.Latency.Max = p.Min, p.Max
			fewest = m.Latency.N
		}
		m.Latency.Mean = at(func(x BatchResult) float64 { return x.Latency.Mean })
		m.Latency.Stddev = at(func(x BatchResult) float64 { return x.Latency.Stddev })
		m.Latency.CV = at(func(x BatchResult) float64 { return x.Latency.CV })
		m.Throughput = at(func(x BatchResult) float64 { return x.Throughput })
		m.Latency.Drop(fewest)
		t.Batches = append(t.Batches, m)
	}
	return t
}

// pooledRuns is every timed run of batch size i over the windows, when
// each window kept its runs.
func pooledRuns(windows []*Result, i int) ([]time.Duration, bool) {
	var all []time.Duration
	for _, w := range windows {
		if len(w.Batches[i].Times) == 0 {
			return nil, false
		}
		all = append(all, w.Batches[i].Times...)
	}
	return all, true
}
