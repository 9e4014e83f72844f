package kernels

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Operators that read only shapes, or change the shape and keep the
// data: their outputs share the input's bytes.

func shapeKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	rank := int64(len(x.Dims))
	start, end := int64(0), rank
	if c.opset >= 15 {
		if start, err = c.attrInt("start", 0); err != nil {
			return nil, err
		}
		if end, err = c.attrInt("end", rank); err != nil {
			return nil, err
		}
	} else if c.attr("start") != nil || c.attr("end") != nil {
		return nil, c.unsupported("start and end before opset 15")
	}
	clampDim := func(v int64) int64 {
		if v < 0 {
			v += rank
		}
		return min(max(v, 0), rank)
	}
	start, end = clampDim(start), clampDim(end)
	dims := []int64{}
	if end > start {
		dims = x.Dims[start:end]
	}
	return one(graph.NewInt64Tensor("", []int64{int64(len(dims))}, dims))
}

func sizeKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	n, err := numElements(x.Dims)
	if err != nil {
		return nil, c.invalid("%v", err)
	}
	return one(graph.NewInt64Tensor("", nil, []int64{n}))
}

// withDims returns x's data under new dims, which must hold as many
// elements.
func (c *call) withDims(x *graph.Tensor, dims []int64) (*graph.Tensor, error) {
	if n, err := numElements(dims); err != nil || int(n) != count(x.Dims) {
		return nil, c.invalid("cannot give %v the shape %v", x.Dims, dims)
	}
	if err := c.reserve(x.DType, dims); err != nil {
		return nil, err
	}
	b, err := dataOf(x)
	if err != nil {
		return nil, err
	}
	return graph.NewTensor("", x.DType, dims, b)
}

func identityKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	return one(c.withDims(x, x.Dims))
}

func reshapeKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	var shape []int64
	if c.opset < 5 {
		var ok bool
		if shape, ok, err = c.attrInts("shape"); err != nil || !ok {
			return nil, c.unsupported("no shape attribute")
		}
	} else {
		s, err := c.need(1)
		if err != nil {
			return nil, err
		}
		if shape, err = c.intList(s, "shape"); err != nil {
			return nil, err
		}
	}
	allowZero := int64(0)
	if c.opset >= 14 {
		if allowZero, err = c.attrInt("allowzero", 0); err != nil {
			return nil, err
		}
	}
	dims := make([]int64, len(shape))
	infer := -1
	known := int64(1)
	for i, d := range shape {
		switch {
		case d == 0 && allowZero == 0:
			if i >= len(x.Dims) {
				return nil, c.invalid("shape %v copies dimension %d of %v", shape, i, x.Dims)
			}
			dims[i] = x.Dims[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d < 0:
			return nil, c.invalid("shape %v", shape)
		default:
			dims[i] = d
		}
		known *= dims[i]
	}
	if infer >= 0 {
		n := int64(count(x.Dims))
		if known == 0 || n%known != 0 {
			return nil, c.invalid("cannot reshape %v to %v", x.Dims, shape)
		}
		dims[infer] = n / known
	}
	return one(c.withDims(x, dims))
}

func flattenKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	a, err := c.attrInt("axis", 1)
	if err != nil {
		return nil, err
	}
	if a < 0 && c.opset < 11 {
		return nil, c.unsupported("negative axis before opset 11")
	}
	ax, err := c.axis(a, len(x.Dims), true)
	if err != nil {
		return nil, err
	}
	return one(c.withDims(x, []int64{int64(count(x.Dims[:ax])), int64(count(x.Dims[ax:]))}))
}

// axesArg reads the axes of Squeeze, Unsqueeze and the reductions: an
// attribute before opset since, an optional input (index 1) from it.
// Negative axes need opset 11.
func (c *call) axesArg(since int64) ([]int64, bool, error) {
	var axes []int64
	var given bool
	var err error
	if c.opset < since {
		axes, given, err = c.attrInts("axes")
	} else if t := c.input(1); t != nil {
		axes, err = c.intList(t, "axes")
		given = true
	}
	if err == nil {
		err = c.checkNegativeAxes(axes)
	}
	return axes, given, err
}

func (c *call) checkNegativeAxes(axes []int64) error {
	if c.opset < 11 && slices.ContainsFunc(axes, func(a int64) bool { return a < 0 }) {
		return c.unsupported("negative axes before opset 11")
	}
	return nil
}

// squeezeInputs returns the data and axes of Squeeze and Unsqueeze.
func (c *call) squeezeInputs() (*graph.Tensor, []int64, bool, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, nil, false, err
	}
	axes, given, err := c.axesArg(13)
	return x, axes, given, err
}

func squeezeKernel(c *call) ([]*graph.Tensor, error) {
	x, axes, given, err := c.squeezeInputs()
	if err != nil {
		return nil, err
	}
	drop := make([]bool, len(x.Dims))
	if given {
		set, err := c.axesSet(axes, len(x.Dims))
		if err != nil {
			return nil, err
		}
		for _, a := range set {
			if x.Dims[a] != 1 {
				return nil, c.invalid("axis %d of %v is not 1", a, x.Dims)
			}
			drop[a] = true
		}
	} else {
		for i, d := range x.Dims {
			drop[i] = d == 1
		}
	}
	dims := []int64{}
	for i, d := range x.Dims {
		if !drop[i] {
			dims = append(dims, d)
		}
	}
	return one(c.withDims(x, dims))
}

func unsqueezeKernel(c *call) ([]*graph.Tensor, error) {
	x, axes, given, err := c.squeezeInputs()
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, c.invalid("no axes")
	}
	rank := len(x.Dims) + len(axes)
	set, err := c.axesSet(axes, rank)
	if err != nil {
		return nil, err
	}
	dims := make([]int64, rank)
	next := 0
	for i := range dims {
		if slices.Contains(set, i) {
			dims[i] = 1
			continue
		}
		dims[i] = x.Dims[next]
		next++
	}
	return one(c.withDims(x, dims))
}
