package kernels

import (
	"bytes"
	"math"

	"github.com/optc-dev/optc/graph"
)

// Operators that create tensors from a shape or a few scalars.

func constantOfShapeKernel(c *call) ([]*graph.Tensor, error) {
	s, err := c.need(0)
	if err != nil {
		return nil, err
	}
	if s.DType != graph.Int64 {
		return nil, c.invalid("shape of type %s", s.DType)
	}
	dims, err := c.intList(s, "shape")
	if err != nil {
		return nil, err
	}
	for _, d := range dims {
		if d < 0 {
			return nil, c.invalid("negative dimension in %v", dims)
		}
	}
	value, err := graph.NewFloat32Tensor("", nil, []float32{0})
	if err != nil {
		return nil, err
	}
	if a := c.attr("value"); a != nil {
		if a.Type != graph.AttrTensor || a.Tensor == nil || count(a.Tensor.Dims) != 1 {
			return nil, c.invalid("value must be a one-element tensor")
		}
		value = a.Tensor
	}
	if elemSize(value.DType) == 0 {
		return nil, c.unsupported("value of type %s", value.DType)
	}
	if err := c.reserve(value.DType, dims); err != nil {
		return nil, err
	}
	b, err := dataOf(value)
	if err != nil {
		return nil, err
	}
	return one(graph.NewTensor("", value.DType, dims, bytes.Repeat(b, count(dims))))
}

// rangeKernel follows ONNX Runtime and Range's function body: the count
// is ceil((limit - start) / delta), the values accumulate delta in the
// element type.
func rangeKernel(c *call) ([]*graph.Tensor, error) {
	var args [3]*graph.Tensor
	for i := range args {
		t, err := c.need(i)
		if err != nil {
			return nil, err
		}
		if count(t.Dims) != 1 || len(t.Dims) > 1 {
			return nil, c.invalid("input %d is not a scalar: %v", i, t.Dims)
		}
		if i > 0 && t.DType != args[0].DType {
			return nil, c.invalid("inputs of types %s and %s", args[0].DType, t.DType)
		}
		args[i] = t
	}
	dt := args[0].DType
	switch dt {
	case graph.Float, graph.Double:
		var v [3]float64
		for i, t := range args {
			f, err := floats(t)
			if err != nil {
				return nil, err
			}
			v[i] = f[0]
		}
		start, limit, delta := v[0], v[1], v[2]
		diff := limit - start
		if dt == graph.Float {
			diff = float64(float32(diff))
		}
		n, err := c.rangeCount(diff / delta)
		if err != nil {
			return nil, err
		}
		if err := c.reserve(dt, []int64{n}); err != nil {
			return nil, err
		}
		out := make([]float64, n)
		for i := range out {
			out[i] = start
			start += delta
			if dt == graph.Float {
				start = float64(float32(start))
			}
		}
		return one(fromFloats(dt, []int64{n}, out))
	case graph.Int16, graph.Int32, graph.Int64:
		var v [3]int64
		for i, t := range args {
			n, err := ints(t)
			if err != nil {
				return nil, err
			}
			v[i] = n[0]
		}
		start, limit, delta := v[0], v[1], v[2]
		if delta == 0 {
			return nil, c.invalid("delta 0")
		}
		if dt == graph.Int64 && (limit > 0) != (start > 0) && math.Abs(float64(limit)-float64(start)) > 1<<62 {
			return nil, c.unsupported("limit - start overflows")
		}
		n, err := c.rangeCount(float64(limit-start) / float64(delta))
		if err != nil {
			return nil, err
		}
		if err := c.reserve(dt, []int64{n}); err != nil {
			return nil, err
		}
		out := make([]int64, n)
		for i := range out {
			out[i] = start
			start += delta
		}
		return one(fromInts(dt, []int64{n}, out))
	}
	return nil, c.unsupported("%s inputs", dt)
}

func (c *call) rangeCount(q float64) (int64, error) {
	if math.IsNaN(q) || math.IsInf(q, 0) || q > 1<<62 {
		return 0, c.invalid("range of %g elements", q)
	}
	return max(int64(math.Ceil(q)), 0), nil
}
