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
		v, err := scalarValues(floatValues, args)
		if err != nil {
			return nil, err
		}
		start, limit, delta := v[0], v[1], v[2]
		diff := limit - start
		round := func(x float64) float64 { return x }
		if dt == graph.Float {
			round = func(x float64) float64 { return float64(float32(x)) }
		}
		return rangeValues(c, floatValues, dt, round(diff)/delta, start, delta, round)
	case graph.Int16, graph.Int32, graph.Int64:
		v, err := scalarValues(intValues, args)
		if err != nil {
			return nil, err
		}
		start, limit, delta := v[0], v[1], v[2]
		if delta == 0 {
			return nil, c.invalid("delta 0")
		}
		if dt == graph.Int64 && (limit > 0) != (start > 0) && math.Abs(float64(limit)-float64(start)) > 1<<62 {
			return nil, c.unsupported("limit - start overflows")
		}
		return rangeValues(c, intValues, dt, float64(limit-start)/float64(delta), start, delta, func(x int64) int64 { return x })
	}
	return nil, c.unsupported("%s inputs", dt)
}

// scalarValues reads the one value of each of Range's inputs as T.
func scalarValues[T float64 | int64](vs values[T], args [3]*graph.Tensor) ([3]T, error) {
	var v [3]T
	for i, t := range args {
		x, err := vs.read(t)
		if err != nil {
			return v, err
		}
		v[i] = x[0]
	}
	return v, nil
}

// rangeValues is Range's output of type dt: ceil(q) values from start on,
// each the one before plus delta, rounded to dt by round.
func rangeValues[T float64 | int64](c *call, vs values[T], dt graph.DataType, q float64, start, delta T, round func(T) T) ([]*graph.Tensor, error) {
	n, err := c.rangeCount(q)
	if err != nil {
		return nil, err
	}
	if err := c.reserve(dt, []int64{n}); err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		out[i] = start
		start = round(start + delta)
	}
	return one(vs.write(dt, []int64{n}, out))
}

func (c *call) rangeCount(q float64) (int64, error) {
	if math.IsNaN(q) || math.IsInf(q, 0) || q > 1<<62 {
		return 0, c.invalid("range of %g elements", q)
	}
	return max(int64(math.Ceil(q)), 0), nil
}
