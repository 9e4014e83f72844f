package data

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/optc-dev/optc/graph"
)

// randomSeq2 is mixed with the input's index into the second PCG seed word;
// the first is Options.Seed (see newRandomGen).
const randomSeq2 = 0x6f7074632d646174 // "optc-dat"

// randomSource makes synthetic batches. Each input draws from its own PCG
// stream, so an input's samples do not depend on the other inputs, and for
// inputs with a sample axis not on how the samples are split into batches.
// Inputs that are not per sample (no batch axis, or a static batch that
// is not the run's) get the same tensor in every run.
type randomSource struct {
	inputs []Input
	shapes [][]int64 // per input, the shape of a full batch
	axes   []int     // per input, the batch axis; NoBatchAxis: the same tensor every run
	fixed  [][]byte  // per input without a batch axis, its one tensor's bytes
	gens   []*randomGen
	batching
}

func openRandom(inputs []Input, opts Options) (Source, error) {
	const where = "random data"
	for _, in := range inputs {
		lo, hi := valueRange(in, opts)
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo < hi) || math.IsInf(hi-lo, 0) {
			return nil, fmt.Errorf("%s: input %q: range [%g, %g) is empty or not finite", where, in.Name, lo, hi)
		}
	}
	batch, fixedBy, err := batchSize(where, inputs, opts, true)
	if err != nil {
		return nil, err
	}
	total := opts.Samples
	if total == 0 {
		total = batch
	}
	if r := total % batch; r != 0 && fixedBy != "" {
		total += batch - r // synthetic data fills the last run of a static batch
	}
	s := &randomSource{inputs: inputs, batching: batching{batch: batch, total: total}}
	bopts := opts
	bopts.Batch = batch
	bind := symbolBindings(inputs, opts)
	for i, in := range inputs {
		shape, err := resolveShape(in, bopts, bind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		n := int64(1)
		for _, d := range shape {
			if d != 0 && n > (1<<40)/d {
				return nil, fmt.Errorf("%s: input %q: shape %v is too large", where, in.Name, shape)
			}
			n *= d
		}
		k := batchAxis(in, opts)
		if k >= len(shape) || (k >= 0 && shape[k] != int64(batch)) {
			k = NoBatchAxis // a static batch of its own: fed whole
		}
		g, err := newInputGen(in, opts, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		s.shapes = append(s.shapes, shape)
		s.axes = append(s.axes, k)
		s.gens = append(s.gens, g)
	}
	s.fixed = make([][]byte, len(inputs))
	return s, nil
}

// newInputGen is the generator for the index-th input under opts: its
// --value, its feed (zeros, ones), or random values in its range.
func newInputGen(in Input, opts Options, index int) (*randomGen, error) {
	f, v := feed(in, opts)
	switch {
	case v != nil:
		return constGen(in, *v)
	case f == FeedZeros:
		return constGen(in, 0)
	case f == FeedOnes:
		return constGen(in, 1)
	}
	if normal(in, opts) {
		return newNormalGen(in, opts.Seed, index)
	}
	lo, hi := valueRange(in, opts)
	return newRandomGen(in, opts.Seed, index, lo, hi)
}

// normal reports whether in draws from the standard normal distribution:
// a float input without a range of its own, when opts ask for it.
func normal(in Input, opts Options) bool {
	if _, ranged := opts.Ranges[in.Name]; !opts.Normal || ranged || in.Range != nil {
		return false
	}
	_, float := floatFormats[in.DType]
	return float
}

// newNormalGen draws the index-th input's elements from the standard
// normal distribution, rounded to its float type.
func newNormalGen(in Input, seed int64, index int) (*randomGen, error) {
	ff := floatFormats[in.DType]
	rng := rand.New(rand.NewPCG(uint64(seed), randomSeq2^uint64(index)))
	return &randomGen{rng: rng, size: ff.size, put: func(b []byte, r *rand.Rand) {
		ff.put(b, ff.round(r.NormFloat64()))
	}}, nil
}

// constGen fills every element with v.
func constGen(in Input, v float64) (*randomGen, error) {
	if in.DType == graph.Bool {
		b := byte(0)
		if v != 0 {
			b = 1
		}
		return &randomGen{size: 1, put: func(p []byte, _ *rand.Rand) { p[0] = b }}, nil
	}
	// A range holding only v: the generators round to the type.
	g, err := newRandomGen(in, 0, 0, v, math.Nextafter(v, math.Inf(1)))
	if err != nil {
		return nil, fmt.Errorf("--value %s=%g: %w", in.Name, v, err)
	}
	return g, nil
}

// Next makes the next batch.
func (s *randomSource) Next() (*Batch, error) {
	return s.nextBatch(len(s.inputs), s.tensor)
}

// tensor makes input i's tensor for a batch of n samples.
func (s *randomSource) tensor(i, n int) (*graph.Tensor, error) {
	in := s.inputs[i]
	dims := append([]int64{}, s.shapes[i]...)
	if k := s.axes[i]; k >= 0 {
		dims[k] = int64(n)
	}
	count := int64(1)
	for _, d := range dims {
		count *= d
	}
	var buf []byte
	switch {
	case s.axes[i] >= 0:
		buf = s.gens[i].fill(int(count))
	case s.fixed[i] != nil:
		buf = append([]byte(nil), s.fixed[i]...)
	default:
		s.fixed[i] = s.gens[i].fill(int(count))
		buf = append([]byte(nil), s.fixed[i]...)
	}
	t, err := graph.NewTensor(in.Name, in.DType, dims, buf)
	if err != nil {
		return nil, fmt.Errorf("random data: %w", err)
	}
	return t, nil
}

// Close ends the source.
func (s *randomSource) Close() error {
	s.err = fmt.Errorf("data source is closed")
	return nil
}

// randomGen draws the elements of one input.
type randomGen struct {
	rng  *rand.Rand
	size int // bytes per element
	put  func(b []byte, r *rand.Rand)
}

func (g *randomGen) fill(n int) []byte {
	b := make([]byte, n*g.size)
	for i := 0; i < n; i++ {
		g.put(b[i*g.size:], g.rng)
	}
	return b
}

// newRandomGen returns the generator for input in (the index-th input):
// floats uniform in [lo, hi) rounded to the element type (and kept inside
// the range), integers uniform over the integers in [lo, hi), bools 0 or 1.
func newRandomGen(in Input, seed int64, index int, lo, hi float64) (*randomGen, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), randomSeq2^uint64(index)))
	le := binary.LittleEndian
	if in.DType == graph.Bool {
		return &randomGen{rng: rng, size: 1, put: func(b []byte, r *rand.Rand) { b[0] = byte(r.Uint64() & 1) }}, nil
	}
	if ff, ok := floatFormats[in.DType]; ok {
		// The representable values in range: first up from lo, last below hi.
		first := ff.round(lo)
		if first < lo {
			first = ff.up(first)
		}
		last := ff.round(hi)
		if last >= hi {
			last = ff.down(last)
		}
		if !(first <= last) || math.IsInf(first, 0) || math.IsInf(last, 0) {
			return nil, fmt.Errorf("input %q: no %s value lies in [%g, %g)", in.Name, in.DType, lo, hi)
		}
		span := hi - lo
		return &randomGen{rng: rng, size: ff.size, put: func(b []byte, r *rand.Rand) {
			v := ff.round(lo + span*r.Float64())
			v = min(max(v, first), last)
			ff.put(b, v)
		}}, nil
	}
	ir, ok := intRanges[in.DType]
	if !ok {
		return nil, fmt.Errorf("input %q: cannot make random %s data", in.Name, in.DType)
	}
	// The integers n with lo <= n < hi.
	first, end := math.Ceil(lo), math.Ceil(hi)
	if first >= end {
		return nil, fmt.Errorf("input %q: no integer lies in [%g, %g)", in.Name, lo, hi)
	}
	if first < ir.min || end > ir.max+1 {
		return nil, fmt.Errorf("input %q: range [%g, %g) does not fit %s [%g, %g]", in.Name, lo, hi, in.DType, ir.min, ir.max)
	}
	// Values are first plus an offset below span, in two's complement
	// uint64 arithmetic (exact: the range is at most 2^64 integers); span 0
	// means all 2^64 values.
	base := intBits(first)
	span := intBits(end) - base
	size := in.DType.BitSize() / 8
	return &randomGen{rng: rng, size: size, put: func(b []byte, r *rand.Rand) {
		var v uint64
		if span == 0 {
			v = r.Uint64()
		} else {
			v = base + r.Uint64N(span)
		}
		switch size {
		case 1:
			b[0] = byte(v)
		case 2:
			le.PutUint16(b, uint16(v))
		case 4:
			le.PutUint32(b, uint32(v))
		default:
			le.PutUint64(b, v)
		}
	}}, nil
}

// intBits returns the two's complement bits of an integral float64 in
// [-2^63, 2^64]; 2^64 wraps to 0.
func intBits(f float64) uint64 {
	switch {
	case f < 0:
		return uint64(int64(f))
	case f >= 1<<63:
		return uint64(f-(1<<63)) + 1<<63
	}
	return uint64(f)
}

type intRange struct{ min, max float64 }

var intRanges = map[graph.DataType]intRange{
	graph.Int8:   {math.MinInt8, math.MaxInt8},
	graph.Uint8:  {0, math.MaxUint8},
	graph.Int16:  {math.MinInt16, math.MaxInt16},
	graph.Uint16: {0, math.MaxUint16},
	graph.Int32:  {math.MinInt32, math.MaxInt32},
	graph.Uint32: {0, math.MaxUint32},
	graph.Int64:  {math.MinInt64, 1<<63 - 1},
	graph.Uint64: {0, 1<<64 - 1},
}

// floatFormat is a floating-point element type: rounding to it (to nearest,
// ties to even, overflow to infinity), its neighbours, and its encoding.
type floatFormat struct {
	size     int
	round    func(float64) float64
	up, down func(float64) float64 // the next value of the type above/below a value of the type
	put      func([]byte, float64) // encodes a value of the type
}

var floatFormats = map[graph.DataType]floatFormat{
	graph.Double: {
		size:  8,
		round: func(v float64) float64 { return v },
		up:    func(v float64) float64 { return math.Nextafter(v, math.Inf(1)) },
		down:  func(v float64) float64 { return math.Nextafter(v, math.Inf(-1)) },
		put:   func(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) },
	},
	graph.Float: {
		size:  4,
		round: func(v float64) float64 { return float64(float32(v)) },
		up:    func(v float64) float64 { return float64(math.Nextafter32(float32(v), float32(math.Inf(1)))) },
		down:  func(v float64) float64 { return float64(math.Nextafter32(float32(v), float32(math.Inf(-1)))) },
		put:   func(b []byte, v float64) { binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v))) },
	},
	graph.Float16: {
		size:  2,
		round: func(v float64) float64 { return halfToFloat64(float64ToHalf(v)) },
		up:    func(v float64) float64 { return halfToFloat64(bitsStep(float64ToHalf(v), 0x7c00, true)) },
		down:  func(v float64) float64 { return halfToFloat64(bitsStep(float64ToHalf(v), 0x7c00, false)) },
		put:   func(b []byte, v float64) { binary.LittleEndian.PutUint16(b, float64ToHalf(v)) },
	},
	graph.BFloat16: {
		size:  2,
		round: func(v float64) float64 { return bfloatToFloat64(float64ToBFloat(v)) },
		up:    func(v float64) float64 { return bfloatToFloat64(bitsStep(float64ToBFloat(v), 0x7f80, true)) },
		down:  func(v float64) float64 { return bfloatToFloat64(bitsStep(float64ToBFloat(v), 0x7f80, false)) },
		put:   func(b []byte, v float64) { binary.LittleEndian.PutUint16(b, float64ToBFloat(v)) },
	},
}

// bitsStep moves a 16-bit sign-magnitude float (not NaN) to the next value
// up or down; inf is the bits of +infinity. Infinities step to the largest
// finite values, and the largest finite values step to infinity.
func bitsStep(h, inf uint16, up bool) uint16 {
	neg := h&0x8000 != 0
	mag := h & 0x7fff
	switch {
	case mag == 0 && up:
		return 1
	case mag == 0:
		return 0x8001
	case neg == up: // towards zero
		return h - 1
	case mag == inf:
		return h
	}
	return h + 1
}

// float64ToHalf rounds v to IEEE 754 binary16 (to nearest, ties to even).
func float64ToHalf(v float64) uint16 {
	return uint16(roundToBits(v, 5, 10))
}

// float64ToBFloat rounds v to bfloat16 (to nearest, ties to even).
func float64ToBFloat(v float64) uint16 {
	return uint16(roundToBits(v, 8, 7))
}

// roundToBits rounds v to a binary float format with ebits exponent bits
// and mbits fraction bits (to nearest, ties to even; overflow to infinity;
// NaN stays NaN) and returns its bits.
func roundToBits(v float64, ebits, mbits uint) uint64 {
	b := math.Float64bits(v)
	sign := (b >> 63) << (ebits + mbits)
	expMax := uint64(1)<<ebits - 1
	inf := expMax << mbits
	if math.IsNaN(v) {
		return sign | inf | 1<<(mbits-1)
	}
	a := math.Abs(v)
	if math.IsInf(v, 0) {
		return sign | inf
	}
	if a == 0 {
		return sign
	}
	bias := int(1)<<(ebits-1) - 1
	_, exp := math.Frexp(a) // a = frac * 2^exp, frac in [0.5, 1)
	e := exp - 1            // a = 1.f * 2^e
	emin := 1 - bias
	if e < emin {
		e = emin // subnormal: the quantum of the smallest exponent
	}
	// a in units of the quantum 2^(e-mbits): exact, as the quantum is a
	// power of two and q is far from float64's limits.
	q := math.Ldexp(a, int(mbits)-e)
	n := uint64(math.RoundToEven(q))
	// n in [2^mbits, 2^(mbits+1)] for normals, [0, 2^mbits] for subnormals.
	if n >= 1<<(mbits+1) { // rounded up to the next power of two
		n >>= 1
		e++
	}
	if n < 1<<mbits { // subnormal (or zero)
		return sign | n
	}
	be := uint64(e + bias)
	if be >= expMax {
		return sign | inf
	}
	return sign | be<<mbits | (n - 1<<mbits)
}

// halfToFloat64 converts binary16 bits to float64 (exactly).
func halfToFloat64(h uint16) float64 {
	return bitsToFloat64(uint64(h), 5, 10)
}

// bfloatToFloat64 converts bfloat16 bits to float64 (exactly).
func bfloatToFloat64(h uint16) float64 {
	return float64(math.Float32frombits(uint32(h) << 16))
}

func bitsToFloat64(b uint64, ebits, mbits uint) float64 {
	neg := b>>(ebits+mbits)&1 != 0
	exp := int(b>>mbits) & (1<<ebits - 1)
	m := b & (1<<mbits - 1)
	bias := 1<<(ebits-1) - 1
	var v float64
	switch {
	case exp == 1<<ebits-1 && m != 0:
		return math.NaN()
	case exp == 1<<ebits-1:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(m), 1-bias-int(mbits))
	default:
		v = math.Ldexp(float64(m|1<<mbits), exp-bias-int(mbits))
	}
	if neg {
		v = -v
	}
	return v
}
