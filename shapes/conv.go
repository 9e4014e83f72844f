package shapes

import (
	"github.com/optc-dev/optc/graph"
)

// Convolutions, pooling and matrix products. Spatial sizes follow ONNX
// Runtime's arithmetic (conv_attributes.h, pool_attributes.h,
// conv_transpose_attributes.h), which the ONNX spec describes: explicit
// pads or auto_pad, strides, dilations, ceil_mode for pools.

// window is one spatial axis of a convolution or pool.
type window struct {
	kernel, stride, dilation, padBegin, padEnd int64
	autoPad                                    string
	ceil                                       bool // pools with ceil_mode
}

// out is the output size along the axis for an input of size in. A
// symbolic size survives where the window keeps it (stride 1 with "same"
// padding).
func (w window) out(in graph.Dim) graph.Dim {
	eff := (w.kernel-1)*w.dilation + 1
	if w.kernel <= 0 || w.stride <= 0 || w.dilation <= 0 {
		return graph.Dim{}
	}
	switch w.autoPad {
	case "SAME_UPPER", "SAME_LOWER":
		if w.dilation != 1 {
			return graph.Dim{}
		}
		if isStatic(in) {
			return static(ceilDiv(in.Value, w.stride))
		}
		if w.stride == 1 {
			return bare(in)
		}
		return graph.Dim{}
	case "VALID":
		return w.explicit(in, 0, 0, eff)
	}
	return w.explicit(in, w.padBegin, w.padEnd, eff)
}

// explicit is the output size for explicit pads.
func (w window) explicit(in graph.Dim, pb, pe, eff int64) graph.Dim {
	if !isStatic(in) {
		if w.stride == 1 && pb+pe == eff-1 {
			return bare(in)
		}
		return graph.Dim{}
	}
	num := in.Value + pb + pe - eff
	if num < 0 {
		return graph.Dim{}
	}
	if !w.ceil {
		return static(num/w.stride + 1)
	}
	out := ceilDiv(num, w.stride) + 1
	// The last window must start inside the input or the left padding.
	if (out-1)*w.stride >= in.Value+pb {
		out--
	}
	return static(out)
}

// windows reads the spatial attributes of a conv or pool node over n
// spatial axes; false when they do not fit n.
func windows(c *ctx, kernel []int64, n int, pool bool) ([]window, bool) {
	strides, ok := c.attrInts("strides")
	if !ok {
		strides = ones(n)
	}
	dilations, ok := c.attrInts("dilations")
	if !ok {
		dilations = ones(n)
	}
	pads, ok := c.attrInts("pads")
	if !ok {
		pads = make([]int64, 2*n)
	}
	if len(kernel) != n || len(strides) != n || len(dilations) != n || len(pads) != 2*n {
		return nil, false
	}
	auto := c.n.AttrString("auto_pad", "NOTSET")
	ceil := pool && c.n.AttrInt("ceil_mode", 0) != 0
	ws := make([]window, n)
	for i := range ws {
		ws[i] = window{kernel: kernel[i], stride: strides[i], dilation: dilations[i],
			padBegin: pads[i], padEnd: pads[n+i], autoPad: auto, ceil: ceil}
	}
	return ws, true
}

func ones(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// conv: [N, C, D1..Dn] with weights [M, C/group, k1..kn] gives
// [N, M, O1..On]. ConvInteger gives int32; QLinearConv reads its weights
// at input 3 and has its output zero point's type.
func conv(c *ctx) []*graph.Type {
	wi, elem := c.quantizedVariant("QLinearConv", "ConvInteger")
	x, w := c.shape(0), c.shape(wi)
	r := len(x)
	if x == nil {
		r = len(w)
	}
	if x == nil && w == nil || r < 3 {
		return one(elem, nil)
	}
	out := unknownShape(r)
	if x != nil {
		out[0] = bare(x[0])
	}
	if len(w) == r {
		out[1] = bare(w[0])
	}
	kernel, ok := c.attrInts("kernel_shape")
	if !ok && len(w) == r {
		kernel, ok = staticInts(w[2:])
	}
	if ws, wok := windows(c, kernel, r-2, false); ok && wok && x != nil {
		for i, win := range ws {
			out[2+i] = win.out(x[2+i])
		}
	}
	return one(elem, out)
}

// convTranspose: [N, C, D1..Dn] with weights [C, M/group, k1..kn] gives
// [N, M, O1..On], Oi from output_shape when given, else
// stride*(Di-1) + output_padding + ((ki-1)*dilation+1) - pads (auto_pad
// SAME_*: the pads that make it stride*Di where that is reachable).
func convTranspose(c *ctx) []*graph.Type {
	x, w := c.shape(0), c.shape(1)
	elem := c.elem(0)
	r := len(x)
	if x == nil {
		r = len(w)
	}
	if x == nil && w == nil || r < 3 {
		return one(elem, nil)
	}
	n := r - 2
	out := unknownShape(r)
	if x != nil {
		out[0] = bare(x[0])
	}
	if len(w) == r {
		out[1] = scaleDim(w[1], c.n.AttrInt("group", 1))
	}
	if x == nil {
		return one(elem, out)
	}
	if os, ok := c.attrInts("output_shape"); ok && len(os) > 0 {
		switch len(os) {
		case n:
			copy(out[2:], staticDims(os))
		case r:
			copy(out[2:], staticDims(os[2:]))
		}
		return one(elem, out)
	}
	kernel, ok := c.attrInts("kernel_shape")
	if !ok && len(w) == r {
		kernel, ok = staticInts(w[2:])
	}
	ws, wok := windows(c, kernel, n, false)
	adj, aok := c.attrInts("output_padding")
	if !aok {
		adj = make([]int64, n)
	}
	if !ok || !wok || len(adj) != n {
		return one(elem, out)
	}
	for i, win := range ws {
		in := x[2+i]
		if !isStatic(in) || win.stride <= 0 {
			continue
		}
		full := (in.Value-1)*win.stride + adj[i] + (win.kernel-1)*win.dilation + 1
		switch win.autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			out[2+i] = static(min(full, in.Value*win.stride))
		case "VALID":
			out[2+i] = static(full)
		default:
			out[2+i] = static(full - win.padBegin - win.padEnd)
		}
	}
	return one(elem, out)
}

// pool: MaxPool, AveragePool, LpPool over kernel_shape; MaxPool's
// optional second output holds int64 indices.
func pool(c *ctx) []*graph.Type {
	x := c.shape(0)
	elem := c.elem(0)
	var out graph.Shape
	if x != nil && len(x) >= 3 {
		out = unknownShape(len(x))
		out[0], out[1] = bare(x[0]), bare(x[1])
		kernel, _ := c.attrInts("kernel_shape")
		if ws, ok := windows(c, kernel, len(x)-2, true); ok {
			for i, win := range ws {
				out[2+i] = win.out(x[2+i])
			}
		}
	}
	return []*graph.Type{tensor(elem, out), tensor(graph.Int64, cloneShape(out))}
}

// globalPool keeps N and C and makes every spatial dim 1.
func globalPool(c *ctx) []*graph.Type {
	x := c.shape(0)
	if x == nil || len(x) < 2 {
		return one(c.elem(0), nil)
	}
	out := cloneShape(x)
	for i := 2; i < len(out); i++ {
		out[i] = static(1)
	}
	return one(c.elem(0), out)
}

// gemm: A [M,K] (or [K,M] with transA) times B [K,N] (or [N,K]) is [M,N].
func gemm(c *ctx) []*graph.Type {
	a, b := c.shape(0), c.shape(1)
	out := unknownShape(2)
	if len(a) == 2 {
		out[0] = bare(a[c.n.AttrInt("transA", 0)&1])
	}
	if len(b) == 2 {
		out[1] = bare(b[1-c.n.AttrInt("transB", 0)&1])
	}
	return one(c.elem(0), out)
}

// matMul follows numpy.matmul: 1-D operands gain and then lose a dim,
// batch dims broadcast. MatMulInteger gives int32; QLinearMatMul reads B
// at input 3 and has its output zero point's type.
func matMul(c *ctx) []*graph.Type {
	bi, elem := c.quantizedVariant("QLinearMatMul", "MatMulInteger")
	a, b := c.shape(0), c.shape(bi)
	if a == nil || b == nil || len(a) == 0 || len(b) == 0 {
		return one(elem, nil)
	}
	var rows, cols []graph.Dim
	aBatch, bBatch := a, b
	if len(a) >= 2 {
		rows = []graph.Dim{bare(a[len(a)-2])}
		aBatch = a[:len(a)-2]
	} else {
		aBatch = nil
	}
	if len(b) >= 2 {
		cols = []graph.Dim{bare(b[len(b)-1])}
		bBatch = b[:len(b)-2]
	} else {
		bBatch = nil
	}
	batch, ok := broadcast(append(graph.Shape{}, aBatch...), append(graph.Shape{}, bBatch...))
	if !ok {
		c.problem("batch dims of %v and %v do not broadcast", a, b)
	}
	if !sameDimOrUnknown(a[len(a)-1], b[max(len(b)-2, 0)]) {
		c.problem("inner dims of %v and %v differ", a, b)
	}
	out := append(append(append(graph.Shape{}, batch...), rows...), cols...)
	return one(elem, out)
}

// quantizedVariant is where the second operand of a Conv or MatMul lies
// and the element type of its output, which the op's quantized variants
// change: the QLinear one reads that operand at input 3 and gives its
// output zero point's type (input 7), the Integer one gives int32.
func (c *ctx) quantizedVariant(qlinear, integer string) (operand int, elem graph.DataType) {
	switch c.n.OpType {
	case qlinear:
		return 3, c.elem(7)
	case integer:
		return 1, graph.Int32
	}
	return 1, c.elem(0)
}

// sameDimOrUnknown reports whether two dims may be equal.
func sameDimOrUnknown(a, b graph.Dim) bool {
	return !isStatic(a) || !isStatic(b) || a.Value == b.Value
}
