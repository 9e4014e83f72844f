package shapes

import (
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Helpers over dimensions and shapes. A symbolic dim stands for one
// unknown number: two dims with the same symbol are equal, two different
// symbols may or may not be.

func static(n int64) graph.Dim { return graph.StaticDim(n) }

func staticDims(ns []int64) []graph.Dim {
	out := make([]graph.Dim, len(ns))
	for i, n := range ns {
		out[i] = static(n)
	}
	return out
}

// staticInts converts fully static dims to numbers.
func staticInts(ds []graph.Dim) ([]int64, bool) {
	out := make([]int64, len(ds))
	for i, d := range ds {
		if !isStatic(d) {
			return nil, false
		}
		out[i] = d.Value
	}
	return out, true
}

// bare drops a dim's denotation: inferred dims carry numbers and symbols,
// not the declared meaning of the dim they came from.
func bare(d graph.Dim) graph.Dim { return graph.Dim{Kind: d.Kind, Value: d.Value, Param: d.Param} }

func isStatic(d graph.Dim) bool         { return d.Kind == graph.DimStatic }
func isValue(d graph.Dim, n int64) bool { return d.Kind == graph.DimStatic && d.Value == n }

// sameDim reports whether a and b are known to be equal.
func sameDim(a, b graph.Dim) bool {
	switch {
	case a.Kind == graph.DimStatic && b.Kind == graph.DimStatic:
		return a.Value == b.Value
	case a.Kind == graph.DimSymbolic && b.Kind == graph.DimSymbolic:
		return a.Param == b.Param
	}
	return false
}

func sameShape(a, b graph.Shape) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// cloneShape copies s without denotations, keeping nil as nil.
func cloneShape(s graph.Shape) graph.Shape {
	if s == nil {
		return nil
	}
	out := make(graph.Shape, len(s))
	for i, d := range s {
		out[i] = bare(d)
	}
	return out
}

// asShape reads known values as a shape: a negative number (which no
// dim can be) becomes unknown.
func asShape(vals []graph.Dim) graph.Shape {
	out := make(graph.Shape, len(vals))
	for i, d := range vals {
		if !isStatic(d) || d.Value >= 0 {
			out[i] = bare(d)
		}
	}
	return out
}

// unknownShape is a shape of rank r with no dim known.
func unknownShape(r int) graph.Shape { return make(graph.Shape, r) }

// tensor is the type of a tensor output, or nil when nothing is known.
func tensor(elem graph.DataType, s graph.Shape) *graph.Type {
	return typeOrNil(graph.TensorType(elem, s))
}

func typeOrNil(t *graph.Type) *graph.Type {
	if t.Kind == graph.KindTensor && t.Elem == graph.Undefined && t.Shape == nil {
		return nil
	}
	return t
}

// broadcastDim combines two dims under numpy broadcasting; false when two
// numbers cannot go together. A number other than 1 wins over a symbol
// or an unknown dim (the other must be 1 or equal to it).
func broadcastDim(a, b graph.Dim) (graph.Dim, bool) {
	switch {
	case isValue(a, 1):
		return bare(b), true
	case isValue(b, 1):
		return bare(a), true
	case isStatic(a) && isStatic(b):
		return bare(a), a.Value == b.Value
	case isStatic(a):
		return bare(a), true
	case isStatic(b):
		return bare(b), true
	case sameDim(a, b):
		return bare(a), true
	}
	return graph.Dim{}, true
}

// broadcast is the numpy broadcast of shapes (nil when a rank is
// unknown); false when two dims contradict each other.
func broadcast(shapes ...graph.Shape) (graph.Shape, bool) {
	r := 0
	for _, s := range shapes {
		if s == nil {
			return nil, true
		}
		r = max(r, len(s))
	}
	out := make(graph.Shape, r)
	for i := range out {
		out[i] = static(1)
	}
	for _, s := range shapes {
		off := r - len(s)
		for i, d := range s {
			b, ok := broadcastDim(out[off+i], d)
			if !ok {
				return nil, false
			}
			out[off+i] = b
		}
	}
	return out, true
}

// product is the product of dims as a number times a multiset of symbols;
// false when a dim is unknown or the number overflows.
func product(dims []graph.Dim) (n int64, syms []string, ok bool) {
	n = 1
	for _, d := range dims {
		switch d.Kind {
		case graph.DimStatic:
			if d.Value < 0 || d.Value != 0 && n > math.MaxInt64/d.Value {
				return 0, nil, false
			}
			n *= d.Value
		case graph.DimSymbolic:
			syms = append(syms, d.Param)
		default:
			return 0, nil, false
		}
	}
	slices.Sort(syms)
	return n, syms, true
}

// productDim is the product of dims as one dim: a number, the single
// symbol of a product whose numbers multiply to 1, or unknown.
func productDim(dims []graph.Dim) graph.Dim {
	n, syms, ok := product(dims)
	switch {
	case !ok:
		return graph.Dim{}
	case n == 0:
		return static(0)
	case len(syms) == 0:
		return static(n)
	case len(syms) == 1 && n == 1:
		return graph.SymbolicDim(syms[0])
	}
	return graph.Dim{}
}

// normAxis maps a possibly negative axis into [0, r).
func normAxis(a int64, r int) (int, bool) {
	if a < 0 {
		a += int64(r)
	}
	return int(a), a >= 0 && a < int64(r)
}

// normAxes maps axes into [0, r); false on an axis out of range or twice.
func normAxes(axes []int64, r int) ([]int, bool) {
	out := make([]int, len(axes))
	seen := make(map[int]bool, len(axes))
	for i, a := range axes {
		ax, ok := normAxis(a, r)
		if !ok || seen[ax] {
			return nil, false
		}
		seen[ax] = true
		out[i] = ax
	}
	return out, true
}

// fitAxes is normAxes for an op whose axes must fit: axes that do not
// are reported as a problem of the node.
func (c *ctx) fitAxes(axes []int64, r int) ([]int, bool) {
	norm, ok := normAxes(axes, r)
	if !ok {
		c.problem("axes %v do not fit rank %d", axes, r)
	}
	return norm, ok
}

// addDims is a+b+c... when all are numbers, else the one non-zero
// operand's dim when the rest are 0, else unknown.
func addDims(dims ...graph.Dim) graph.Dim {
	var sum int64
	var other *graph.Dim
	for i, d := range dims {
		switch {
		case isStatic(d):
			sum += d.Value
		case other == nil:
			other = &dims[i]
		default:
			return graph.Dim{}
		}
	}
	switch {
	case other == nil:
		return static(sum)
	case sum == 0 && other.Kind == graph.DimSymbolic:
		return bare(*other)
	}
	return graph.Dim{}
}

// scaleDim is d*k for a number k.
func scaleDim(d graph.Dim, k int64) graph.Dim {
	switch {
	case k == 1:
		return bare(d)
	case isStatic(d):
		return static(d.Value * k)
	}
	return graph.Dim{}
}

// divDim is d/k for a number k that divides it.
func divDim(d graph.Dim, k int64) graph.Dim {
	switch {
	case k == 1:
		return bare(d)
	case isStatic(d) && k > 0 && d.Value%k == 0:
		return static(d.Value / k)
	}
	return graph.Dim{}
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) == (b < 0) {
		q++
	}
	return q
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func isInt(t graph.DataType) bool {
	switch t {
	case graph.Int8, graph.Uint8, graph.Bool, graph.Int16, graph.Uint16, graph.Int32, graph.Uint32, graph.Int64, graph.Uint64:
		return true
	}
	return false
}
