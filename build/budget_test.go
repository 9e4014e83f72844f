package build

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/config"
)

// TestPlanShares: the budget is shared by weight among the parts the
// build runs, each keeps its configured length when that is shorter, and
// no budget leaves everything as configured.
func TestPlanShares(t *testing.T) {
	c := config.Default()
	c.INT8, c.Targets = true, []string{"all"}
	planFor := func(budget time.Duration) *Plan {
		c.Budget.Duration = budget
		targets, _ := c.ExpandTargets()
		b := &builder{c: c, targets: targets, res: &Result{}}
		return b.plan()
	}
	// The input and the models ORT deploys (fp32, int8, .ort; TensorRT's
	// are not timed); latency batches 1 and 8, 5 repeats; the sweep 6
	// batch sizes at 1 and all cores.
	p := planFor(20 * time.Second)
	if p.TimedModels != 4 || p.TimingWindows != 40 || p.SweepPoints == 0 {
		t.Fatalf("plan %+v", p)
	}
	// weights: placement 3, timing 3, sweep 1.5, rest 3 of 10.5.
	if want := 20 * 3 / 10.5; p.PlacementSeconds != round2(want) {
		t.Errorf("placement %v s, want %.2f", p.PlacementSeconds, want)
	}
	if want := 20 * 3 / 10.5 / 40; p.WindowSeconds != windowSeconds(want) {
		t.Errorf("window %v s, want %.2f", p.WindowSeconds, want)
	}
	// The sweep's share bounds it whole; half of each point's is its window.
	if want := 20 * 1.5 / 10.5; p.SweepSeconds != round2(want) {
		t.Errorf("sweep %v s, want %.2f", p.SweepSeconds, want)
	}
	if want := 20 * 1.5 / 10.5 / float64(p.SweepPoints) / 2; p.SweepPointSeconds != windowSeconds(want) {
		t.Errorf("sweep point %v s, want %.2f", p.SweepPointSeconds, want)
	}
	// The guard's fallback gets half the rest's share.
	if want := 20 * 3 / 10.5 / 2; p.FallbackSeconds != round2(round2(20*3/10.5)/2) || !strings.Contains(p.Lines[2], "fallback: at most") {
		t.Errorf("fallback %v s, want %.2f (lines %q)", p.FallbackSeconds, want, p.Lines)
	}
	// Calibration stops at 0.3 of the rest's share after the build began.
	if want := round2(0.3 * round2(20*3/10.5)); p.CalibrationSeconds != want || !strings.Contains(p.Lines[1], "calibration: stops 1.7s after the build began, once it has 16 samples") {
		t.Errorf("calibration %v s, want %.2f (lines %q)", p.CalibrationSeconds, want, p.Lines)
	}
	// The checks stop when the rest's and placement's shares have passed.
	if want := round2(2 * 20 * 3 / 10.5); p.ChecksSeconds != want || !strings.Contains(p.Lines[3], "checks: stop 11.4s after the build began, each once it has 32 samples") {
		t.Errorf("checks %v s, want %.2f (lines %q)", p.ChecksSeconds, want, p.Lines)
	}
	if len(p.Lines) != 7 || !strings.Contains(p.Lines[0], "budget 20s") {
		t.Errorf("plan lines %q", p.Lines)
	}
	// The default budget keeps the configured lengths.
	p = planFor(5 * time.Minute)
	if p.PlacementSeconds != 60 || p.WindowSeconds != 0.2 || p.SweepPointSeconds != 1 {
		t.Errorf("default budget: %+v", p)
	}
	// No budget: as configured, and said so.
	p = planFor(0)
	if p.PlacementSeconds != 60 || p.WindowSeconds != 0.2 || !strings.Contains(p.Lines[0], "no budget") {
		t.Errorf("no budget: %+v", p)
	}
	// Without INT8 nor Triton there is no placement or sweep to share with.
	c.INT8, c.Targets = false, []string{"ort"}
	p = planFor(70 * time.Second)
	if p.PlacementSeconds != 0 || p.SweepPoints != 0 || p.TimedModels != 3 || p.WindowSeconds != 0.2 {
		t.Errorf("ort fp32: %+v", p)
	}
	// A short latency.duration split in repeats keeps its milliseconds: a
	// window rounded to 0 s would be bench's default of 2 s.
	c.Latency.Duration.Duration, c.Latency.Repeats = 20*time.Millisecond, 5
	if p = planFor(5 * time.Minute); p.WindowSeconds != 0.004 || !strings.Contains(strings.Join(p.Lines, "\n"), "4ms windows") {
		t.Errorf("20ms in 5 repeats: window %v s, plan %q", p.WindowSeconds, p.Lines)
	}
}

// TestDropUnsupported: a percentile is reported only when every window
// had the runs it needs, and the report says so.
func TestDropUnsupported(t *testing.T) {
	window := func(n int) bench.BatchResult {
		return bench.BatchResult{Batch: 8, Latency: bench.Latency{N: n, P50: 1, P90: 2, P95: 3, P99: 4}}
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
		tm := &Timing{Batches: []bench.BatchResult{window(0)}}
		for _, n := range c.runs {
			tm.Repeats = append(tm.Repeats, Repeat{Batches: []bench.BatchResult{window(n)}})
		}
		b := &builder{res: &Result{}}
		b.dropUnsupported(tm)
		l := tm.Batches[0].Latency
		if strings.Join(l.Unreported, ",") != strings.Join(c.want, ",") || l.P50 != 1 {
			t.Errorf("runs %v: unreported %v (p50 %v), want %v", c.runs, l.Unreported, l.P50, c.want)
		}
		for _, name := range c.want {
			if *l.At(name) != 0 {
				t.Errorf("runs %v: %s = %v, want 0", c.runs, name, *l.At(name))
			}
		}
		if (len(c.want) > 0) != (len(b.res.Notes) == 1) {
			t.Errorf("runs %v: notes %q", c.runs, b.res.Notes)
		}
	}
}

// The tails are taken over every window's runs together: five windows
// of 22 runs (a 9 ms model at batch 8 in 200 ms windows) hold a p99 that
// none of them holds alone, and it is the pooled runs' nearest-rank p99;
// the median stays the windows' median. 99 runs in all still leave p99
// out.
func TestTailsOverPooledRuns(t *testing.T) {
	window := func(first, n int) bench.BatchResult {
		var ds []time.Duration
		for k := range n {
			ds = append(ds, time.Duration(first+k)*time.Millisecond)
		}
		return bench.BatchResult{Batch: 8, Latency: bench.Summarize(ds), Times: ds}
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
		tm := &Timing{}
		for w := range c.windows {
			tm.Repeats = append(tm.Repeats, Repeat{Batches: []bench.BatchResult{window(1+100*w, c.runs)}})
		}
		tm.summarize()
		b := &builder{res: &Result{}}
		b.dropUnsupported(tm)
		l := tm.Batches[0].Latency
		if l.Max < l.P99 || l.Min > l.P50 {
			t.Errorf("%d windows of %d runs: min %v p50 %v p99 %v max %v: the extremes are not the runs'", c.windows, c.runs, l.Min, l.P50, l.P99, l.Max)
		}
		if l.P50 != c.p50 || l.P99 != c.p99 || strings.Join(l.Unreported, ",") != strings.Join(c.unsupported, ",") {
			t.Errorf("%d windows of %d runs: p50 %v p99 %v unreported %v, want %v %v %v", c.windows, c.runs, l.P50, l.P99, l.Unreported, c.p50, c.p99, c.unsupported)
		}
	}
}

// TestCalibrationEstimate: after the first batch the build prints what the
// planned samples take at its rate, and, within a budget, says when
// calibration will stop at its share before them (no note: the note comes
// when it did stop).
func TestCalibrationEstimate(t *testing.T) {
	for _, c := range []struct {
		total int64
		share float64 // seconds to the calibration's stop
		stops bool
	}{{64, 100, false}, {640, 100, true}, {640, 0, false}, {0, 100, false}, {0, 0, false}} {
		var out strings.Builder
		b := &builder{started: time.Now(), res: &Result{Plan: &Plan{CalibrationSeconds: c.share}}, opts: Options{Progress: &out}}
		b.checkCalibrationFits(8, c.total, 2*time.Second) // 0.25 s a sample
		log := out.String()
		switch {
		case c.total > 0 && !strings.Contains(log, fmt.Sprintf("about %s for the %d planned samples", secs(0.25*float64(c.total)), c.total)):
			t.Errorf("%d samples: %q has no estimate", c.total, log)
		case c.total == 0 && !strings.Contains(log, "250ms per sample"):
			t.Errorf("every sample: %q has no rate", log)
		}
		if stops := strings.Contains(log, "stops at its share of the budget in about 1m40s, after about "); stops != c.stops {
			t.Errorf("%d samples, share %v s: said it stops %v (%q), want %v", c.total, c.share, stops, log, c.stops)
		}
		if len(b.res.Notes) != 0 {
			t.Errorf("notes %q", b.res.Notes)
		}
	}
}
