package bench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/latency"
)

// TestRepeatedDrops: a percentile is reported only when every window had
// the runs it needs; the median is the windows' median either way.
func TestRepeatedDrops(t *testing.T) {
	window := func(n int) *Result {
		return &Result{Batches: []BatchResult{{Batch: 8, Latency: latency.Latency{N: n, P50: 1, P90: 2, P95: 3, P99: 4}}}}
	}
	for _, c := range []struct {
		runs []int
		want []string
	}{
		{[]int{150, 100}, nil},
		{[]int{150, 99}, []string{"p99"}},
		{[]int{19, 40}, []string{"p95", "p99"}},
		{[]int{3, 3}, []string{"p90", "p95", "p99"}},
	} {
		var ws []*Result
		for _, n := range c.runs {
			ws = append(ws, window(n))
		}
		tm := Repeated(ws)
		l := tm.Batches[0].Latency
		if strings.Join(l.Unreported, ",") != strings.Join(c.want, ",") || l.P50 != 1 {
			t.Errorf("runs %v: unreported %v (p50 %v), want %v", c.runs, l.Unreported, l.P50, c.want)
		}
		for _, name := range c.want {
			if *l.At(name) != 0 {
				t.Errorf("runs %v: %s = %v, want 0", c.runs, name, *l.At(name))
			}
		}
		if tm.Windows() != len(c.runs) || len(tm.Batches[0].Repeats) != len(c.runs) || tm.Batches[0].Repeats[0].P99 != 4 {
			t.Errorf("runs %v: windows %d, repeats %+v", c.runs, tm.Windows(), tm.Batches[0].Repeats)
		}
	}
}

// TestRepeatedPoolsTails: the tails are taken over every window's runs
// together: five windows of 22 runs (a 9 ms model at batch 8 in 200 ms
// windows) hold a p99 that none of them holds alone, and it is the pooled
// runs' nearest-rank p99; the median stays the windows' median. 99 runs
// in all still leave p99 out.
func TestRepeatedPoolsTails(t *testing.T) {
	window := func(first, n int) *Result {
		var ds []time.Duration
		for k := range n {
			ds = append(ds, time.Duration(first+k)*time.Millisecond)
		}
		return &Result{ColdStart: ColdStart{SessionCreateMs: float64(first), FirstRunMs: 1},
			Batches: []BatchResult{{Batch: 8, Latency: latency.Summarize(ds), Times: ds}}}
	}
	for _, c := range []struct {
		windows     int
		runs        int
		p50, p99    float64
		unsupported []string
	}{
		// Runs of 1..22 ms, 101..122 ms, ...: the windows' medians are
		// their 11th runs, and their median the third window's (211 ms);
		// p99 of the 110 runs is the 109th smallest (421 ms), where the
		// median of the windows' own p99s would be their slowest runs.
		{5, 22, 211, 421, nil},
		{3, 33, 117, 0, []string{"p99"}},
	} {
		var ws []*Result
		for w := range c.windows {
			ws = append(ws, window(1+100*w, c.runs))
		}
		tm := Repeated(ws)
		l := tm.Batches[0].Latency
		if l.Max < l.P99 || l.Min > l.P50 {
			t.Errorf("%d windows of %d runs: min %v p50 %v p99 %v max %v: the extremes are not the runs'", c.windows, c.runs, l.Min, l.P50, l.P99, l.Max)
		}
		if l.P50 != c.p50 || l.P99 != c.p99 || strings.Join(l.Unreported, ",") != strings.Join(c.unsupported, ",") {
			t.Errorf("%d windows of %d runs: p50 %v p99 %v unreported %v, want %v %v %v", c.windows, c.runs, l.P50, l.P99, l.Unreported, c.p50, c.p99, c.unsupported)
		}
		if l.N != c.windows*c.runs || tm.ColdStartMs != float64(1+100*(c.windows/2))+1 {
			t.Errorf("%d windows of %d runs: n %d, cold start %v", c.windows, c.runs, l.N, tm.ColdStartMs)
		}
	}
}

// TestTimingJSON: the record's layout in report.json, which optc diff
// reads back from reports written before this type was shared: the
// latency figures inline at each batch size, the windows under repeats.
func TestTimingJSON(t *testing.T) {
	tm := &latency.Timing{ColdStartMs: 5, Batches: []latency.BatchTiming{{Batch: 1, Latency: latency.Latency{N: 3, P50: 2}, Throughput: 500,
		Repeats: []latency.WindowTiming{{P50: 2, P90: 3, P99: 4, Throughput: 500}}}}}
	js, err := json.Marshal(tm)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cold_start_ms":5`, `"batches":[{"batch":1,"n":3,"min_ms":0,"p50_ms":2,`, `"throughput_samples_per_s":500,"repeats":[{"p50_ms":2,"p90_ms":3,"p99_ms":4,`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("%s lacks %s", js, want)
		}
	}
	one := (&Result{ColdStart: ColdStart{SessionCreateMs: 3, FirstRunMs: 2}, Batches: []BatchResult{{Batch: 4, Latency: latency.Latency{P50: 1}, Throughput: 9}}}).Timing()
	if one.ColdStartMs != 5 || one.Batch(4) == nil || one.Batch(4).Throughput != 9 || one.Batch(1) != nil || one.Windows() != 1 {
		t.Errorf("one window: %+v", one)
	}
}
