package kernels

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// reducer is a reduction: a start value and a step, on floats and
// integers.
type reducer struct {
	f0 float64
	f  func(acc, x float64) float64
	i0 int64
	i  func(acc, x int64) int64 // nil: floats only
	// axesInput is the opset from which axes is an input, not an
	// attribute (13 for ReduceSum, 18 for the others).
	axesInput int64
	// noEmpty: reducing no elements has no defined result.
	noEmpty bool
	noNaN   bool
	mean    bool
}

var (
	redSum = reducer{
		f: func(a, x float64) float64 { return a + x },
		i: func(a, x int64) int64 { return a + x }, axesInput: 13,
	}
	redProd = reducer{
		f0: 1, f: func(a, x float64) float64 { return a * x },
		i0: 1, i: func(a, x int64) int64 { return a * x }, axesInput: 18,
	}
	redMax = reducer{
		f0: math.Inf(-1), f: math.Max,
		i0: math.MinInt64, i: func(a, x int64) int64 { return max(a, x) },
		axesInput: 18, noEmpty: true, noNaN: true,
	}
	redMin = reducer{
		f0: math.Inf(1), f: math.Min,
		i0: math.MaxInt64, i: func(a, x int64) int64 { return min(a, x) },
		axesInput: 18, noEmpty: true, noNaN: true,
	}
	redMean = reducer{
		f: func(a, x float64) float64 { return a + x }, axesInput: 18, noEmpty: true, mean: true,
	}
)

func reduceKernel(r reducer) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		x, err := c.need(0)
		if err != nil {
			return nil, err
		}
		k := kindOf(x.DType)
		if k != kindFloat && (k != kindInt || r.i == nil) {
			return nil, c.unsupported("%s input", x.DType)
		}
		keep, err := c.attrInt("keepdims", 1)
		if err != nil {
			return nil, err
		}
		noop := int64(0)
		if c.opset >= r.axesInput {
			if noop, err = c.attrInt("noop_with_empty_axes", 0); err != nil {
				return nil, err
			}
		}
		axes, _, err := c.axesArg(r.axesInput)
		if err != nil {
			return nil, err
		}
		if len(axes) == 0 && noop != 0 {
			return one(c.withDims(x, x.Dims))
		}
		reduced := make([]bool, len(x.Dims))
		if len(axes) == 0 {
			for i := range reduced {
				reduced[i] = true
			}
		}
		set, err := c.axesSet(axes, len(x.Dims))
		if err != nil {
			return nil, err
		}
		for _, a := range set {
			reduced[a] = true
		}
		kept := make([]int64, len(x.Dims)) // keepdims shape
		dims := []int64{}
		for i, d := range x.Dims {
			kept[i] = d
			if reduced[i] {
				kept[i] = 1
				if keep == 0 {
					continue
				}
			}
			dims = append(dims, kept[i])
		}
		if err := c.reserve(x.DType, dims); err != nil {
			return nil, err
		}
		per := 1 // elements per output
		if n := count(kept); n > 0 {
			per = count(x.Dims) / n
		}
		if per == 0 && r.noEmpty {
			return nil, c.unsupported("reducing no elements")
		}
		st := strides(kept)
		for i := range st {
			if reduced[i] {
				st[i] = 0
			}
		}
		at := stridedIndex(x.Dims, st, 0) // output index of each input element
		if k == kindFloat {
			v, err := floats(x)
			if err != nil {
				return nil, err
			}
			if r.noNaN && hasNaN(v) {
				return nil, c.unsupported("NaN inputs")
			}
			acc := make([]float64, count(kept))
			for i := range acc {
				acc[i] = r.f0
			}
			for j, o := range at {
				acc[o] = r.f(acc[o], v[j])
			}
			if r.mean {
				for i := range acc {
					acc[i] /= float64(per)
				}
			}
			return one(fromFloats(x.DType, dims, acc))
		}
		v, err := ints(x)
		if err != nil {
			return nil, err
		}
		acc := make([]int64, count(kept))
		for i := range acc {
			acc[i] = r.i0
		}
		for j, o := range at {
			acc[o] = r.i(acc[o], v[j])
		}
		return one(fromInts(x.DType, dims, acc))
	}
}
