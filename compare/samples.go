package compare

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/internal/jsonfloat"
)

// Per-sample figures. A pooled cosine over a whole data set hides a broken
// sample among many good ones and, on an output of one or two values a
// sample, is near 1 for any model; so every output is also compared sample
// by sample (each sample's slice along the output's sample axis), and its
// relative error is measured against how much the reference output varies.

// SmallOutput is the number of elements per sample below which a cosine
// says nothing (two 1-element vectors of the same sign have cosine 1): such
// outputs are judged by their relative error over all samples instead.
const SmallOutput = 16

// ClearMargin is how far, in multiples of a row's RMS difference between
// the two models, the reference's top-1 must lead its runner-up for the
// row to count in the clear-margin top-1 agreement: a smaller lead is a
// near-tie that noise of that size flips (a flip beyond it is rarer than 1
// in 400 for Gaussian noise), and the size of the noise itself is what the
// cosine and the relative error judge.
const ClearMargin = 4.0

// sampleAcc is one sample's running sums over its finite pairs.
type sampleAcc struct {
	n                        int64
	dot, sqA, sqB, sqD, sumA float64
}

func (s *sampleAcc) add(x, y float64) {
	s.n++
	s.dot += x * y
	s.sqA += x * x
	s.sqB += y * y
	s.sqD += (x - y) * (x - y)
	s.sumA += x
}

// spread is the sum of squared deviations of A from its mean.
func (s *sampleAcc) spread() float64 {
	if s.n == 0 {
		return 0
	}
	return math.Max(s.sqA-s.sumA*s.sumA/float64(s.n), 0)
}

// Top1 is top-1 agreement over the rows of an output: the samples of an
// [N, C] output, the positions of a [B, T, V] one (a language model's
// logits). A row is clear when A's top-1 leads its runner-up by more than
// ClearMargin times the row's RMS difference between A and B.
type Top1 struct {
	Per        string  `json:"per"` // "sample" or "position"
	Rows       int64   `json:"rows"`
	Agreement  float64 `json:"agreement"`
	ClearRows  int64   `json:"clear_rows"`
	ClearAgree float64 `json:"clear_agreement"` // over the clear rows; 1 when there is none
	agree      int64
	clearAgree int64
}

// AddShapeMismatch records a batch where B's output has another shape
// than A's (a data-dependent dim: the number of boxes a detector kept):
// its samples count as disagreeing (cosine 0, relative error +Inf) and
// the output fails.
func (acc *Accumulator) AddShapeMismatch(a, b []int64, samples int) {
	s := acc.stats
	s.ShapeMismatches++
	if s.FirstMismatch == "" {
		s.FirstMismatch = fmt.Sprintf("%v from A, %v from B", a, b)
	}
	acc.mismatched += int64(max(samples, 1))
}

// addSamples folds one batch into the per-sample sums: samples is the
// batch's number of samples (0: unknown, the batch is one unit).
func (acc *Accumulator) addSamples(a, b []float32, shape []int64, samples int) {
	s := acc.stats
	axis := sampleAxis(shape, samples)
	if samples <= 1 || axis < 0 {
		samples, axis = 1, -1
	}
	if s.sampleAxis == nil && samples > 1 {
		s.sampleAxis = &axis
	}
	inner, outer := int64(len(a)), int64(1)
	if axis >= 0 {
		inner = 1
		for _, d := range shape[axis+1:] {
			inner *= d
		}
		outer = 0 // an empty output (a zero dim after the sample axis): nothing to add
		if inner > 0 {
			outer = int64(len(a)) / (inner * int64(samples))
		}
	}
	base := len(acc.samples)
	acc.samples = append(acc.samples, make([]sampleAcc, samples)...)
	per := int64(len(a)) / int64(samples)
	if s.SampleElements == 0 || per < s.SampleElements {
		s.SampleElements = per
	}
	for o := int64(0); o < outer; o++ {
		for j := 0; j < samples; j++ {
			sa := &acc.samples[base+j]
			off := (o*int64(samples) + int64(j)) * inner
			for i := off; i < off+inner; i++ {
				x, y := float64(a[i]), float64(b[i])
				if Finite(x) && Finite(y) {
					sa.add(x, y)
				}
			}
		}
	}
}

// sampleAxis is the axis of shape that holds the batch's samples: axis 0
// when its size is the number of samples, else the first axis of that size
// (recurrent outputs carry the batch on axis 1 or 2); -1 when none does.
func sampleAxis(shape []int64, samples int) int {
	if samples <= 0 {
		return -1
	}
	for k, d := range shape {
		if d == int64(samples) {
			return k
		}
	}
	return -1
}

// addRows counts top-1 agreement over rows of length c (A's top-1 against
// B's), and over the rows clear of near-ties.
func (t *Top1) addRows(a, b []float32, c int) {
	for r := 0; r+c <= len(a); r += c {
		ra, rb := a[r:r+c], b[r:r+c]
		t.Rows++
		if newNonFinite(ra, rb) {
			continue // disagrees
		}
		i, margin := topTwo(ra)
		agree := Argmax(rb) == i
		if agree {
			t.agree++
		}
		var sq float64
		for k := range ra {
			d := float64(ra[k]) - float64(rb[k])
			if Finite(d) {
				sq += d * d
			}
		}
		if margin > 0 && margin > ClearMargin*math.Sqrt(sq/float64(c)) {
			t.ClearRows++
			if agree {
				t.clearAgree++
			}
		}
	}
}

func (t *Top1) finish() {
	if t.Rows > 0 {
		t.Agreement = float64(t.agree) / float64(t.Rows)
	}
	t.ClearAgree = 1
	if t.ClearRows > 0 {
		t.ClearAgree = float64(t.clearAgree) / float64(t.ClearRows)
	}
}

// topTwo is v's argmax and its lead over the runner-up.
func topTwo(v []float32) (int, float64) {
	best := Argmax(v)
	second := math.Inf(-1)
	for i, x := range v {
		if i != best && float64(x) > second {
			second = float64(x)
		}
	}
	return best, float64(v[best]) - second
}

// finishSamples sets the per-sample figures from the sums. A sample whose
// reference output is nearly silent (its energy, or its spread, below a
// hundredth of the average sample's) is judged against that average: its
// cosine is left out and its relative error's denominator is floored, so
// an empty detection map or a silent frame is not failed for rounding
// noise a thousand times smaller than the output's signal.
func (acc *Accumulator) finishSamples() {
	s := acc.stats
	s.SampleAxis = -1
	if s.sampleAxis != nil {
		s.SampleAxis = *s.sampleAxis
	}
	s.SamplesCompared = int64(len(acc.samples))
	defer acc.finishMismatches()
	nan := jsonfloat.Float(math.NaN())
	s.MinSampleCosine, s.MaxSampleRelError, s.RelError = nan, nan, nan
	s.WorstCosineSample, s.WorstRelSample = -1, -1
	var energy, spread float64
	var n int64
	for i := range acc.samples {
		energy += acc.samples[i].sqA
		spread += acc.samples[i].spread()
		n += acc.samples[i].n
	}
	if n == 0 {
		return
	}
	meanEnergy, meanSpread := energy/float64(n), spread/float64(n) // per element
	if d := acc.pooledSpread(); d > 0 {
		s.RelError = jsonfloat.Float(math.Sqrt(s.sumSqDiff / d))
	} else if s.sumSqDiff == 0 {
		s.RelError = 0
	} else {
		s.RelError = jsonfloat.Float(math.Inf(1))
	}
	minCos, maxRel := math.Inf(1), math.Inf(-1)
	for i := range acc.samples {
		sa := &acc.samples[i]
		if sa.n == 0 {
			continue
		}
		if sa.sqA >= 0.01*meanEnergy*float64(sa.n) {
			c := 1.0
			switch {
			case sa.sqA > 0 && sa.sqB > 0:
				c = sa.dot / math.Sqrt(sa.sqA*sa.sqB)
			case sa.sqA != sa.sqB:
				c = 0
			}
			if c < minCos {
				minCos, s.WorstCosineSample = c, int64(i)
			}
		}
		den := math.Max(sa.spread(), 0.01*meanSpread*float64(sa.n))
		r := 0.0
		switch {
		case den > 0:
			r = math.Sqrt(sa.sqD / den)
		case sa.sqD > 0:
			r = math.Inf(1)
		}
		if r > maxRel {
			maxRel, s.WorstRelSample = r, int64(i)
		}
	}
	if !math.IsInf(minCos, 1) {
		s.MinSampleCosine = jsonfloat.Float(minCos)
	}
	if !math.IsInf(maxRel, -1) {
		s.MaxSampleRelError = jsonfloat.Float(maxRel)
	}
}

// finishMismatches counts the samples whose shapes differed as the worst
// there can be: cosine 0, relative error +Inf.
func (acc *Accumulator) finishMismatches() {
	s := acc.stats
	if acc.mismatched == 0 {
		return
	}
	s.SamplesCompared += acc.mismatched
	s.WorstCosineSample, s.WorstRelSample = -1, -1
	s.MinSampleCosine = 0
	inf := jsonfloat.Float(math.Inf(1))
	s.MaxSampleRelError, s.RelError = inf, inf
}

// pooledSpread is the sum of squared deviations of A from its mean over
// every finite pair of every sample.
func (acc *Accumulator) pooledSpread() float64 {
	var n int64
	var sq, sum float64
	for i := range acc.samples {
		n += acc.samples[i].n
		sq += acc.samples[i].sqA
		sum += acc.samples[i].sumA
	}
	if n == 0 {
		return 0
	}
	return math.Max(sq-sum*sum/float64(n), 0)
}

// Text is the agreement over all rows and over the clear ones:
// "92.19% (100.00% of 41)".
func (t *Top1) Text() string {
	if t.ClearRows == 0 {
		return fmt.Sprintf("%.2f%% (no row clear)", 100*t.Agreement)
	}
	return fmt.Sprintf("%.2f%% (%.2f%% of %d)", 100*t.Agreement, 100*t.ClearAgree, t.ClearRows)
}

// SampleCosineText is the worst per-sample cosine for a table: "-" for an
// output too small for a cosine to mean anything (SmallOutput).
func (s *OutputStats) SampleCosineText() string {
	if s.SampleElements < SmallOutput {
		return "-"
	}
	return s.MinSampleCosine.Text("%.5f")
}

// RelErrorText is the relative error a guard judges: the worst sample's
// for outputs of SmallOutput elements or more, else the pooled one.
func (s *OutputStats) RelErrorText() string {
	if s.SampleElements < SmallOutput {
		return s.RelError.Text("%.3g")
	}
	return s.MaxSampleRelError.Text("%.3g")
}
