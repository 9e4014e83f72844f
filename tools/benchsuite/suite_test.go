package benchsuite

import (
	"bytes"
	"strings"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Spread
	}{
		{[]float64{3, 1, 2}, Spread{N: 3, Median: 2, Min: 1, Max: 3}},
		{[]float64{4, 1, 3, 2}, Spread{N: 4, Median: 2.5, Min: 1, Max: 4}},
		{nil, Spread{}},
	} {
		if got := spreadOf(c.in); got != c.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestRatioRowPairsRepeats(t *testing.T) {
	// The ratio is taken per repeat, then summarized: not the ratio of
	// the medians.
	r := ratioRow("s", "n", "a", "b", "s", []float64{1, 2, 10}, []float64{2, 2, 10})
	if r.Ratio != (Spread{N: 3, Median: 1, Min: 1, Max: 2}) || r.AMedian != 2 || r.BMedian != 2 {
		t.Errorf("row %+v", r)
	}
}

// The output of a real `go test -bench` run with -count=2 (trimmed).
const benchOutput = `goos: linux
goarch: amd64
pkg: optc/graph
cpu: AMD EPYC
BenchmarkLoadSave-2   	       1	 180304458 ns/op	 372.37 MB/s	       703.6 copy-MB/s	         0.4 alloc-MB	        75.34 peak-RSS-MB	         1.122 RSS/model
BenchmarkLoadSaveMNIST-2   	     100	     10000 ns/op
--- BENCH: BenchmarkLoadSave-2
    bench_test.go:381: untimed first round
BenchmarkLoadSave-2   	       1	 170304458 ns/op	 392.37 MB/s	       603.6 copy-MB/s	         0.4 alloc-MB	        75.00 peak-RSS-MB	         1.117 RSS/model
PASS
`

func TestParseBenchOutput(t *testing.T) {
	runs, err := parseBenchOutput([]byte(benchOutput), "BenchmarkLoadSave")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2 (BenchmarkLoadSaveMNIST is another benchmark)", len(runs))
	}
	peak, err := column(runs, "peak-RSS-MB")
	if err != nil {
		t.Fatal(err)
	}
	if peak[0] != 75.34 || peak[1] != 75 || runs[1]["copy-MB/s"] != 603.6 {
		t.Errorf("runs %v", runs)
	}
	if _, err := column(runs, "no-such-unit"); err == nil {
		t.Error("a missing metric is not an error")
	}
	if _, err := parseBenchOutput([]byte("BenchmarkLoadSave-2 1 12 ns/op 3\n"), "BenchmarkLoadSave"); err == nil {
		t.Error("a value without a unit is not an error")
	}
}

// TestPassScaling runs the real pipeline on the 10k- and 100k-node chains
// once: the row must exist and say the larger graph took longer.
func TestPassScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pass pipeline on a 100k-node graph")
	}
	s := &suite{opts: Options{Repeats: 1}, res: &Results{}}
	if err := s.passScaling(); err != nil {
		t.Fatal(err)
	}
	if len(s.res.Ratios) != 1 {
		t.Fatalf("%d rows, want 1", len(s.res.Ratios))
	}
	r := s.res.Ratios[0]
	if r.Ratio.N != 1 || r.Ratio.Median <= 1 || !strings.Contains(r.Note, "scaling exponent") {
		t.Errorf("row %+v", r)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, s.res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| toolchain | pass pipeline -O2, 100k-node / 10k-node graph |") {
		t.Errorf("table lacks the row:\n%s", b.String())
	}
}

// TestTaskQuality: a variant scored by a task shows the task figure and
// its change beside the cosine; the original names it once.
func TestTaskQuality(t *testing.T) {
	a, b := 98.0, 96.67
	q := &Quality{Data: "rec_images.npy", Samples: 300, Top1Agree: -1, MinCosine: 0.98, TaskMetric: "ctc sequence accuracy", OriginalTask: &a, Task: &b}
	if got := quality(ModelRow{Variant: "int8 bias-correction", Quality: q}); got != "ctc sequence accuracy 96.67% (-1.33), min cosine 0.98000" {
		t.Errorf("variant: %q", got)
	}
	if got := quality(ModelRow{Variant: "original", Quality: q}); got != "300 samples of rec_images.npy; ctc sequence accuracy 98.00%" {
		t.Errorf("original: %q", got)
	}
}
