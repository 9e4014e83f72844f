package weightonly

import "math"

// blockParams are the scale and zero point of one block of weights: a
// weight w is stored as the code q = clamp(round(w/scale) + zp, 0, qmax)
// and read back as (q - zp)·scale, the dequantization MatMulNBits does.
type blockParams struct {
	scale float64
	zp    int
}

// levels are the codes a weight may take. With bits < 4 in the 4-bit
// container (int3) the codes are a sub-range of the nibble: [lo, hi]
// around the symmetric zero point 8, or [0, 2^bits-1] with zero points.
type levels struct {
	bits      int
	symmetric bool
}

func (l levels) lo() int {
	if l.symmetric {
		return 8 - 1<<(l.bits-1)
	}
	return 0
}

func (l levels) hi() int {
	if l.symmetric {
		return 8 + 1<<(l.bits-1) - 1
	}
	return 1<<l.bits - 1
}

// params chooses a block's scale and zero point from its weights
// (round-to-nearest, min/max): symmetric blocks map the weight of largest
// magnitude onto the most negative level (lo-8), so that it is exact and
// the others fit; asymmetric blocks spread [min, max] over all codes. A
// block of zeros gets scale 1 (any scale reproduces it).
func (l levels) params(w []float64) blockParams {
	if l.symmetric {
		var big float64
		for _, v := range w {
			if math.Abs(v) > math.Abs(big) {
				big = v
			}
		}
		if big == 0 {
			return blockParams{scale: 1, zp: 8}
		}
		return blockParams{scale: big / float64(l.lo()-8), zp: 8}
	}
	lo, hi := 0.0, 0.0 // the range includes 0, so that zero is a code
	for _, v := range w {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		return blockParams{scale: 1, zp: 0}
	}
	scale := (hi - lo) / float64(l.hi())
	zp := int(math.Round(-lo / scale))
	return blockParams{scale: scale, zp: max(0, min(l.hi(), zp))}
}

// code is w's code in a block with parameters p.
func (l levels) code(w float64, p blockParams) int {
	q := int(math.RoundToEven(w/p.scale)) + p.zp
	return max(l.lo(), min(l.hi(), q))
}

// value is what code q reads back as.
func (p blockParams) value(q int) float64 { return float64(q-p.zp) * p.scale }
