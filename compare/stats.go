// Package compare measures how far one model's outputs are from
// another's: error statistics per output, classifier agreement, task
// accuracy against labels, and tolerance checks that say the smallest
// tolerance that would have passed.
package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
)

// Stat is the statistic a tolerance judges.
type Stat string

// The statistics a tolerance can judge.
const (
	StatMax  Stat = "max"
	StatMean Stat = "mean"
	StatP99  Stat = "p99"
)

// Stats are the statistics a check can use.
var Stats = []Stat{StatMax, StatMean, StatP99}

// ParseStat reads max, mean or p99.
func ParseStat(s string) (Stat, error) {
	if slices.Contains(Stats, Stat(s)) {
		return Stat(s), nil
	}
	return "", fmt.Errorf("unknown statistic %q (want %s)", s, choice.Or(Stats))
}

// OutputStats are the error statistics of one output over all samples,
// with A as the reference. Excess is the part of each element's error
// beyond the relative allowance, max(|a-b| - rtol*|a|, 0): an output passes
// when the chosen statistic of the excess is at most atol, which for max is
// numpy's allclose(b, a, rtol, atol).
//
// NaN and infinities are counted, per side, and never averaged in: every
// error statistic, cosine and SNR is over the finite pairs (a and b both
// finite), Elements of Total. A non-finite element of B where A is finite
// (NewNonFinite), or any other disagreement in non-finite values (NaN
// against a number, +Inf against -Inf), fails the output, and so does an
// output with elements but no finite pair: its statistics are NaN ("NaN"
// in JSON, "n/a" in tables), never a perfect score.
type OutputStats struct {
	Name string `json:"name"`
	// Total is every element compared, Elements the finite pairs among
	// them: what the statistics below are over.
	Total    int64 `json:"total"`
	Elements int64 `json:"elements"`
	// NaN and Inf count the NaN and infinite elements of A and of B.
	NaN schema.Sides `json:"nan"`
	Inf schema.Sides `json:"inf"`
	// NewNonFinite counts elements where A is finite and B is not;
	// Mismatch every element whose non-finite value A and B do not share
	// (NewNonFinite included). Either fails the output.
	NewNonFinite int64           `json:"b_nonfinite_where_a_finite"`
	Mismatch     int64           `json:"nonfinite_mismatches"`
	MaxAbs       jsonfloat.Float `json:"max_abs_error"`
	MeanAbs      jsonfloat.Float `json:"mean_abs_error"`
	MaxRel       jsonfloat.Float `json:"max_rel_error"`     // |a-b|/|a| over elements with a != 0
	MaxRef       jsonfloat.Float `json:"max_abs_reference"` // max |a|: the scale of the output
	P99Abs       jsonfloat.Float `json:"p99_abs_error"`
	Cosine       jsonfloat.Float `json:"cosine_similarity"`
	SNRdB        jsonfloat.Float `json:"snr_db"` // 10 log10(sum a^2 / sum (a-b)^2); +Inf when identical

	// Classifier agreement, for outputs shaped [N, C] with C >= 2. A
	// sample whose row of B is non-finite where A's is finite disagrees.
	Classifier bool    `json:"classifier"`
	Samples    int64   `json:"samples,omitempty"`
	Top1Agree  float64 `json:"top1_agreement,omitempty"` // argmax equal
	Top5Agree  float64 `json:"top5_agreement,omitempty"` // A's top-1 among B's top 5 (C >= 5)
	// Top1 is top-1 agreement per row, all rows and those clear of
	// near-ties (see Top1): the samples of an [N, C] output, the positions
	// of a [B, T, V] one; nil for other shapes.
	Top1 *Top1 `json:"top1,omitempty"`

	// Per-sample figures (see samples.go). SampleAxis is the output's
	// axis that holds the samples (-1: one sample a run, or none found);
	// SampleElements its elements per sample (the fewest seen).
	SampleAxis      int   `json:"sample_axis"`
	SampleElements  int64 `json:"elements_per_sample"`
	SamplesCompared int64 `json:"samples_compared"`
	// MinSampleCosine is the worst cosine of one sample (NaN when none was
	// measured), WorstCosineSample its index in the data.
	MinSampleCosine   jsonfloat.Float `json:"min_sample_cosine"`
	WorstCosineSample int64           `json:"worst_cosine_sample"`
	// MaxSampleRelError is the worst sample's RMS error over the RMS
	// deviation of A from its mean on that sample; RelError the same over
	// all samples together.
	MaxSampleRelError jsonfloat.Float `json:"max_sample_rel_error"`
	WorstRelSample    int64           `json:"worst_rel_error_sample"`
	RelError          jsonfloat.Float `json:"rel_error"`
	// ShapeMismatches counts the batches where B's output had another
	// shape than A's (a dim that depends on the data), FirstMismatch the
	// first; such samples disagree and the output fails.
	ShapeMismatches int64  `json:"shape_mismatches,omitempty"`
	FirstMismatch   string `json:"first_shape_mismatch,omitempty"`

	// Tolerance verdict.
	Atol    float64         `json:"atol"`
	Rtol    float64         `json:"rtol"`
	Check   Stat            `json:"check"`
	Value   jsonfloat.Float `json:"value"` // the statistic of the excess that was judged
	Pass    bool            `json:"pass"`
	MinAtol jsonfloat.Float `json:"min_passing_atol"` // at this rtol
	MinRtol jsonfloat.Float `json:"min_passing_rtol"` // at this atol (max check only; else -1); +Inf when none passes

	maxAbs, maxRel, maxRef                   float64
	sumAbs, sumSqA, sumSqB, sumAB, sumSqDiff float64
	maxExcess, sumExcess                     float64
	maxRelAtAtol                             float64
	absHist, excessHist                      logHist
	top1, top5                               int64
	sampleAxis                               *int
}

// Finite reports whether x is neither NaN nor infinite.
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// FinitePairs says what the statistics are over, for tables: "all 2560"
// or "12 of 2560".
func (s *OutputStats) FinitePairs() string {
	if s.Elements == s.Total {
		return fmt.Sprintf("all %d", s.Total)
	}
	return fmt.Sprintf("%d of %d", s.Elements, s.Total)
}

// Failure says why the output failed, in one phrase ("" when it passed).
func (s *OutputStats) Failure() string {
	switch {
	case s.Pass:
		return ""
	case s.ShapeMismatches > 0:
		return fmt.Sprintf("shapes differ in %d batches (first: %s)", s.ShapeMismatches, s.FirstMismatch)
	case s.NewNonFinite > 0:
		return fmt.Sprintf("%d NaN/Inf values in B where A is finite; statistics over %s finite pairs", s.NewNonFinite, s.FinitePairs())
	case s.Mismatch > 0:
		return fmt.Sprintf("%d NaN/Inf values of A that B does not reproduce", s.Mismatch)
	case s.Elements == 0:
		return fmt.Sprintf("no finite pair among %d elements: nothing to measure", s.Total)
	}
	return fmt.Sprintf("%s excess %.3g > atol %.3g; passes with atol >= %.3g", s.Check, float64(s.Value), s.Atol, float64(s.MinAtol))
}

// Accumulator gathers OutputStats batch by batch, in memory constant in
// the output's size (a few sums per sample).
type Accumulator struct {
	stats   *OutputStats
	samples []sampleAcc
	// mismatched counts the samples of batches whose shapes differed.
	mismatched int64
	// byTask: a task plug-in judges the output (a detector's boxes), so
	// its rows are not a classifier's and get no top-k agreement.
	byTask bool
}

// JudgedByTask marks the output as one a task plug-in scores with others
// (task.Multi): rows of boxes [K, 4] are not class scores.
func (acc *Accumulator) JudgedByTask() { acc.byTask = true }

// NewAccumulator starts the statistics of one output.
func NewAccumulator(name string, atol, rtol float64, check Stat) *Accumulator {
	return &Accumulator{stats: &OutputStats{Name: name, Atol: atol, Rtol: rtol, Check: check}}
}

// Add folds in one batch of the output from A (reference) and B as one
// sample. shape is the batch's shape; both slices hold its elements.
func (acc *Accumulator) Add(a, b []float32, shape []int64) error {
	return acc.AddSamples(a, b, shape, 0)
}

// AddSamples folds in one batch of the output from A (reference) and B
// that holds samples samples (0: unknown, one unit). shape is the batch's
// shape; both slices hold its elements.
func (acc *Accumulator) AddSamples(a, b []float32, shape []int64, samples int) error {
	if len(a) != len(b) {
		return fmt.Errorf("output %q: %d elements in A, %d in B", acc.stats.Name, len(a), len(b))
	}
	s := acc.stats
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		s.Total++
		fx, fy := Finite(x), Finite(y)
		if !fx || !fy {
			s.NaN.A += count(math.IsNaN(x))
			s.NaN.B += count(math.IsNaN(y))
			s.Inf.A += count(math.IsInf(x, 0))
			s.Inf.B += count(math.IsInf(y, 0))
			switch {
			case fx:
				s.NewNonFinite++
				s.Mismatch++
			case !(math.IsNaN(x) && math.IsNaN(y)) && x != y:
				s.Mismatch++
			}
			continue
		}
		d := math.Abs(x - y)
		s.Elements++
		s.maxRef = math.Max(s.maxRef, math.Abs(x))
		s.sumAbs += d
		s.maxAbs = math.Max(s.maxAbs, d)
		if x != 0 {
			s.maxRel = math.Max(s.maxRel, d/math.Abs(x))
		}
		if d > s.Atol {
			if x == 0 {
				s.maxRelAtAtol = math.Inf(1)
			} else {
				s.maxRelAtAtol = math.Max(s.maxRelAtAtol, (d-s.Atol)/math.Abs(x))
			}
		}
		excess := math.Max(d-s.Rtol*math.Abs(x), 0)
		s.maxExcess = math.Max(s.maxExcess, excess)
		s.sumExcess += excess
		s.absHist.add(d)
		if s.Rtol != 0 {
			// Without rtol the excess is the absolute error: absHist holds
			// it already (a logarithm per element saved).
			s.excessHist.add(excess)
		}
		s.sumSqA += x * x
		s.sumSqB += y * y
		s.sumAB += x * y
		s.sumSqDiff += (x - y) * (x - y)
	}
	acc.addSamples(a, b, shape, samples)
	if r := len(shape); !acc.byTask && (r == 2 || r == 3) && shape[r-1] >= 2 && int64(len(a)) == product(shape) {
		if s.Top1 == nil {
			s.Top1 = &Top1{Per: "sample"}
			if r == 3 {
				s.Top1.Per = "position"
			}
		}
		s.Top1.addRows(a, b, int(shape[r-1]))
	}
	if !acc.byTask && len(shape) == 2 && shape[1] >= 2 && int64(len(a)) == shape[0]*shape[1] {
		s.Classifier = true
		c := int(shape[1])
		for n := 0; n < int(shape[0]); n++ {
			ra, rb := a[n*c:(n+1)*c], b[n*c:(n+1)*c]
			ta := Argmax(ra)
			top := topK(rb, 5)
			s.Samples++
			if newNonFinite(ra, rb) {
				continue
			}
			if top[0] == ta {
				s.top1++
			}
			if slices.Contains(top, ta) {
				s.top5++
			}
		}
	}
	return nil
}

// Result finishes the statistics and the tolerance verdict.
func (acc *Accumulator) Result() *OutputStats {
	s := acc.stats
	s.MaxAbs, s.MaxRel, s.MaxRef = jsonfloat.Float(s.maxAbs), jsonfloat.Float(s.maxRel), jsonfloat.Float(s.maxRef)
	if s.Elements > 0 {
		s.MeanAbs = jsonfloat.Float(s.sumAbs / float64(s.Elements))
		s.P99Abs = jsonfloat.Float(s.absHist.quantile(0.99))
	}
	s.Cosine = 1
	if s.sumSqA > 0 && s.sumSqB > 0 {
		s.Cosine = jsonfloat.Float(s.sumAB / math.Sqrt(s.sumSqA*s.sumSqB))
	} else if s.sumSqA != s.sumSqB {
		s.Cosine = 0
	}
	switch {
	case s.sumSqDiff == 0:
		s.SNRdB = jsonfloat.Float(math.Inf(1))
	case s.sumSqA == 0:
		s.SNRdB = jsonfloat.Float(math.Inf(-1))
	default:
		s.SNRdB = jsonfloat.Float(10 * math.Log10(s.sumSqA/s.sumSqDiff))
	}
	acc.finishSamples()
	if s.Top1 != nil {
		s.Top1.finish()
	}
	if s.Samples > 0 {
		s.Top1Agree = float64(s.top1) / float64(s.Samples)
		s.Top5Agree = float64(s.top5) / float64(s.Samples)
	}
	switch s.Check {
	case StatMean:
		if s.Elements > 0 {
			s.Value = jsonfloat.Float(s.sumExcess / float64(s.Elements))
		}
	case StatP99:
		h := &s.excessHist
		if s.Rtol == 0 {
			h = &s.absHist
		}
		s.Value = jsonfloat.Float(h.quantile(0.99))
	default:
		s.Value = jsonfloat.Float(s.maxExcess)
	}
	s.MinAtol = s.Value
	s.MinRtol = -1
	if s.Check == StatMax || s.Check == "" {
		s.MinRtol = jsonfloat.Float(s.maxRelAtAtol)
	}
	if s.Elements == 0 && s.Total > 0 {
		// Nothing was measured: no statistic may read as agreement.
		nan := jsonfloat.Float(math.NaN())
		s.MaxAbs, s.MeanAbs, s.MaxRel, s.MaxRef, s.P99Abs, s.Cosine, s.SNRdB = nan, nan, nan, nan, nan, nan, nan
		s.Value, s.MinAtol, s.MinRtol = nan, nan, nan
	}
	s.Pass = float64(s.Value) <= s.Atol && s.Mismatch == 0 && (s.Elements > 0 || s.Total == 0) && s.ShapeMismatches == 0
	return s
}

func product(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func count(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// newNonFinite reports whether b is non-finite anywhere a is finite.
func newNonFinite(a, b []float32) bool {
	for i := range a {
		if Finite(float64(a[i])) && !Finite(float64(b[i])) {
			return true
		}
	}
	return false
}

// Argmax is the index of v's largest value, the first on ties: a
// classifier's top-1 class.
func Argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// topK returns the indices of the k largest values, largest first.
func topK(v []float32, k int) []int {
	k = min(k, len(v))
	idx := make([]int, 0, k+1)
	for i := range v {
		pos := len(idx)
		for pos > 0 && v[idx[pos-1]] < v[i] {
			pos--
		}
		if pos < k {
			idx = slices.Insert(idx, pos, i)
			if len(idx) > k {
				idx = idx[:k]
			}
		}
	}
	return idx
}

// logHist is a histogram of non-negative values with 100 buckets per
// decade from 1e-30 to 1e30, so quantiles are known to within 2.3%
// relative, in constant memory whatever the number of samples.
type logHist struct {
	zeros  int64
	counts []int64
	total  int64
}

const (
	histPerDecade = 100
	histMinExp    = -30
	histDecades   = 60
)

func (h *logHist) add(x float64) {
	h.total++
	if x <= 0 || math.IsNaN(x) {
		h.zeros++
		return
	}
	if h.counts == nil {
		h.counts = make([]int64, histPerDecade*histDecades+1)
	}
	i := int(math.Floor((math.Log10(x) - histMinExp) * histPerDecade))
	h.counts[min(max(i, 0), len(h.counts)-1)]++
}

// quantile returns the upper edge of the bucket holding quantile q.
func (h *logHist) quantile(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.total)))
	if rank <= h.zeros {
		return 0
	}
	seen := h.zeros
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return math.Pow(10, float64(i+1)/histPerDecade+histMinExp)
		}
	}
	return math.Inf(1)
}
