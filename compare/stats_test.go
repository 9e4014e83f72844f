package compare

import (
	"math"
	"strings"
	"testing"

	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
)

func TestAccumulatorStatistics(t *testing.T) {
	acc := NewAccumulator("y", 0.05, 0, StatMax)
	a := []float32{1, 2, 3, 4}
	b := []float32{1, 2.1, 3, 3.9}
	if err := acc.Add(a, b, []int64{4}); err != nil {
		t.Fatal(err)
	}
	s := acc.Result()
	near := func(name string, g jsonfloat.Float, want float64) {
		t.Helper()
		got := float64(g)
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	near("max abs", s.MaxAbs, 0.1)
	near("mean abs", s.MeanAbs, 0.05)
	near("max rel", s.MaxRel, 0.05)
	// cosine of a and b computed by hand
	dot, na, nb := 0.0, 0.0, 0.0
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	near("cosine", s.Cosine, dot/math.Sqrt(na*nb))
	near("snr", s.SNRdB, 10*math.Log10(30/0.02))
	if s.Pass {
		t.Error("max error 0.1 passed atol 0.05")
	}
	near("min atol", s.MinAtol, 0.1)
	// At atol 0.05 the worst element needs (0.1-0.05)/2 relative.
	near("min rtol", s.MinRtol, 0.025)
	if s.Classifier {
		t.Error("a rank-1 output is not a classifier")
	}
}

func TestToleranceSemantics(t *testing.T) {
	a := []float32{100, 1}
	b := []float32{101, 1}
	// |a-b| = 1 <= 0 + 0.01*100: allclose passes on rtol alone.
	s := acc(t, a, b, 0, 0.01, StatMax)
	if !s.Pass || s.Value != 0 {
		t.Errorf("rtol 1%% should pass with zero excess, got pass=%v value=%g", s.Pass, s.Value)
	}
	s = acc(t, a, b, 0.5, 0, StatMax)
	if s.Pass {
		t.Error("abs error 1 passed atol 0.5")
	}
	// mean of the excess: (1 + 0)/2
	s = acc(t, a, b, 0.5, 0, StatMean)
	if !s.Pass || s.Value != 0.5 {
		t.Errorf("mean check: pass=%v value=%g, want pass with 0.5", s.Pass, s.Value)
	}
}

func acc(t *testing.T, a, b []float32, atol, rtol float64, st Stat) *OutputStats {
	t.Helper()
	x := NewAccumulator("y", atol, rtol, st)
	if err := x.Add(a, b, []int64{int64(len(a))}); err != nil {
		t.Fatal(err)
	}
	return x.Result()
}

func TestClassifierAgreement(t *testing.T) {
	// Three samples, six classes. B agrees on sample 0, has A's top-1
	// second on sample 1, and far down on sample 2.
	a := []float32{
		9, 1, 0, 0, 0, 0,
		0, 9, 1, 0, 0, 0,
		9, 0, 0, 0, 0, 0,
	}
	b := []float32{
		9, 1, 0, 0, 0, 0,
		0, 8, 9, 0, 0, 0,
		0, 5, 4, 3, 2, 1,
	}
	x := NewAccumulator("y", 1, 0, StatMax)
	if err := x.Add(a, b, []int64{3, 6}); err != nil {
		t.Fatal(err)
	}
	s := x.Result()
	if !s.Classifier || s.Samples != 3 {
		t.Fatalf("classifier %v samples %d", s.Classifier, s.Samples)
	}
	if math.Abs(s.Top1Agree-1.0/3) > 1e-9 || math.Abs(s.Top5Agree-2.0/3) > 1e-9 {
		t.Errorf("top-1 %g (want 1/3), top-5 %g (want 2/3)", s.Top1Agree, s.Top5Agree)
	}
}

func TestNaNHandling(t *testing.T) {
	nan := float32(math.NaN())
	s := acc(t, []float32{nan, 1}, []float32{nan, 1}, 0, 0, StatMax)
	if !s.Pass || s.Mismatch != 0 || s.NaN != (schema.Sides{A: 1, B: 1}) || s.Elements != 1 || s.Total != 2 {
		t.Errorf("NaN in both should match: %+v", s)
	}
	s = acc(t, []float32{nan, 1}, []float32{0, 1}, 1, 0, StatMax)
	if s.Pass || s.Mismatch != 1 || s.NewNonFinite != 0 {
		t.Errorf("NaN in one only must fail: pass=%v mismatches=%d", s.Pass, s.Mismatch)
	}
}

// A non-finite B where A is finite fails whatever the tolerance, and the
// statistics are over the finite pairs only.
func TestNonFiniteInBFails(t *testing.T) {
	inf := float32(math.Inf(1))
	s := acc(t, []float32{1, 2, 3, 4}, []float32{1, 2, inf, float32(math.NaN())}, math.Inf(1), 0, StatMax)
	if s.Pass || s.NewNonFinite != 2 || s.Elements != 2 || s.Total != 4 {
		t.Fatalf("pass=%v new non-finite %d, %d of %d pairs", s.Pass, s.NewNonFinite, s.Elements, s.Total)
	}
	if s.MaxAbs != 0 || s.Cosine != 1 || s.Inf != (schema.Sides{A: 0, B: 1}) || s.NaN != (schema.Sides{A: 0, B: 1}) {
		t.Errorf("over the finite pairs: max abs %v cosine %v, inf %+v nan %+v", s.MaxAbs, s.Cosine, s.Inf, s.NaN)
	}
	if f := s.Failure(); !strings.Contains(f, "2 NaN/Inf values in B where A is finite") || !strings.Contains(f, "2 of 4 finite pairs") {
		t.Errorf("failure %q", f)
	}
	// Equal infinities match and are left out of the statistics.
	s = acc(t, []float32{inf, 1}, []float32{inf, 1}, 0, 0, StatMax)
	if !s.Pass || s.Elements != 1 || s.Inf != (schema.Sides{A: 1, B: 1}) {
		t.Errorf("equal infinities: %+v", s)
	}
	s = acc(t, []float32{inf, 1}, []float32{-inf, 1}, 1, 0, StatMax)
	if s.Pass || s.Mismatch != 1 {
		t.Errorf("+Inf against -Inf passed: %+v", s)
	}
}

// With no finite pair nothing reads as agreement: cosine, SNR and the
// errors are NaN and the output fails, even when both sides are NaN.
func TestNoFinitePairIsNotPerfect(t *testing.T) {
	nan := float32(math.NaN())
	for _, a := range [][]float32{{1, 2, 3}, {nan, nan, nan}} {
		s := acc(t, a, []float32{nan, nan, nan}, math.Inf(1), 0, StatMax)
		if s.Pass || s.Elements != 0 {
			t.Errorf("A %v: passed with %d finite pairs", a, s.Elements)
		}
		for name, v := range map[string]jsonfloat.Float{"cosine": s.Cosine, "snr": s.SNRdB, "max abs": s.MaxAbs, "value": s.Value} {
			if !math.IsNaN(float64(v)) {
				t.Errorf("A %v: %s %v, want NaN", a, name, v)
			}
		}
		if s.Cosine.Text("%.6f") != "n/a" {
			t.Errorf("cosine reads %q", s.Cosine.Text("%.6f"))
		}
	}
	// A classifier whose B rows are NaN agrees on nothing.
	x := NewAccumulator("y", 1, 0, StatMax)
	if err := x.Add([]float32{9, 1, 1, 9}, []float32{nan, nan, nan, nan}, []int64{2, 2}); err != nil {
		t.Fatal(err)
	}
	if s := x.Result(); s.Top1Agree != 0 {
		t.Errorf("top-1 agreement %g with an all-NaN B", s.Top1Agree)
	}
	// An empty output has nothing to fail.
	if s := acc(t, nil, nil, 0, 0, StatMax); !s.Pass {
		t.Errorf("an empty output failed: %+v", s)
	}
}

func TestP99FromHistogram(t *testing.T) {
	x := NewAccumulator("y", 0, 0, StatP99)
	a := make([]float32, 1000)
	b := make([]float32, 1000)
	for i := range b {
		b[i] = float32(i) / 1000 // errors 0 .. 0.999
	}
	if err := x.Add(a, b, []int64{1000}); err != nil {
		t.Fatal(err)
	}
	s := x.Result()
	// The exact p99 (nearest rank) is 0.989; the histogram is within 2.3%.
	if math.Abs(float64(s.P99Abs)-0.989)/0.989 > 0.024 {
		t.Errorf("p99 %g, want 0.989 within 2.3%%", s.P99Abs)
	}
	if math.Abs(float64(s.Value-s.P99Abs)) > 1e-12 {
		t.Errorf("p99 check value %g differs from p99 abs %g with rtol 0", s.Value, s.P99Abs)
	}
	// With rtol the checked excess is its own distribution: errors
	// 0 .. 0.999 on values of 1 with rtol 0.5 exceed by 0 .. 0.499.
	x = NewAccumulator("y", 0, 0.5, StatP99)
	for i := range a {
		a[i], b[i] = 1, 1+float32(i)/1000
	}
	if err := x.Add(a, b, []int64{1000}); err != nil {
		t.Fatal(err)
	}
	if s := x.Result(); math.Abs(float64(s.Value)-0.489)/0.489 > 0.024 || math.Abs(float64(s.P99Abs)-0.989)/0.989 > 0.024 {
		t.Errorf("rtol 0.5: p99 excess %g (want 0.489), p99 abs %g (want 0.989)", s.Value, s.P99Abs)
	}
}

// A data-dependent output whose shape differs between A and B (a
// detector keeping another number of boxes) disagrees on those samples:
// the output fails with the worst per-sample figures and says why.
func TestShapeMismatchDisagrees(t *testing.T) {
	x := NewAccumulator("boxes", 1, 0, StatMax)
	if err := x.AddSamples([]float32{1, 2, 3, 4}, []float32{1, 2, 3, 4}, []int64{1, 4}, 1); err != nil {
		t.Fatal(err)
	}
	x.AddShapeMismatch([]int64{2, 4}, []int64{3, 4}, 1)
	s := x.Result()
	if s.Pass || s.ShapeMismatches != 1 || s.SamplesCompared != 2 || s.MinSampleCosine != 0 || !math.IsInf(float64(s.MaxSampleRelError), 1) {
		t.Fatalf("pass %v, %d mismatches, %d samples, cosine %v, rel %v", s.Pass, s.ShapeMismatches, s.SamplesCompared, s.MinSampleCosine, s.MaxSampleRelError)
	}
	if f := s.Failure(); !strings.Contains(f, "[2 4] from A, [3 4] from B") {
		t.Errorf("failure %q", f)
	}
}
