package build

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/latency"
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
	// The input and the models ORT deploys (fp32, int8, the ort and
	// ort-mobile .ort files; TensorRT's are not timed); latency batches 1
	// and 8, 5 repeats; the sweep 6 batch sizes at 1 and all cores.
	p := planFor(20 * time.Second)
	if p.TimedModels != 5 || p.TimingWindows != 50 || p.SweepPoints == 0 {
		t.Fatalf("plan %+v", p)
	}
	// weights: placement 3, timing 3, sweep 1.5, rest 3 of 10.5.
	if want := 20 * 3 / 10.5; p.PlacementSeconds != round2(want) {
		t.Errorf("placement %v s, want %.2f", p.PlacementSeconds, want)
	}
	if want := 20 * 3 / 10.5 / 50; p.WindowSeconds != windowSeconds(want) {
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

// TestNoteUnreported: a timing that left a percentile out says so in the
// build's notes, once per batch size (bench.Repeated decides what to
// leave out).
func TestNoteUnreported(t *testing.T) {
	window := func(n int) *bench.Result {
		return &bench.Result{Batches: []bench.BatchResult{{Batch: 8, Latency: latency.Latency{N: n, P50: 1, P99: 4}}, {Batch: 1, Latency: latency.Latency{N: 300, P50: 1, P99: 4}}}}
	}
	for _, c := range []struct {
		runs  []int
		notes int
	}{{[]int{150, 100}, 0}, {[]int{150, 99}, 1}} {
		var ws []*bench.Result
		for _, n := range c.runs {
			ws = append(ws, window(n))
		}
		b := &builder{res: &Result{}}
		b.noteUnreported(bench.Repeated(ws))
		if len(b.res.Notes) != c.notes || c.notes == 1 && !strings.Contains(b.res.Notes[0], "timing at batch 8: a percentile is left out") {
			t.Errorf("runs %v: notes %q, want %d", c.runs, b.res.Notes, c.notes)
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
