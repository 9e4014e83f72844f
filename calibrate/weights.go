package calibrate

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
)

// MinScale is the smallest scale WeightScales returns (an all-zero channel
// would otherwise get scale 0, which Q/DQ forbids).
const MinScale = 1e-12

// WeightScales returns per-channel symmetric scales for a weight tensor:
// for each index c of axis (negative counts from the end),
// scale_c = max(max|w_c| / qmax, MinScale) with qmax = 2^(bits-1)-1 (127
// for 8 bits), or 2^(bits-2)-1 (63) with reduceRange, the 7-bit weights
// that keep ORT's U8S8 kernels from saturating on CPUs without VNNI.
func WeightScales(t *graph.Tensor, axis int, bits int, reduceRange bool) ([]float64, error) {
	if bits < 2 || bits > 16 || reduceRange && bits < 3 {
		return nil, fmt.Errorf("weight %q: %d-bit quantization is not supported", t.Name, bits)
	}
	rank := len(t.Dims)
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return nil, fmt.Errorf("weight %q: axis out of range for rank %d", t.Name, rank)
	}
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("weight %q is %s, not a floating-point tensor", t.Name, t.DType)
	}
	vals, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	channels := int(t.Dims[axis])
	inner := 1
	for _, d := range t.Dims[axis+1:] {
		inner *= int(d)
	}
	qmax := float64(int(1)<<(bits-1) - 1)
	if reduceRange {
		qmax = float64(int(1)<<(bits-2) - 1)
	}
	amax := make([]float64, channels)
	for i, v := range vals {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("weight %q: element %d is %v", t.Name, i, f)
		}
		c := (i / inner) % channels
		amax[c] = max(amax[c], math.Abs(f))
	}
	for c := range amax {
		amax[c] = max(amax[c]/qmax, MinScale)
	}
	return amax, nil
}
