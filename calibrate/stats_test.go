package calibrate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func uniform(r *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return v
}

func newStats(t *testing.T, opts Options, name string, batches ...[]float32) *Stats {
	t.Helper()
	s, err := NewStats([]string{name}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := s.Observe(name, b); err != nil {
			t.Fatal(err)
		}
		s.Batches++
	}
	return s
}

func rangeOf(t *testing.T, s *Stats, m Method, opts Options) Range {
	t.Helper()
	rs, err := s.Ranges(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d ranges", len(rs))
	}
	for _, r := range rs {
		return r
	}
	return Range{}
}

// Growing the histogram must give exactly the counts of a histogram built
// at the final range in one go, and keep every count.
func TestHistogramGrowth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b1 := uniform(r, 50000, -1, 1)
	b1[0] = 1 // upper = 1+2^-12 after the first batch
	b2 := uniform(r, 50000, -3.5, 3.5)
	b2[0] = -3.5 // grows twice: x2, x4
	s := newStats(t, Options{}, "x", b1, b2)
	h := &s.t["x"].hist
	if want := 4 * (1 + 1.0/4096); h.upper != want {
		t.Fatalf("upper %v, want %v", h.upper, want)
	}
	if got := h.total(); got != 100000 {
		t.Fatalf("total %d, want 100000", got)
	}
	var direct histogram
	direct.upper = h.upper
	for _, b := range [][]float32{b1, b2} {
		for _, v := range b {
			direct.counts[direct.bin(math.Abs(float64(v)))]++
		}
	}
	if h.counts != direct.counts {
		for i := range h.counts {
			if h.counts[i] != direct.counts[i] {
				t.Fatalf("bin %d: merged %d, direct %d", i, h.counts[i], direct.counts[i])
			}
		}
	}
	// |x| of the mixture is half U(0,1), half U(0,3.5): for a <= 1,
	// P(|x| < a) = a/2 + a/7.
	a := 0.7
	q := 0.5*a + 0.5*a/3.5
	if got := h.quantile(q); math.Abs(got-a) > 2*h.width() {
		t.Errorf("quantile(%v) = %v, want %v within 2 bins (%v)", q, got, a, h.width())
	}
	if got := h.quantile(1); math.Abs(got-3.5) > h.width() {
		t.Errorf("quantile(1) = %v, want 3.5", got)
	}
	sum, _ := s.Summary("x")
	if sum.Min != -3.5 || sum.Max != 1 && sum.Max < 3 || sum.Count != 100000 || sum.Batches != 2 {
		t.Errorf("summary %+v", sum)
	}
}

// A tensor of zeros first, then values, keeps the zeros in bin 0.
func TestHistogramZerosFirst(t *testing.T) {
	s := newStats(t, Options{}, "x", make([]float32, 10), []float32{2, -1})
	h := &s.t["x"].hist
	if h.upper <= 2 || h.upper > 2.001 || h.counts[0] != 10 || h.counts[HistBins-1] != 1 || h.counts[HistBins/2-1] != 1 || h.total() != 12 {
		t.Fatalf("upper %v counts[0] %d last %d total %d", h.upper, h.counts[0], h.counts[HistBins-1], h.total())
	}
}

func TestUniformMethods(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var batches [][]float32
	for range 10 {
		batches = append(batches, uniform(r, 100000, -1, 1))
	}
	s := newStats(t, Options{}, "x", batches...)
	sum, _ := s.Summary("x")
	if got := rangeOf(t, s, MinMax, Options{}); got != (Range{sum.Min, sum.Max}) {
		t.Errorf("minmax %v, want %v", got, Range{sum.Min, sum.Max})
	}
	p := rangeOf(t, s, Percentile, Options{Percentile: 99})
	if math.Abs(p.Max-0.99) > 0.002 || math.Abs(p.Min+0.99) > 0.002 {
		t.Errorf("percentile 99 of U(-1,1) = %v, want ±0.99", p)
	}
	// Entropy keeps (nearly) the whole range of a uniform distribution.
	if e := rangeOf(t, s, Entropy, Options{}); e.Max < 0.95 || e.Min > -0.95 {
		t.Errorf("entropy of U(-1,1) = %v, want about ±1", e)
	}
}

// The MSE optimum for U(0,1) quantized to uint8 [0,T] with rounding error
// s^2/12, s = T/255: d/dT [(1-T)^3/3 + T*(T/255)^2/12] = 0 gives
// T = 510/511; for U(-1,1) in int8 (s = T/127), T = 254/255.
func TestMSEAnalytic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		lo   float64
		want float64
	}{{0, 510.0 / 511}, {-1, 254.0 / 255}} {
		var batches [][]float32
		for range 20 {
			b := uniform(r, 100000, c.lo, 1)
			batches = append(batches, b)
		}
		batches[0][0] = 1
		s := newStats(t, Options{}, "x", batches...)
		got := rangeOf(t, s, MSE, Options{})
		if w := s.t["x"].hist.width(); math.Abs(got.Max-c.want) > 2*w {
			t.Errorf("U(%v,1): mse T = %v, want %v within 2 bins (%v)", c.lo, got.Max, c.want, w)
		}
		if c.lo == 0 && got.Min != 0 {
			t.Errorf("non-negative data: min %v, want 0", got.Min)
		}
		if c.lo < 0 && got.Min != -got.Max {
			t.Errorf("signed data: range %v is not symmetric", got)
		}
	}
}

// Outliers: minmax keeps them, the histogram methods clip them.
func TestGaussianOutliers(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var batches [][]float32
	for range 10 {
		b := make([]float32, 50000)
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		batches = append(batches, b)
	}
	batches[3][17] = 50
	batches[6][5] = -50
	s := newStats(t, Options{}, "x", batches...)
	if mm := rangeOf(t, s, MinMax, Options{}); mm != (Range{-50, 50}) {
		t.Errorf("minmax %v, want [-50, 50]", mm)
	}
	for _, m := range []Method{Percentile, Entropy, MSE} {
		got := rangeOf(t, s, m, Options{})
		// MSE weighs the two 50-sigma outliers' squared clipping error
		// against 500k samples' rounding error and clips less.
		limit := 10.0
		if m == MSE {
			limit = 25
		}
		if got.Max > limit || got.Min < -limit || got.Max < 2.5 || got.Min > -2.5 {
			t.Errorf("%s: %v, want the outliers clipped (|T| in [2.5, %v])", m, got, limit)
		}
		if got.Min != -got.Max {
			t.Errorf("%s: %v not symmetric for symmetric data", m, got)
		}
		t.Logf("%s: %v", m, got)
	}
	p := rangeOf(t, s, Percentile, Options{Percentile: 99.9})
	// 99.9th percentile of |N(0,1)| is 3.2905.
	if math.Abs(p.Max-3.2905) > 0.05 {
		t.Errorf("percentile 99.9 = %v, want 3.29", p.Max)
	}
}

// Non-negative data (Relu outputs) get [0, T].
func TestNonNegative(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	b := make([]float32, 200000)
	for i := range b {
		if i%2 == 0 {
			b[i] = float32(math.Abs(r.NormFloat64()))
		}
	}
	b[1] = 40
	s := newStats(t, Options{}, "x", b)
	for _, m := range Methods {
		got := rangeOf(t, s, m, Options{})
		if got.Min != 0 {
			t.Errorf("%s: min %v, want 0", m, got.Min)
		}
		if limit := map[Method]float64{Percentile: 10, Entropy: 10, MSE: 36, Auto: 36}[m]; m != MinMax && got.Max > limit {
			t.Errorf("%s: max %v, want the outlier clipped", m, got.Max)
		}
	}
}

func TestMovingAverage(t *testing.T) {
	opts := Options{MovingAverage: 0.5}
	s := newStats(t, opts, "x",
		[]float32{-1, 1}, []float32{-2, 2}, []float32{-2, 2}, []float32{-2, 2})
	got := rangeOf(t, s, MinMax, opts)
	if got != (Range{-1.875, 1.875}) {
		t.Errorf("moving average range %v, want ±1.875", got)
	}
	if got := rangeOf(t, s, MinMax, Options{}); got != (Range{-1.875, 1.875}) {
		t.Errorf("moving average range with alpha 0 in Ranges %v, want the collected one", got)
	}
	if _, err := s.Ranges(MinMax, Options{MovingAverage: 0.1}); err == nil {
		t.Error("a different moving average than collected was accepted")
	}
	plain := newStats(t, Options{}, "x", []float32{-1, 1}, []float32{-2, 2})
	if got := rangeOf(t, plain, MinMax, Options{}); got != (Range{-2, 2}) {
		t.Errorf("plain minmax %v", got)
	}
	if _, err := NewStats([]string{"x"}, Options{MovingAverage: 2}); err == nil {
		t.Error("moving average 2 accepted")
	}
}

func TestNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		s, err := NewStats([]string{"conv_out"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Observe("conv_out", []float32{1, 2}); err != nil {
			t.Fatal(err)
		}
		err = s.Observe("conv_out", []float32{1, bad})
		if err == nil || !strings.Contains(err.Error(), `"conv_out"`) || !strings.Contains(err.Error(), "batch 1") {
			t.Errorf("%v: error %v, want one naming the tensor and batch 1", bad, err)
		}
		if sum, _ := s.Summary("conv_out"); sum.Count != 2 {
			t.Errorf("a rejected batch changed the statistics: %+v", sum)
		}
	}
}

// TestSkipNonFinite: with SkipNonFinite, NaN and infinities are left out
// of min, max, count and histogram, and counted.
func TestSkipNonFinite(t *testing.T) {
	s, err := NewStats([]string{"log_out"}, Options{SkipNonFinite: true})
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(-1))
	for _, batch := range [][]float32{{inf, inf}, {-3, inf, 5, float32(math.NaN())}, {1}} {
		if err := s.Observe("log_out", batch); err != nil {
			t.Fatal(err)
		}
	}
	sum, _ := s.Summary("log_out")
	if sum.Min != -3 || sum.Max != 5 || sum.Count != 3 || s.NonFinite != 4 {
		t.Errorf("summary %+v, %d non-finite; want [-3, 5], 3 values, 4 non-finite", sum, s.NonFinite)
	}
	rs, err := s.Ranges(Percentile, Options{Percentile: 100})
	if err != nil || rs["log_out"].Max != 5 {
		t.Errorf("ranges %v, %v", rs, err)
	}
}

func TestEmpty(t *testing.T) {
	s, err := NewStats([]string{"a", "b"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Methods {
		if _, err := s.Ranges(m, Options{}); err == nil || err.Error() != "calibration data is empty" {
			t.Errorf("%s on no data: %v", m, err)
		}
	}
	if _, err := s.Ranges("bogus", Options{}); err == nil {
		t.Error("unknown method accepted")
	}
	if err := s.Observe("c", []float32{1}); err == nil {
		t.Error("observing an unknown tensor was accepted")
	}
}

// A spike of exact zeros (90% of a Relu output) must not pull the entropy
// threshold down: the rest is U(0,1), which entropy keeps nearly whole.
func TestEntropyZeroSpike(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	b := make([]float32, 500000)
	for i := range b {
		if i%10 == 0 {
			b[i] = float32(r.Float64())
		}
	}
	s := newStats(t, Options{}, "relu", b)
	if got := rangeOf(t, s, Entropy, Options{}); got.Min != 0 || got.Max < 0.9 {
		t.Errorf("entropy with 90%% zeros: %v, want [0, >0.9]", got)
	}
}

// Values away from 0 (an SE block's HardSigmoid output): the KL search
// used to stop just past the smallest value, where P and Q are both one
// spike, and clip every value to it. The threshold may clip at most 1%.
func TestEntropyOffsetFromZero(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	s := newStats(t, Options{}, "hardsigmoid", uniform(r, 200000, 0.096, 0.345))
	got := rangeOf(t, s, Entropy, Options{})
	if got.Min != 0 || got.Max < 0.34 {
		t.Errorf("entropy of U(0.096, 0.345): %v, want [0, >= 0.34] (at most 1%% clipped)", got)
	}
}

// Auto picks, per tensor, the candidate with the least quantization
// error, and the cache says which.
func TestAutoPicksLeastError(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	gauss := make([]float32, 200000)
	for i := range gauss {
		gauss[i] = float32(r.NormFloat64())
	}
	gauss[3] = 60 // one outlier: minmax wastes the levels
	s, err := NewStats([]string{"gauss", "uniform"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Observe("gauss", gauss); err != nil {
		t.Fatal(err)
	}
	if err := s.Observe("uniform", uniform(r, 200000, 0, 1)); err != nil {
		t.Fatal(err)
	}
	c, err := s.Cache(Auto, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Tensors {
		ts := s.t[e.Name]
		got := quantError(&ts.hist, ts.min < 0, max(-e.Min, e.Max))
		for _, cand := range AutoCandidates {
			rr := s.tensorRange(ts, cand.Method, cand.Percentile)
			if e2 := quantError(&ts.hist, ts.min < 0, max(-rr.Min, rr.Max)); e2 < got {
				t.Errorf("%s: auto chose %s (error %.3g) but %s has %.3g", e.Name, e.Method, got, cand.Name, e2)
			}
		}
		t.Logf("%s: %s [%.4g, %.4g]", e.Name, e.Method, e.Min, e.Max)
	}
	choice := map[string]string{}
	for _, e := range c.Tensors {
		choice[e.Name] = e.Method
	}
	if choice["gauss"] == "minmax" {
		t.Errorf("gauss with a 60-sigma outlier: auto kept minmax")
	}
	if n := c.Choices(); n[choice["gauss"]] == 0 || len(c.Tensors) != 2 {
		t.Errorf("choices %v", n)
	}
	// The cache with its per-tensor candidates reads back.
	p := t.TempDir() + "/auto.json"
	if err := WriteCache(p, c); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCache(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Tensors[0].Method != c.Tensors[0].Method {
		t.Errorf("read back %v, want %v", back.Tensors[0], c.Tensors[0])
	}
	bad := *back
	bad.Method = string(Percentile)
	if err := bad.validate(); err == nil {
		t.Error("a percentile cache with per-tensor candidates was accepted")
	}
}

// Observe's loop over finite values and the general path (the one tensors
// read in place and data with NaN or infinities take) must give the same
// statistics, bit for bit, signed zeros included: calibration files and
// the models made from them must not depend on the path.
func TestObserveFastPathMatchesGeneral(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	r := rand.New(rand.NewPCG(7, 8))
	batches := [][]float32{
		uniform(r, 1000, -3, 5),
		{0, negZero, 1, 2},
		{negZero, 0, -1},
		{0, 0, 0},
		{negZero, negZero},
		{0, negZero},
		uniform(r, 100, 0, 40),
		{7},
	}
	// Every batch first on fresh statistics (where a batch's own min and
	// max are the tensor's), then all of them in a row.
	runs := [][][]float32{batches}
	for _, b := range batches {
		runs = append(runs, [][]float32{b})
	}
	for _, run := range runs {
		fast, err := NewStats([]string{"x"}, Options{MovingAverage: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		general, err := NewStats([]string{"x"}, Options{MovingAverage: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range run {
			if err := fast.Observe("x", b); err != nil {
				t.Fatal(err)
			}
			if _, err := general.observe("x", len(b), func(i int) float32 { return b[i] }, false); err != nil {
				t.Fatal(err)
			}
			f, g := fast.t["x"], general.t["x"]
			same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
			if !same(f.min, g.min) || !same(f.max, g.max) || !same(f.avgMin, g.avgMin) || !same(f.avgMax, g.avgMax) ||
				f.count != g.count || f.batches != g.batches || f.hist.upper != g.hist.upper || f.hist.counts != g.hist.counts {
				t.Fatalf("batch %d of %v: fast min %v max %v count %d upper %v, general min %v max %v count %d upper %v (or their averages or bins differ)",
					i, run[i][:min(len(run[i]), 4)], f.min, f.max, f.count, f.hist.upper, g.min, g.max, g.count, g.hist.upper)
			}
		}
	}
}

// TestRangesOnly: statistics kept without histograms have the same range
// and counts (non-finite values left out alike), minmax ranges, and refuse
// the methods that need histograms.
func TestRangesOnly(t *testing.T) {
	batches := [][]float32{{0, -0.5, 3, 2}, {float32(math.Inf(-1)), 7, -1, float32(math.NaN())}, {1e-3, -4}}
	full, err := NewStats([]string{"x"}, Options{SkipNonFinite: true})
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := NewStats([]string{"x"}, Options{SkipNonFinite: true, RangesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := full.Observe("x", b); err != nil {
			t.Fatal(err)
		}
		if err := ranges.Observe("x", b); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := full.Summary("x")
	r, _ := ranges.Summary("x")
	if f != r || full.NonFinite != ranges.NonFinite || r.Min != -4 || r.Max != 7 || r.Count != 8 {
		t.Errorf("ranges only %+v (%d non-finite), full %+v (%d)", r, ranges.NonFinite, f, full.NonFinite)
	}
	if ranges.t["x"].hist.upper != 0 {
		t.Error("ranges only built a histogram")
	}
	mm, err := ranges.Ranges(MinMax, Options{})
	if err != nil || mm["x"] != (Range{Min: -4, Max: 7}) {
		t.Errorf("minmax %v, %v", mm, err)
	}
	if _, err := ranges.Ranges(Percentile, Options{}); err == nil || !strings.Contains(err.Error(), "ranges only") {
		t.Errorf("percentile from ranges only: %v", err)
	}
}
