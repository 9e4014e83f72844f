// Package compare measures how far one model's outputs are from
// another's: error statistics per output, classifier agreement, task
// accuracy against labels, and tolerance checks that say the smallest
// tolerance that would have passed.
package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// Stat is the statistic a tolerance judges.
type Stat string

// The statistics a tolerance can judge.
const (
	StatMax  Stat = "max"
	StatMean Stat = "mean"
	StatP99  Stat = "p99"
)

// ParseStat reads max, mean or p99.
func ParseStat(s string) (Stat, error) {
	switch Stat(s) {
	case StatMax, StatMean, StatP99:
		return Stat(s), nil
	}
	return "", fmt.Errorf("unknown statistic %q (want max, mean or p99)", s)
}

// OutputStats are the error statistics of one output over all samples,
// with A as the reference. Excess is the part of each element's error
// beyond the relative allowance, max(|a-b| - rtol*|a|, 0): an output passes
// when the chosen statistic of the excess is at most atol, which for max is
// numpy's allclose(b, a, rtol, atol).
type OutputStats struct {
	Name        string  `json:"name"`
	Elements    int64   `json:"elements"`
	MaxAbs      float64 `json:"max_abs_error"`
	MeanAbs     float64 `json:"mean_abs_error"`
	MaxRel      float64 `json:"max_rel_error"`     // |a-b|/|a| over elements with a != 0
	MaxRef      float64 `json:"max_abs_reference"` // max |a|: the scale of the output
	P99Abs      float64 `json:"p99_abs_error"`
	Cosine      float64 `json:"cosine_similarity"`
	SNRdB       float64 `json:"snr_db"` // 10 log10(sum a^2 / sum (a-b)^2); +Inf (null in JSON) when identical
	NaNMismatch int64   `json:"nan_mismatches"`

	// Classifier agreement, for outputs shaped [N, C] with C >= 2.
	Classifier bool    `json:"classifier"`
	Samples    int64   `json:"samples,omitempty"`
	Top1Agree  float64 `json:"top1_agreement,omitempty"` // argmax equal
	Top5Agree  float64 `json:"top5_agreement,omitempty"` // A's top-1 among B's top 5 (C >= 5)

	// Tolerance verdict.
	Atol    float64 `json:"atol"`
	Rtol    float64 `json:"rtol"`
	Check   Stat    `json:"check"`
	Value   float64 `json:"value"` // the statistic of the excess that was judged
	Pass    bool    `json:"pass"`
	MinAtol float64 `json:"min_passing_atol"` // at this rtol
	MinRtol float64 `json:"min_passing_rtol"` // at this atol (max check only; else -1)

	sumAbs, sumSqA, sumSqB, sumAB, sumSqDiff float64
	maxExcess, sumExcess                     float64
	maxRelAtAtol                             float64
	absHist, excessHist                      logHist
	top1, top5                               int64
}

// Accumulator gathers OutputStats batch by batch in constant memory.
type Accumulator struct {
	stats *OutputStats
}

// NewAccumulator starts the statistics of one output.
func NewAccumulator(name string, atol, rtol float64, check Stat) *Accumulator {
	return &Accumulator{stats: &OutputStats{Name: name, Atol: atol, Rtol: rtol, Check: check}}
}

// Add folds in one batch of the output from A (reference) and B. shape is
// the batch's shape; both slices hold its elements.
func (acc *Accumulator) Add(a, b []float32, shape []int64) error {
	if len(a) != len(b) {
		return fmt.Errorf("output %q: %d elements in A, %d in B", acc.stats.Name, len(a), len(b))
	}
	s := acc.stats
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			if math.IsNaN(x) != math.IsNaN(y) {
				s.NaNMismatch++
			}
			continue
		}
		d := math.Abs(x - y)
		if math.IsInf(x, 0) && x == y {
			d = 0
		}
		s.Elements++
		s.MaxRef = math.Max(s.MaxRef, math.Abs(x))
		s.sumAbs += d
		s.MaxAbs = math.Max(s.MaxAbs, d)
		if x != 0 {
			s.MaxRel = math.Max(s.MaxRel, d/math.Abs(x))
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
		s.excessHist.add(excess)
		s.sumSqA += x * x
		s.sumSqB += y * y
		s.sumAB += x * y
		s.sumSqDiff += (x - y) * (x - y)
	}
	if len(shape) == 2 && shape[1] >= 2 && int64(len(a)) == shape[0]*shape[1] {
		s.Classifier = true
		c := int(shape[1])
		for n := 0; n < int(shape[0]); n++ {
			ra, rb := a[n*c:(n+1)*c], b[n*c:(n+1)*c]
			ta := argmax(ra)
			top := topK(rb, 5)
			s.Samples++
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
	if s.Elements > 0 {
		s.MeanAbs = s.sumAbs / float64(s.Elements)
		s.P99Abs = s.absHist.quantile(0.99)
	}
	s.Cosine = 1
	if s.sumSqA > 0 && s.sumSqB > 0 {
		s.Cosine = s.sumAB / math.Sqrt(s.sumSqA*s.sumSqB)
	} else if s.sumSqA != s.sumSqB {
		s.Cosine = 0
	}
	switch {
	case s.sumSqDiff == 0:
		s.SNRdB = math.Inf(1)
	case s.sumSqA == 0:
		s.SNRdB = math.Inf(-1)
	default:
		s.SNRdB = 10 * math.Log10(s.sumSqA/s.sumSqDiff)
	}
	if s.Samples > 0 {
		s.Top1Agree = float64(s.top1) / float64(s.Samples)
		s.Top5Agree = float64(s.top5) / float64(s.Samples)
	}
	switch s.Check {
	case StatMean:
		if s.Elements > 0 {
			s.Value = s.sumExcess / float64(s.Elements)
		}
	case StatP99:
		s.Value = s.excessHist.quantile(0.99)
	default:
		s.Value = s.maxExcess
	}
	s.MinAtol = s.Value
	s.MinRtol = -1
	if s.Check == StatMax || s.Check == "" {
		s.MinRtol = s.maxRelAtAtol
	}
	s.Pass = s.Value <= s.Atol && s.NaNMismatch == 0
	return s
}

func argmax(v []float32) int {
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

// MarshalJSON writes infinite values (the SNR of identical outputs, an
// unreachable relative tolerance) as null, which JSON can express.
func (s *OutputStats) MarshalJSON() ([]byte, error) {
	type plain OutputStats
	return json.Marshal(struct {
		*plain
		SNRdB   *float64 `json:"snr_db"`
		MinRtol *float64 `json:"min_passing_rtol"`
	}{(*plain)(s), finite(s.SNRdB), finite(s.MinRtol)})
}

func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}
