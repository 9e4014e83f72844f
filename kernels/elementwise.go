package kernels

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
)

// Elementwise operators share one broadcasting loop, zipWith, over the
// index maps broadcastInputs computes; each operator only says what it
// does to a pair of values.

// zipWith applies f to the pairs a[ia[k]], b[ib[k]].
func zipWith[A, R any](a, b []A, ia, ib []int, f func(x, y A) (R, error)) ([]R, error) {
	out := make([]R, len(ia))
	for k := range out {
		r, err := f(a[ia[k]], b[ib[k]])
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

// arith is a binary arithmetic operator on floats and, when i is set, on
// integers.
type arith struct {
	f func(a, b float64) float64
	i func(a, b int64) (int64, error)
	// noNaN: the result for NaN inputs is not pinned down (Min, Max).
	noNaN bool
	// exact: an integer result that does not fit the type is undefined
	// (Div of the most negative value by -1).
	exact bool
}

var (
	opAdd = arith{
		f: func(a, b float64) float64 { return a + b },
		i: func(a, b int64) (int64, error) { return a + b, nil },
	}
	opSub = arith{
		f: func(a, b float64) float64 { return a - b },
		i: func(a, b int64) (int64, error) { return a - b, nil },
	}
	opMul = arith{
		f: func(a, b float64) float64 { return a * b },
		i: func(a, b int64) (int64, error) { return a * b, nil },
	}
	// Integer division truncates toward zero, as C does (ONNX Runtime);
	// a zero divisor is undefined.
	opDiv = arith{
		f: func(a, b float64) float64 { return a / b },
		i: func(a, b int64) (int64, error) {
			if b == 0 || a == math.MinInt64 && b == -1 {
				return 0, fmt.Errorf("%w: integer division %d / %d", ErrUndefined, a, b)
			}
			return a / b, nil
		},
		exact: true,
	}
	opMax = arith{f: math.Max, i: func(a, b int64) (int64, error) { return max(a, b), nil }, noNaN: true}
	opMin = arith{f: math.Min, i: func(a, b int64) (int64, error) { return min(a, b), nil }, noNaN: true}
)

func hasNaN(xs []float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) {
			return true
		}
	}
	return false
}

// broadcastPair returns the inputs of a binary operator with numpy
// broadcasting, which came at opset 7 (earlier versions broadcast by
// attribute).
func (c *call) broadcastPair(sameType bool) (*graph.Tensor, *graph.Tensor, error) {
	if c.opset < 7 {
		return nil, nil, c.unsupported("legacy broadcast attributes")
	}
	if sameType {
		return c.samePair()
	}
	return c.pair()
}

// binaryKernel is an arithmetic operator with numpy broadcasting (opset 7
// on; earlier versions broadcast by attribute).
func binaryKernel(op arith) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		a, b, err := c.broadcastPair(false)
		if err != nil {
			return nil, err
		}
		return one(c.arith(op, a, b))
	}
}

// modKernel: with fmod=0 (integers only) the result takes the divisor's
// sign, as Python's %; with fmod=1 the dividend's, as C's fmod. A zero
// integer divisor is undefined.
func modKernel(c *call) ([]*graph.Tensor, error) {
	fmod, err := c.attrInt("fmod", 0)
	if err != nil {
		return nil, err
	}
	op := arith{f: math.Mod, i: func(a, b int64) (int64, error) {
		if b == 0 {
			return 0, fmt.Errorf("%w: integer modulo %d %% 0", ErrUndefined, a)
		}
		r := a % b
		if fmod == 0 && r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return r, nil
	}}
	if a := c.input(0); fmod == 0 && a != nil && kindOf(a.DType) == kindFloat {
		return nil, c.invalid("fmod=0 on %s", a.DType)
	}
	return binaryKernel(op)(c)
}

// variadicKernel folds op over one or more inputs (Max, Min, Sum).
func variadicKernel(op arith) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		if c.opset < 8 {
			return nil, c.unsupported("inputs without multidirectional broadcasting")
		}
		return one(c.fold(op))
	}
}

func (c *call) fold(op arith) (*graph.Tensor, error) {
	acc, err := c.need(0)
	if err != nil {
		return nil, err
	}
	if len(c.in) == 1 {
		if k := kindOf(acc.DType); k != kindFloat && k != kindInt {
			return nil, c.unsupported("%s inputs", acc.DType)
		}
		return acc, c.reserve(acc.DType, acc.Dims)
	}
	for i := 1; i < len(c.in); i++ {
		t, err := c.need(i)
		if err != nil {
			return nil, err
		}
		if acc, err = c.arith(op, acc, t); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

func meanKernel(c *call) ([]*graph.Tensor, error) {
	if c.opset < 8 {
		return nil, c.unsupported("inputs without multidirectional broadcasting")
	}
	if t := c.input(0); t != nil && kindOf(t.DType) != kindFloat {
		return nil, c.unsupported("%s inputs", t.DType)
	}
	if len(c.in) == 1 {
		return one(c.need(0))
	}
	sum, err := c.fold(opAdd)
	if err != nil {
		return nil, err
	}
	x, err := floats(sum)
	if err != nil {
		return nil, err
	}
	for i := range x {
		x[i] /= float64(len(c.in))
	}
	return one(fromFloats(sum.DType, sum.Dims, x))
}

// arith applies op to a and b, which must have one type.
func (c *call) arith(op arith, a, b *graph.Tensor) (*graph.Tensor, error) {
	if a.DType != b.DType {
		return nil, c.invalid("inputs of types %s and %s", a.DType, b.DType)
	}
	dt := a.DType
	k := kindOf(dt)
	if k != kindFloat && (k != kindInt || op.i == nil) {
		return nil, c.unsupported("%s inputs", dt)
	}
	dims, idx, err := c.broadcastInputs(dt, a, b)
	if err != nil {
		return nil, err
	}
	if k == kindFloat {
		x, y, err := both(floats, a, b)
		if err != nil {
			return nil, err
		}
		if op.noNaN && (hasNaN(x) || hasNaN(y)) {
			return nil, c.unsupported("NaN inputs")
		}
		r, _ := zipWith(x, y, idx[0], idx[1], func(p, q float64) (float64, error) { return op.f(p, q), nil })
		return fromFloats(dt, dims, r)
	}
	x, y, err := both(ints, a, b)
	if err != nil {
		return nil, err
	}
	r, err := zipWith(x, y, idx[0], idx[1], func(p, q int64) (int64, error) {
		v, err := op.i(p, q)
		if err == nil && op.exact && !fits(dt, v) {
			err = fmt.Errorf("%w: %s %d, %d overflows %s", ErrUndefined, c.op, p, q, dt)
		}
		return v, err
	})
	if err != nil {
		return nil, err
	}
	return fromInts(dt, dims, r)
}

// both reads a and b with read.
func both[T any](read func(*graph.Tensor) (T, error), a, b *graph.Tensor) (T, T, error) {
	x, err := read(a)
	if err != nil {
		return x, x, err
	}
	y, err := read(b)
	return x, y, err
}

// powKernel: Pow's exponent may have another type than its base (opset
// 12); the result has the base's type. Integer results are computed
// exactly and folded only where every implementation agrees: a
// non-negative integral result that fits the type.
func powKernel(c *call) ([]*graph.Tensor, error) {
	a, b, err := c.broadcastPair(false)
	if err != nil {
		return nil, err
	}
	if c.opset < 12 && a.DType != b.DType {
		return nil, c.invalid("inputs of types %s and %s", a.DType, b.DType)
	}
	ka, kb := kindOf(a.DType), kindOf(b.DType)
	if ka != kindFloat && ka != kindInt || kb != kindFloat && kb != kindInt {
		return nil, c.unsupported("%s ^ %s", a.DType, b.DType)
	}
	dims, idx, err := c.broadcastInputs(a.DType, a, b)
	if err != nil {
		return nil, err
	}
	x, y, err := both(asFloats, a, b)
	if err != nil {
		return nil, err
	}
	if ka == kindFloat {
		r, _ := zipWith(x, y, idx[0], idx[1], func(p, q float64) (float64, error) { return math.Pow(p, q), nil })
		return one(fromFloats(a.DType, dims, r))
	}
	r, err := zipWith(x, y, idx[0], idx[1], func(p, q float64) (int64, error) {
		v := math.Pow(p, q)
		if q < 0 || v != math.Trunc(v) || math.Abs(v) > 1<<53 || !fits(a.DType, int64(v)) {
			return 0, c.unsupported("integer %g ^ %g = %g", p, q, v)
		}
		return int64(v), nil
	})
	if err != nil {
		return nil, err
	}
	return one(fromInts(a.DType, dims, r))
}

// asFloats reads a float or integer tensor as float64 (integers below
// 2^53 exactly).
func asFloats(t *graph.Tensor) ([]float64, error) {
	if kindOf(t.DType) == kindFloat {
		return floats(t)
	}
	xs, err := ints(t)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out, nil
}

// unary is an elementwise operator of one input.
type unary struct {
	f func(float64) float64
	i func(int64) int64 // nil: floats only
	// signed: not defined on unsigned integers.
	signed bool
}

var (
	opAbs = unary{f: math.Abs, i: func(a int64) int64 {
		if a < 0 {
			return -a
		}
		return a
	}}
	opNeg        = unary{f: func(a float64) float64 { return -a }, i: func(a int64) int64 { return -a }, signed: true}
	opSqrt       = unary{f: math.Sqrt}
	opReciprocal = unary{f: func(a float64) float64 { return 1 / a }}
)

func unaryKernel(op unary) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		x, err := c.need(0)
		if err != nil {
			return nil, err
		}
		k := kindOf(x.DType)
		if k != kindFloat && (k != kindInt || op.i == nil || op.signed && isUnsigned(x.DType)) {
			return nil, c.unsupported("%s input", x.DType)
		}
		if err := c.reserve(x.DType, x.Dims); err != nil {
			return nil, err
		}
		if k == kindFloat {
			return one(mapValues(floatValues, x, op.f))
		}
		return one(mapValues(intValues, x, op.i))
	}
}

// mapValues is x with f applied to each element, read as T.
func mapValues[T float64 | int64](vs values[T], x *graph.Tensor, f func(T) T) (*graph.Tensor, error) {
	v, err := vs.read(x)
	if err != nil {
		return nil, err
	}
	for i := range v {
		v[i] = f(v[i])
	}
	return vs.write(x.DType, x.Dims, v)
}

// compare is a comparison; its result is bool.
type compare struct {
	f func(a, b float64) bool
	i func(a, b int64) bool
	// bools: defined on bool inputs too (Equal).
	bools bool
}

var (
	cmpEqual          = compare{f: func(a, b float64) bool { return a == b }, i: func(a, b int64) bool { return a == b }, bools: true}
	cmpLess           = compare{f: func(a, b float64) bool { return a < b }, i: func(a, b int64) bool { return a < b }}
	cmpLessOrEqual    = compare{f: func(a, b float64) bool { return a <= b }, i: func(a, b int64) bool { return a <= b }}
	cmpGreater        = compare{f: func(a, b float64) bool { return a > b }, i: func(a, b int64) bool { return a > b }}
	cmpGreaterOrEqual = compare{f: func(a, b float64) bool { return a >= b }, i: func(a, b int64) bool { return a >= b }}
)

func compareKernel(op compare) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		a, b, err := c.broadcastPair(true)
		if err != nil {
			return nil, err
		}
		k := kindOf(a.DType)
		if k != kindFloat && k != kindInt && (k != kindBool || !op.bools) {
			return nil, c.unsupported("%s inputs", a.DType)
		}
		dims, idx, err := c.broadcastInputs(graph.Bool, a, b)
		if err != nil {
			return nil, err
		}
		var r []bool
		if k == kindFloat {
			x, y, err := both(floats, a, b)
			if err != nil {
				return nil, err
			}
			r, _ = zipWith(x, y, idx[0], idx[1], func(p, q float64) (bool, error) { return op.f(p, q), nil })
		} else {
			x, y, err := both(ints, a, b)
			if err != nil {
				return nil, err
			}
			r, _ = zipWith(x, y, idx[0], idx[1], func(p, q int64) (bool, error) { return op.i(p, q), nil })
		}
		return one(fromBools(dims, r))
	}
}

func fromBools(dims []int64, vals []bool) (*graph.Tensor, error) {
	b := make([]byte, len(vals))
	for i, v := range vals {
		b[i] = boolByte(v)
	}
	return graph.NewTensor("", graph.Bool, dims, b)
}

// bools reads a bool tensor.
func (c *call) bools(t *graph.Tensor) ([]bool, error) {
	if t.DType != graph.Bool {
		return nil, c.invalid("%s input where bool is required", t.DType)
	}
	b, err := dataOf(t)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(b))
	for i, v := range b {
		out[i] = v != 0
	}
	return out, nil
}

func logicalKernel(f func(a, b bool) bool) kernel {
	return func(c *call) ([]*graph.Tensor, error) {
		a, b, err := c.broadcastPair(false)
		if err != nil {
			return nil, err
		}
		x, y, err := both(c.bools, a, b)
		if err != nil {
			return nil, err
		}
		dims, idx, err := c.broadcastInputs(graph.Bool, a, b)
		if err != nil {
			return nil, err
		}
		r, _ := zipWith(x, y, idx[0], idx[1], func(p, q bool) (bool, error) { return f(p, q), nil })
		return one(fromBools(dims, r))
	}
}

func notKernel(c *call) ([]*graph.Tensor, error) {
	x, err := c.need(0)
	if err != nil {
		return nil, err
	}
	v, err := c.bools(x)
	if err != nil {
		return nil, err
	}
	if err := c.reserve(graph.Bool, x.Dims); err != nil {
		return nil, err
	}
	for i := range v {
		v[i] = !v[i]
	}
	return one(fromBools(x.Dims, v))
}

// whereKernel picks from X where the condition holds, else from Y, all
// three broadcast together (opset 9 on).
func whereKernel(c *call) ([]*graph.Tensor, error) {
	var ts [3]*graph.Tensor
	for i := range ts {
		t, err := c.need(i)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	cond, x, y := ts[0], ts[1], ts[2]
	if x.DType != y.DType {
		return nil, c.invalid("X is %s, Y is %s", x.DType, y.DType)
	}
	take, err := c.bools(cond)
	if err != nil {
		return nil, err
	}
	dims, idx, err := c.broadcastInputs(x.DType, cond, x, y)
	if err != nil {
		return nil, err
	}
	xb, yb, err := both(dataOf, x, y)
	if err != nil {
		return nil, err
	}
	size := elemSize(x.DType)
	out := make([]byte, len(idx[0])*size)
	for k := range idx[0] {
		src, i := yb, idx[2][k]
		if take[idx[0][k]] {
			src, i = xb, idx[1][k]
		}
		copy(out[k*size:(k+1)*size], src[i*size:(i+1)*size])
	}
	return one(graph.NewTensor("", x.DType, dims, out))
}
