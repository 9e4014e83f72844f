package calibrate

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ort"
)

// Range is a calibrated value range.
type Range struct {
	Min, Max float64
}

// Method chooses how Stats.Ranges turns statistics into ranges.
//
// The histogram methods (percentile, entropy, mse) choose a clipping
// threshold T on |x| and return [-T, T] intersected with the observed
// range: Range{max(Min, -T), min(Max, T)} when the tensor had a negative
// value, Range{0, min(Max, T)} otherwise (for non-negative tensors T never
// exceeds Max, so that is [0, T]). T is never above the largest |x| seen.
type Method string

// Methods.
const (
	// MinMax is the observed [Min, Max]. With Options.MovingAverage = a > 0
	// (given to Collect) it is instead the per-batch min and max blended as
	// ORT's MinMax calibrator with moving_average does:
	// m <- m + a*(batchMin - m), starting from the first batch.
	MinMax Method = "minmax"
	// Percentile sets T to the Options.Percentile-th percentile (default
	// 99.999) of |x| over all elements, read from the histogram with linear
	// interpolation inside the bin.
	Percentile Method = "percentile"
	// Entropy is TensorRT's KL-divergence calibration, with bin 0 (exact
	// zeros and the smallest magnitudes) first set to the count of bin 1 as
	// NVIDIA's pytorch-quantization does, so that a spike of zeros (Relu
	// outputs, background pixels) does not drive the threshold: for each candidate
	// i in [128, 2048] (in bins), P is bins [0,i) with every count beyond
	// folded into bin i-1; Q quantizes bins [0,i) (outliers not folded) into
	// 128 groups of i/128 bins (the last group takes the remainder), each
	// group's count spread evenly over its non-empty bins. Both are
	// smoothed (a count of 1e-4 moved onto empty bins) and normalized; the i with
	// the least KL(P||Q) wins and T = i * binWidth.
	//
	// Candidates that would clip more than 1% of the values are skipped.
	// Without that bound KL fails on tensors whose values sit away from 0
	// (an SE block's HardSigmoid in [0.096, 0.34]): at the first i past
	// the smallest value P (tail folded into bin i-1) and Q are both one
	// spike, KL is ~0, and T clips every value to the minimum, which took
	// the PaddleOCR direction classifier from 98.7% to 56.2%
	// (docs/quantize.md).
	Entropy Method = "entropy"
	// MSE picks T = i * binWidth, i in [1, 2048], minimising the expected
	// squared error of 8-bit quantization over the histogram: a bin centre
	// c beyond T costs (c-T)^2 (clipping), inside it costs s^2/12
	// (rounding, uniform within a step), with s = T/127 for tensors that had
	// a negative value (signed int8) and s = T/255 otherwise (uint8 [0,T]).
	MSE Method = "mse"
	// Auto picks, per tensor, the candidate range (AutoCandidates: minmax,
	// percentiles 99.9, 99.99 and 99.999, entropy, mse) with the least
	// quantization error on the calibration data: the mean squared error
	// between |x| and its 8-bit fake-quantized value over the histogram
	// (each bin's count spread evenly over it, read at 4 points), with
	// step T/127 for tensors that had a negative value and T/255 otherwise,
	// T the candidate's largest magnitude. Ties go to the earlier
	// candidate. The cache records each tensor's choice.
	Auto Method = "auto"
)

// Methods lists the methods Ranges accepts: the one list flags, the build
// config, the calibration cache and messages use.
var Methods = []Method{MinMax, Percentile, Entropy, MSE, Auto}

// MethodNames is Methods for messages and help: "minmax, percentile,
// entropy, mse or auto".
func MethodNames() string { return choice.Or(Methods) }

// ParseMethod returns the method named s, or an error listing Methods.
func ParseMethod(s string) (Method, error) {
	if !slices.Contains(Methods, Method(s)) {
		return "", fmt.Errorf("unknown calibration method %q (want %s)", s, MethodNames())
	}
	return Method(s), nil
}

// DefaultPercentile is the percentile used when Options.Percentile is 0.
const DefaultPercentile = 99.999

// Options tune collection and the methods.
type Options struct {
	// MovingAverage, in (0, 1], makes minmax blend per-batch min and max
	// (see MinMax). It takes effect at collection; Ranges must get the
	// same value or 0 (the value collected with is used).
	MovingAverage float64
	// Percentile for the percentile method, in (0, 100]; 0 means
	// DefaultPercentile.
	Percentile float64
	// Session configures the ORT session Collect runs. The zero value (CPU,
	// optimization level disable) keeps every value as the model writes it.
	Session ort.Options
	// Progress, when set, is called with 0 once the session is ready (so
	// that a caller can time the first batch alone), then after each batch
	// with the number of samples seen so far.
	Progress func(samples int64)
	// Stop, when set, is asked before each batch after the first with the
	// samples seen so far; when it says true, collection ends there and
	// Stats.Stopped says so (a build's budget, or a replay of a build it
	// stopped: the count decides which samples, so the ranges replay).
	Stop func(samples int64) bool
	// SkipNonFinite makes NaN and infinities be left out of the
	// statistics (and counted: Stats.NonFinite) instead of an error: for
	// measuring where values are, as the float16 variant does, where a
	// float32 model's own -Inf (a log of 0) is no concern.
	SkipNonFinite bool
	// MaxRunBytes bounds the activations one run fetches from ORT (0:
	// DefaultMaxRunBytes); a batch whose calibrated values need more, by
	// shape inference at the first batch's shapes, is run several times,
	// each run fetching some of them. The statistics do not change.
	MaxRunBytes int64
	// RangesOnly keeps each tensor's min, max and counts, not its
	// histogram: for callers that need where values are (the float16
	// variant's ranges) and no percentile, entropy or MSE range, it saves
	// the binning of every element. Ranges then takes minmax only.
	RangesOnly bool
}

// Validate checks the options' ranges (Collect and Ranges do too); the
// messages name the option.
func (o Options) Validate() error {
	if o.MovingAverage < 0 || o.MovingAverage > 1 || math.IsNaN(o.MovingAverage) {
		return fmt.Errorf("moving average %v is outside [0, 1]", o.MovingAverage)
	}
	if o.Percentile < 0 || o.Percentile > 100 || math.IsNaN(o.Percentile) {
		return fmt.Errorf("percentile %v is outside (0, 100]", o.Percentile)
	}
	return nil
}

// tensorStats is what is kept per tensor: constant size.
type tensorStats struct {
	min, max       float64
	avgMin, avgMax float64 // moving averages (when MovingAverage > 0)
	count          uint64
	batches        int
	hist           histogram
	// infinite: the model itself puts infinities in this tensor (a mask's
	// -Inf): no int8 range can hold them, so it gets none and its readers
	// stay float.
	infinite bool
}

// Summary is the collected statistics of one tensor.
type Summary struct {
	Min, Max float64
	Count    uint64 // elements seen
	Batches  int    // batches seen
}

// Stats holds the statistics of each calibrated tensor.
type Stats struct {
	// Samples and Batches count the data that was run.
	Samples int64
	Batches int
	// Stopped: Options.Stop ended the collection before the data did.
	Stopped bool
	// Runs is how many times each batch was run (1 unless its activations
	// passed Options.MaxRunBytes).
	Runs int
	// ModelDigest is the hex SHA-256 of the serialized model that was
	// calibrated (graph.Digest of the model given to Collect).
	ModelDigest string
	// DataDigest is the hex SHA-256 over the input data streamed (per
	// input: name, element type, per-sample dims and the raw bytes of all
	// samples, in order). It does not depend on the batch size.
	DataDigest string

	// NonFinite counts the NaN and infinite elements left out under
	// Options.SkipNonFinite, and the infinities of intermediate tensors
	// (a mask's -Inf) Collect leaves out.
	NonFinite int64

	movingAverage float64
	skip          bool
	rangesOnly    bool
	names         []string
	t             map[string]*tensorStats
}

// NewStats returns empty statistics for the named tensors, for callers
// that produce activations themselves (Observe). Collect uses it.
func NewStats(tensors []string, opts Options) (*Stats, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Stats{movingAverage: opts.MovingAverage, skip: opts.SkipNonFinite, rangesOnly: opts.RangesOnly, t: map[string]*tensorStats{}}
	for _, n := range tensors {
		if _, ok := s.t[n]; ok {
			continue
		}
		s.names = append(s.names, n)
		s.t[n] = &tensorStats{}
	}
	return s, nil
}

// Tensors returns the tensors, in the order given.
func (s *Stats) Tensors() []string { return slices.Clone(s.names) }

// Summary returns the statistics of one tensor.
func (s *Stats) Summary(name string) (Summary, bool) {
	ts, ok := s.t[name]
	if !ok {
		return Summary{}, false
	}
	return Summary{Min: ts.min, Max: ts.max, Count: ts.count, Batches: ts.batches}, true
}

// Observe adds one batch of values of tensor name. A NaN or infinity is an
// error naming the tensor and batch (counted from 0 per tensor); the
// statistics are then left unchanged. vals is not kept.
func (s *Stats) Observe(name string, vals []float32) error {
	skipped, err := s.observeValues(name, vals, false)
	s.NonFinite += skipped
	return err
}

// observeValues is Observe of one tensor, safe to run for different
// tensors at once: it touches only that tensor's statistics and returns
// the non-finite values it left out instead of counting them in s.
// skipInf leaves out infinities as an intermediate tensor's (see Collect).
func (s *Stats) observeValues(name string, vals []float32, skipInf bool) (int64, error) {
	ts, ok := s.t[name]
	if !ok {
		return 0, fmt.Errorf("tensor %q is not being calibrated", name)
	}
	if len(vals) == 0 {
		return 0, nil
	}
	// The common case, every value finite, in two tight loops over the
	// slice; anything else takes the general path, which says what it
	// found. Both give the same statistics.
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
			return s.observe(name, len(vals), func(i int) float32 { return vals[i] }, skipInf)
		}
		if v < lo {
			lo = v
		} else if v > hi {
			hi = v
		}
	}
	// Plain comparisons do not order -0 and +0; the builtin min and max
	// of the general path put -0 first, and the ranges must not depend on
	// the path taken.
	if lo == 0 {
		lo = signedZero(vals, true)
	}
	if hi == 0 {
		hi = signedZero(vals, false)
	}
	if s.rangesOnly {
		s.record(ts, float64(lo), float64(hi), len(vals))
		return 0, nil
	}
	ts.hist.grow(max(-float64(lo), float64(hi)))
	if h := &ts.hist; h.upper == 0 {
		h.counts[0] += uint64(len(vals))
	} else {
		scale := HistBins / h.upper
		for _, v := range vals {
			h.counts[min(int(math.Abs(float64(v))*scale), HistBins-1)]++
		}
	}
	s.record(ts, float64(lo), float64(hi), len(vals))
	return 0, nil
}

// observe adds one batch of n values, element i read by at (so tensors can
// be read in place, without a converted copy), as observeValues does.
func (s *Stats) observe(name string, n int, at func(int) float32, skipInf bool) (int64, error) {
	ts, ok := s.t[name]
	if !ok {
		return 0, fmt.Errorf("tensor %q is not being calibrated", name)
	}
	if n == 0 {
		return 0, nil
	}
	bmin, bmax := math.Inf(1), math.Inf(-1)
	skipped := 0
	for i := range n {
		f := float64(at(i))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if skipInf && math.IsInf(f, 0) {
				ts.infinite = true
			}
			if !s.skip && !(skipInf && math.IsInf(f, 0)) {
				return 0, fmt.Errorf("tensor %q, batch %d: element %d is %v", name, ts.batches, i, f)
			}
			skipped++
			continue
		}
		bmin = min(bmin, f)
		bmax = max(bmax, f)
	}
	if skipped == n {
		return int64(skipped), nil
	}
	n -= skipped
	if s.rangesOnly {
		s.record(ts, bmin, bmax, n)
		return int64(skipped), nil
	}
	ts.hist.grow(max(-bmin, bmax))
	h := &ts.hist
	switch {
	case h.upper == 0:
		h.counts[0] += uint64(n)
	case skipped == 0:
		for i := range n {
			h.counts[h.bin(math.Abs(float64(at(i))))]++
		}
	default:
		for i := range n + skipped {
			if a := math.Abs(float64(at(i))); !math.IsNaN(a) && !math.IsInf(a, 0) {
				h.counts[h.bin(a)]++
			}
		}
	}
	s.record(ts, bmin, bmax, n)
	return int64(skipped), nil
}

// signedZero is the zero that min (least) or max (not least) picks from
// vals, which hold a zero: -0 is below +0.
func signedZero(vals []float32, least bool) float32 {
	negZero := float32(math.Copysign(0, -1))
	for _, v := range vals {
		if v == 0 && math.Signbit(float64(v)) == least {
			return v
		}
	}
	if least {
		return 0
	}
	return negZero
}

// record adds one batch's range and count of finite values to ts.
func (s *Stats) record(ts *tensorStats, bmin, bmax float64, n int) {
	if ts.batches == 0 {
		ts.min, ts.max = bmin, bmax
		ts.avgMin, ts.avgMax = bmin, bmax
	} else {
		ts.min, ts.max = min(ts.min, bmin), max(ts.max, bmax)
		a := s.movingAverage
		ts.avgMin += a * (bmin - ts.avgMin)
		ts.avgMax += a * (bmax - ts.avgMax)
	}
	ts.count += uint64(n)
	ts.batches++
}

// Ranges returns a range for every tensor that was seen. A tensor with no
// values (in an If branch the calibration data never took, or empty) has
// none: the quantizer leaves its readers float and says so.
func (s *Stats) Ranges(method Method, opts Options) (map[string]Range, error) {
	r, _, err := s.ranges(method, opts)
	return r, err
}

// ranges is Ranges and, for Auto, the candidate each tensor chose.
func (s *Stats) ranges(method Method, opts Options) (map[string]Range, map[string]string, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	if opts.MovingAverage != 0 && opts.MovingAverage != s.movingAverage {
		return nil, nil, fmt.Errorf("moving average %v asked, but the statistics were collected with %v (it applies during collection)", opts.MovingAverage, s.movingAverage)
	}
	if _, err := ParseMethod(string(method)); err != nil {
		return nil, nil, err
	}
	if s.rangesOnly && method != MinMax {
		return nil, nil, fmt.Errorf("method %s needs histograms, and the statistics were collected with ranges only", method)
	}
	if s.allEmpty() {
		return nil, nil, fmt.Errorf("calibration data is empty")
	}
	pct := opts.Percentile
	if pct == 0 {
		pct = DefaultPercentile
	}
	out := make(map[string]Range, len(s.t))
	chosen := map[string]string{}
	names := slices.Clone(s.names)
	sort.Strings(names)
	for _, n := range names {
		ts := s.t[n]
		if ts.count == 0 || ts.infinite {
			continue
		}
		if method != Auto {
			out[n] = s.tensorRange(ts, method, pct)
			continue
		}
		best := math.Inf(1)
		for _, c := range AutoCandidates {
			r := s.tensorRange(ts, c.Method, c.Percentile)
			e := quantError(&ts.hist, ts.min < 0, max(-r.Min, r.Max))
			if e < best {
				best, out[n], chosen[n] = e, r, c.Name
			}
		}
	}
	return out, chosen, nil
}

// AutoCandidate is one range Auto considers.
type AutoCandidate struct {
	Name       string // as recorded in the cache: "minmax", "percentile 99.99", ...
	Method     Method
	Percentile float64 // for Percentile
}

// AutoCandidates are Auto's candidates, in tie-breaking order.
var AutoCandidates = []AutoCandidate{
	{"minmax", MinMax, 0},
	{"percentile 99.999", Percentile, 99.999},
	{"percentile 99.99", Percentile, 99.99},
	{"percentile 99.9", Percentile, 99.9},
	{"entropy", Entropy, 0},
	{"mse", MSE, 0},
}

// tensorRange is one tensor's range by a fixed method (pct for
// Percentile).
func (s *Stats) tensorRange(ts *tensorStats, method Method, pct float64) Range {
	if method == MinMax {
		if s.movingAverage > 0 {
			return Range{ts.avgMin, ts.avgMax}
		}
		return Range{ts.min, ts.max}
	}
	var t float64
	switch method {
	case Percentile:
		t = ts.hist.quantile(pct / 100)
	case Entropy:
		t = entropyThreshold(&ts.hist)
	case MSE:
		t = mseThreshold(&ts.hist, ts.min < 0)
	}
	t = min(t, max(-ts.min, ts.max))
	r := Range{0, min(ts.max, t)}
	if ts.min < 0 {
		r.Min = max(ts.min, -t)
	}
	return r
}

// quantErrorPoints is how many points of each bin quantError reads.
const quantErrorPoints = 4

// quantError is the mean squared error of fake-quantizing |x| to 8 bits
// with largest magnitude t (see Auto).
func quantError(h *histogram, signed bool, t float64) float64 {
	n := h.total()
	if n == 0 || h.upper == 0 {
		return 0
	}
	levels := 255.0
	if signed {
		levels = 127
	}
	if t <= 0 {
		// Everything quantizes to 0.
		t = math.SmallestNonzeroFloat64
	}
	step := t / levels
	w := h.width()
	var sum float64
	for j, c := range h.counts {
		if c == 0 {
			continue
		}
		var e float64
		for k := range quantErrorPoints {
			x := (float64(j) + (float64(k)+0.5)/quantErrorPoints) * w
			q := min(math.Round(x/step), levels) * step
			e += (x - q) * (x - q)
		}
		sum += float64(c) * e / quantErrorPoints
	}
	return sum / float64(n)
}

func (s *Stats) allEmpty() bool {
	for _, ts := range s.t {
		if ts.count > 0 {
			return false
		}
	}
	return true
}

// entropyMaxClipped is the largest fraction of a tensor's values the
// entropy threshold may clip (see Entropy).
const entropyMaxClipped = 0.01

// quantBins is the number of quantized levels of |x| the entropy method
// compares against (int8: 128 magnitudes).
const quantBins = 128

// entropyThreshold is TensorRT's KL-divergence threshold (see Entropy).
func entropyThreshold(h *histogram) float64 {
	if h.upper == 0 {
		return 0
	}
	// Bin 0 holds the exact zeros (Relu outputs, padding, background
	// pixels); their spike would dominate the divergence, so it is
	// replaced by bin 1, as NVIDIA's pytorch-quantization does.
	hc := h.counts
	hc[0] = hc[1]
	counts := hc[:]
	best, bestKL := HistBins, math.Inf(1)
	p := make([]float64, HistBins)
	q := make([]float64, HistBins)
	var tail float64 // sum(counts[i:]) as i walks upwards
	for _, c := range counts[quantBins:] {
		tail += float64(c)
	}
	// A threshold may clip at most entropyMaxClipped of the values (see
	// Entropy); below it KL(P||Q) can be 0 for the wrong reason.
	maxTail := entropyMaxClipped * float64(h.total())
	for i := quantBins; i <= HistBins; i++ {
		if i > quantBins {
			tail -= float64(counts[i-1])
		}
		if tail > maxTail {
			continue
		}
		for j := 0; j < i; j++ {
			p[j] = float64(counts[j])
		}
		p[i-1] += tail
		// Quantize bins [0,i) into quantBins groups and expand.
		m := i / quantBins
		for g := 0; g < quantBins; g++ {
			lo, hi := g*m, (g+1)*m
			if g == quantBins-1 {
				hi = i
			}
			var sum float64
			nz := 0
			for j := lo; j < hi; j++ {
				if counts[j] != 0 {
					sum += float64(counts[j])
					nz++
				}
			}
			for j := lo; j < hi; j++ {
				if counts[j] != 0 {
					q[j] = sum / float64(nz)
				} else {
					q[j] = 0
				}
			}
		}
		kl, ok := klDivergence(p[:i], q[:i])
		if ok && kl < bestKL {
			best, bestKL = i, kl
		}
	}
	return float64(best) * h.width()
}

// klSmoothing is the count given to empty bins before KL (as ORT's and
// MXNet's smooth_distribution, on counts, not probabilities).
const klSmoothing = 1e-4

// smooth gives each empty bin of the counts d klSmoothing, taken evenly
// from the non-empty ones, and normalizes d. It fails when d is all zero or
// a non-empty bin would not stay positive.
func smooth(d []float64) bool {
	var sum float64
	zeros := 0
	for _, v := range d {
		sum += v
		if v == 0 {
			zeros++
		}
	}
	nonzeros := len(d) - zeros
	if sum == 0 || nonzeros == 0 {
		return false
	}
	eps1 := klSmoothing * float64(zeros) / float64(nonzeros)
	for j, v := range d {
		if v == 0 {
			d[j] = klSmoothing
		} else {
			d[j] = v - eps1
			if d[j] <= 0 {
				return false
			}
		}
	}
	// The total is unchanged by the smoothing.
	for j := range d {
		d[j] /= sum
	}
	return true
}

// klDivergence is KL(p||q) after smoothing both (in place).
func klDivergence(p, q []float64) (float64, bool) {
	if !smooth(p) || !smooth(q) {
		return 0, false
	}
	var kl float64
	for j := range p {
		kl += p[j] * math.Log(p[j]/q[j])
	}
	return kl, true
}

// mseThreshold is the MSE method's threshold (see MSE).
func mseThreshold(h *histogram, signed bool) float64 {
	if h.upper == 0 {
		return 0
	}
	levels := 255.0
	if signed {
		levels = 127
	}
	w := h.width()
	best, bestErr := HistBins, math.Inf(1)
	for i := 1; i <= HistBins; i++ {
		t := float64(i) * w
		s := t / levels
		var inside float64
		var clip float64
		for j, c := range h.counts {
			if c == 0 {
				continue
			}
			centre := (float64(j) + 0.5) * w
			if centre > t {
				d := centre - t
				clip += float64(c) * d * d
			} else {
				inside += float64(c)
			}
		}
		e := clip + inside*s*s/12
		if e < bestErr {
			best, bestErr = i, e
		}
	}
	return float64(best) * w
}

// DefaultMethod is the range method when none is asked for (optc quantize
// and the build config).
const DefaultMethod = Percentile
