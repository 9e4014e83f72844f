package calibrate

// HistBins is the number of bins of the |x| histogram kept per tensor.
const HistBins = 2048

// histogram counts |x| over [0, upper) in HistBins equal bins. upper
// starts just above (factor 1+2^-12) the |x| maximum of the first batch
// with a non-zero value and doubles, merging adjacent bin pairs, whenever a
// batch reaches it, so the largest value seen always lies in [upper/2,
// upper) and the size never changes. Doubling keeps bin edges exact: a
// grown histogram equals one built at its final range in one go. While
// upper is 0 (only zeros seen) every value is in bin 0.
type histogram struct {
	upper  float64
	counts [HistBins]uint64
}

// width is the width of one bin.
func (h *histogram) width() float64 { return h.upper / HistBins }

// grow makes the histogram cover absMax.
func (h *histogram) grow(absMax float64) {
	if absMax < h.upper || absMax == 0 {
		return
	}
	if h.upper == 0 {
		// Only zeros so far: they stay in bin 0 at any width.
		h.upper = absMax * (1 + 1.0/4096)
		return
	}
	for h.upper <= absMax {
		for i := 0; i < HistBins/2; i++ {
			h.counts[i] = h.counts[2*i] + h.counts[2*i+1]
		}
		clear(h.counts[HistBins/2:])
		h.upper *= 2
	}
}

// bin returns the bin of a (|x|, already within [0, upper]).
func (h *histogram) bin(a float64) int {
	if h.upper == 0 {
		return 0
	}
	i := int(a * (HistBins / h.upper))
	if i >= HistBins {
		i = HistBins - 1
	}
	return i
}

// total is the number of values counted.
func (h *histogram) total() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile returns the |x| value below which a fraction q of the counted
// values lie, interpolating linearly inside the bin where the cumulative
// count crosses q.
func (h *histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 || h.upper == 0 {
		return 0
	}
	target := q * float64(n)
	var cum float64
	w := h.width()
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= target {
			frac := (target - cum) / float64(c)
			return (float64(i) + frac) * w
		}
		cum += float64(c)
	}
	return h.upper
}
