package kernels

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// Cast between bool, the integer types and float16/32/64. Floats convert
// to integers by truncation toward zero; a NaN, an infinity or a value
// out of the target's range is refused (C leaves it undefined). Integers
// wrap to narrower integers. bfloat16, float8 and strings are refused:
// runtimes disagree on bfloat16 rounding.

func castKernel(c *call) ([]*graph.Tensor, error) {
	if c.opset < 6 {
		return nil, c.unsupported("the string-valued to attribute")
	}
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	to := c.attr("to")
	if to == nil || to.Type != graph.AttrInt {
		return nil, c.invalid("no integer attribute to")
	}
	return one(c.cast(x, graph.DataType(to.Int)))
}

func castLikeKernel(c *call) ([]*graph.Tensor, error) {
	x, like, err := c.pair()
	if err != nil {
		return nil, err
	}
	return one(c.cast(x, like.DType))
}

func castable(dt graph.DataType) bool {
	return kindOf(dt) != kindOther || dt == graph.Uint64
}

func (c *call) cast(x *graph.Tensor, to graph.DataType) (*graph.Tensor, error) {
	if !castable(x.DType) || !castable(to) {
		return nil, c.unsupported("%s to %s", x.DType, to)
	}
	if err := c.reserve(to, x.Dims); err != nil {
		return nil, err
	}
	if x.DType == to {
		return c.withDims(x, x.Dims)
	}
	if kindOf(x.DType) == kindFloat {
		v, err := floats(x)
		if err != nil {
			return nil, err
		}
		return c.castFloats(v, x.Dims, to)
	}
	v, err := ints(x)
	if err != nil {
		return nil, err
	}
	if x.DType == graph.Bool {
		for i := range v {
			v[i] = int64(boolByte(v[i] != 0))
		}
	}
	switch to {
	case graph.Float, graph.Double, graph.Float16:
		f := make([]float64, len(v))
		for i, n := range v {
			f[i] = intToFloat(n, x.DType == graph.Uint64, to)
		}
		return fromFloats(to, x.Dims, f)
	}
	return fromInts(to, x.Dims, v) // wraps; bool takes v != 0
}

// intToFloat converts an integer (the bits of a uint64 when unsigned) to
// float type to, rounding once; the result is exact in float64.
func intToFloat(n int64, unsigned bool, to graph.DataType) float64 {
	switch {
	case to == graph.Float && unsigned:
		return float64(float32(uint64(n)))
	case to == graph.Float:
		return float64(float32(n))
	case unsigned:
		return float64(uint64(n))
	}
	// float64, and float16 (beyond 2^53 it is infinite either way)
	return float64(n)
}

func (c *call) castFloats(v []float64, dims []int64, to graph.DataType) (*graph.Tensor, error) {
	switch to {
	case graph.Float, graph.Double, graph.Float16:
		return fromFloats(to, dims, v)
	case graph.Bool:
		n := make([]int64, len(v))
		for i, f := range v {
			n[i] = int64(boolByte(f != 0))
		}
		return fromInts(to, dims, n)
	}
	n := make([]int64, len(v))
	for i, f := range v {
		t := math.Trunc(f)
		ok := !math.IsNaN(t)
		if to == graph.Uint64 {
			ok = ok && t >= 0 && t < 1<<64
			n[i] = int64(uint64(t))
		} else {
			ok = ok && t >= -(1<<63) && t < 1<<63 && fits(to, int64(t))
			n[i] = int64(t)
		}
		if !ok {
			return nil, c.unsupported("%g does not fit %s", f, to)
		}
	}
	return fromInts(to, dims, n)
}
