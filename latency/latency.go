// Package latency is optc's one latency record and the statistics behind
// it: percentiles of repeated runs, medians, their intervals. bench
// measures into it, build's verify stage keeps it per artifact, report.json
// holds it and optc diff compares it; it runs nothing itself.
package latency

import (
	"math"
	"slices"
	"time"
)

// Latency summarizes repeated timings, in milliseconds.
type Latency struct {
	N      int     `json:"n"`
	Min    float64 `json:"min_ms"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	Stddev float64 `json:"stddev_ms"`
	CV     float64 `json:"cv"` // stddev / mean
	// Unreported names the percentiles too few runs supported (Drop):
	// they are 0 here and "-" in tables, not the slowest run standing in
	// for them.
	Unreported []string `json:"unreported,omitempty"`
}

// Percentiles are the latency percentiles optc reports, with the fewest
// runs each needs: with fewer, the nearest rank is the maximum (p99 of 30
// runs is the slowest run), so the figure would be another statistic
// under its name.
var Percentiles = []struct {
	Name    string
	Q       float64
	MinRuns int
}{{"p50", 0.50, 1}, {"p90", 0.90, 10}, {"p95", 0.95, 20}, {"p99", 0.99, 100}}

// MinRuns is the fewest runs the named percentile is reported from (0 for
// a name Percentiles lacks).
func MinRuns(percentile string) int {
	for _, p := range Percentiles {
		if p.Name == percentile {
			return p.MinRuns
		}
	}
	return 0
}

// Drop zeroes the percentiles n runs do not support and lists them in
// Unreported.
func (l *Latency) Drop(n int) {
	l.Unreported = nil
	for _, p := range Percentiles {
		if n >= p.MinRuns {
			continue
		}
		*l.At(p.Name) = 0
		l.Unreported = append(l.Unreported, p.Name)
	}
}

// At is the field holding the named percentile (nil for another name).
func (l *Latency) At(name string) *float64 {
	switch name {
	case "p50":
		return &l.P50
	case "p90":
		return &l.P90
	case "p95":
		return &l.P95
	case "p99":
		return &l.P99
	}
	return nil
}

// Summarize computes the latency statistics of ds. Percentiles use the
// nearest-rank method: p99 of 100 timings is the 99th smallest. Callers
// that report them leave out those len(ds) does not support (Drop).
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	mean, std := MeanStddev(ms)
	return Latency{
		N: len(ms), Min: ms[0], Max: ms[len(ms)-1], Mean: mean, Stddev: std, CV: CV(ms),
		P50: rank(ms, 0.50), P90: rank(ms, 0.90), P95: rank(ms, 0.95), P99: rank(ms, 0.99),
	}
}

// MeanStddev is the mean and sample standard deviation of xs (stddev 0
// for fewer than two values).
func MeanStddev(xs []float64) (mean, stddev float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var sum float64
	for _, v := range xs {
		sum += v
	}
	mean = sum / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var sq float64
	for _, v := range xs {
		sq += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sq / float64(len(xs)-1))
}

// CV is the coefficient of variation of xs, stddev over mean (0 when the
// mean is not positive or there is one value).
func CV(xs []float64) float64 {
	mean, std := MeanStddev(xs)
	if mean <= 0 {
		return 0
	}
	return std / mean
}

func rank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Quartiles are the 25th, 50th and 75th percentiles of xs by nearest
// rank (zeros when empty). xs is not modified.
func Quartiles(xs []float64) [3]float64 {
	if len(xs) == 0 {
		return [3]float64{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return [3]float64{rank(s, 0.25), rank(s, 0.5), rank(s, 0.75)}
}

// Median is the middle of xs (the mean of the two middle values for an
// even count; 0 when empty). xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianInterval is a distribution-free interval for the median of what
// xs were drawn from, at the given confidence (e.g. 0.99): the order
// statistics x(k) and x(n+1-k) of the sorted values for the largest k
// whose binomial(n, 1/2) tails leave at least that confidence between
// them (the sign test's interval). It assumes only that the values are
// independent draws; no seed, no resampling. ok is false when n is too
// small for any interval at that confidence (n < 8 at 0.99: all n on
// one side of the median is then not rare enough).
func MedianInterval(xs []float64, confidence float64) (lo, hi float64, ok bool) {
	n := len(xs)
	k := signTestRank(n, (1-confidence)/2)
	if k < 1 {
		return 0, 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[k-1], s[n-k], true
}

// signTestRank is the largest k with P(B <= k-1) <= tail for B binomial
// (n, 1/2), 0 when even P(B = 0) is larger. The terms are summed in log
// space: 2^-n underflows past n = 1074.
func signTestRank(n int, tail float64) int {
	lgN, _ := math.Lgamma(float64(n + 1))
	cdf := 0.0
	for j := 0; 2*j < n; j++ {
		lgJ, _ := math.Lgamma(float64(j + 1))
		lgR, _ := math.Lgamma(float64(n - j + 1))
		if cdf += math.Exp(lgN - lgJ - lgR - float64(n)*math.Ln2); cdf > tail {
			return j
		}
	}
	return 0
}

// Timing is a model's latency record: at each batch size the medians of
// repeated timing windows, with each window's figures so that a comparison
// can tell change from noise. It is the one latency type of optc: build's
// verify stage makes it (Repeated), optc bench's report holds one window
// (Result.Timing), and report.json and optc diff read it.
type Timing struct {
	ColdStartMs float64       `json:"cold_start_ms"` // session creation + first run
	Batches     []BatchTiming `json:"batches"`
	// SeqLengths is a language model's latency per sequence at batch 1
	// (latency.seq_lengths), one timing window per length.
	SeqLengths []SeqTiming `json:"seq_lengths,omitempty"`
}

// BatchTiming is the latency at one batch size, in milliseconds per run
// (Latency's fields appear inline in JSON), with the throughput and the
// windows they are medians of.
type BatchTiming struct {
	Batch int `json:"batch"`
	Latency
	Throughput float64 `json:"throughput_samples_per_s"`
	// Repeats are the separate windows the figures above are medians of.
	Repeats []WindowTiming `json:"repeats,omitempty"`
}

// WindowTiming is one timing window's percentiles.
type WindowTiming struct {
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	P99        float64 `json:"p99_ms"`
	Throughput float64 `json:"throughput_samples_per_s"`
}

// SeqTiming is the latency of one batch-1 sequence of SeqLen tokens.
type SeqTiming struct {
	SeqLen int `json:"seq_len"`
	Latency
}

// Batch is the latency at batch size n (nil when not measured).
func (t *Timing) Batch(n int) *BatchTiming {
	if t == nil {
		return nil
	}
	for i := range t.Batches {
		if t.Batches[i].Batch == n {
			return &t.Batches[i]
		}
	}
	return nil
}

// Windows is how many timing windows each batch size's figures are the
// medians of (1 for a single run).
func (t *Timing) Windows() int {
	if t == nil || len(t.Batches) == 0 {
		return 0
	}
	return max(len(t.Batches[0].Repeats), 1)
}
