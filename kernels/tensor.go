package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
)

// elemSize is the byte size of one element of dt, or 0 for element types
// without a fixed whole-byte size (strings, int4, unknown types).
func elemSize(dt graph.DataType) int {
	if dt == graph.String || !dt.Known() || dt.BitSize() < 8 {
		return 0
	}
	return dt.BitSize() / 8
}

// numElements is the product of dims, checked for negative dims and
// overflow.
func numElements(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in %v", dims)
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("element count of %v overflows", dims)
		}
		n *= d
	}
	return n, nil
}

// count is numElements for dims already known to be valid.
func count(dims []int64) int {
	n, _ := numElements(dims)
	return int(n)
}

// kind is how a kernel carries an element type's values.
type kind uint8

const (
	kindOther kind = iota // no arithmetic here: uint64, bfloat16, float8, complex
	kindFloat             // float16, float32, float64 as float64
	kindInt               // signed integers and uint8..uint32 as int64
	kindBool              // bool as int64 0 or 1
)

func kindOf(dt graph.DataType) kind {
	switch dt {
	case graph.Float, graph.Double, graph.Float16:
		return kindFloat
	case graph.Int8, graph.Int16, graph.Int32, graph.Int64, graph.Uint8, graph.Uint16, graph.Uint32:
		return kindInt
	case graph.Bool:
		return kindBool
	}
	return kindOther
}

func isUnsigned(dt graph.DataType) bool {
	return dt == graph.Uint8 || dt == graph.Uint16 || dt == graph.Uint32 || dt == graph.Uint64
}

// values is how a kernel reads and writes tensors as one Go number
// type: float64 for float tensors, int64 for integer ones, so that what a
// kernel does alike on both kinds is written once.
type values[T float64 | int64] struct {
	read  func(t *graph.Tensor) ([]T, error)
	write func(dt graph.DataType, dims []int64, vals []T) (*graph.Tensor, error)
}

var (
	floatValues = values[float64]{read: floats, write: fromFloats}
	intValues   = values[int64]{read: ints, write: fromInts}
)

// floats reads a float tensor's elements.
func floats(t *graph.Tensor) ([]float64, error) {
	b, err := dataOf(t)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	out := make([]float64, len(b)/elemSize(t.DType))
	switch t.DType {
	case graph.Float:
		for i := range out {
			out[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		}
	case graph.Double:
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
	case graph.Float16:
		for i := range out {
			out[i] = halfToFloat64(le.Uint16(b[2*i:]))
		}
	default:
		return nil, fmt.Errorf("%s is not a float type", t.DType)
	}
	return out, nil
}

// ints reads an integer or bool tensor's elements (uint64 wraps).
func ints(t *graph.Tensor) ([]int64, error) {
	if _, err := dataOf(t); err != nil {
		return nil, err
	}
	return t.Int64s()
}

// dataOf returns t's bytes, checked against its dims.
func dataOf(t *graph.Tensor) ([]byte, error) {
	b, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	n, err := numElements(t.Dims)
	if err != nil {
		return nil, err
	}
	if size := elemSize(t.DType); size == 0 || int64(len(b)) != n*int64(size) {
		return nil, fmt.Errorf("tensor %q: %d bytes for %s%v", t.Name, len(b), t.DType, t.Dims)
	}
	return b, nil
}

// fromFloats builds a float tensor, rounding each value once to dt.
func fromFloats(dt graph.DataType, dims []int64, vals []float64) (*graph.Tensor, error) {
	b := make([]byte, len(vals)*elemSize(dt))
	le := binary.LittleEndian
	switch dt {
	case graph.Float:
		for i, v := range vals {
			le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		}
	case graph.Double:
		for i, v := range vals {
			le.PutUint64(b[8*i:], math.Float64bits(v))
		}
	case graph.Float16:
		for i, v := range vals {
			le.PutUint16(b[2*i:], float64ToHalf(v))
		}
	default:
		return nil, fmt.Errorf("%s is not a float type", dt)
	}
	return graph.NewTensor("", dt, dims, b)
}

// fromInts builds an integer or bool tensor, keeping the low bits of each
// value (two's complement wrap-around, as C and numpy do).
func fromInts(dt graph.DataType, dims []int64, vals []int64) (*graph.Tensor, error) {
	size := elemSize(dt)
	b := make([]byte, len(vals)*size)
	le := binary.LittleEndian
	for i, v := range vals {
		switch size {
		case 1:
			b[i] = byte(v)
		case 2:
			le.PutUint16(b[2*i:], uint16(v))
		case 4:
			le.PutUint32(b[4*i:], uint32(v))
		case 8:
			le.PutUint64(b[8*i:], uint64(v))
		}
	}
	if dt == graph.Bool {
		for i, v := range vals {
			b[i] = boolByte(v != 0)
		}
	}
	return graph.NewTensor("", dt, dims, b)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// fits reports whether v is a value of integer type dt.
func fits(dt graph.DataType, v int64) bool {
	switch dt {
	case graph.Int8:
		return v == int64(int8(v))
	case graph.Int16:
		return v == int64(int16(v))
	case graph.Int32:
		return v == int64(int32(v))
	case graph.Uint8:
		return v == int64(uint8(v))
	case graph.Uint16:
		return v == int64(uint16(v))
	case graph.Uint32:
		return v == int64(uint32(v))
	case graph.Bool:
		return v == 0 || v == 1
	}
	return true
}

// halfToFloat64 converts IEEE 754 binary16 bits (exactly).
func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * math.Ldexp(frac, -24)
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// float64ToHalf rounds v to the nearest binary16 value, ties to even.
func float64ToHalf(v float64) uint16 {
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
	}
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return sign | 0x7e00
	case a == 0:
		return sign
	}
	// The spacing of binary16 values near a: 2^-24 below 2^-14
	// (subnormals), else 2^(e-10) for a in [2^e, 2^(e+1)).
	_, exp := math.Frexp(a) // a = m * 2^exp, m in [0.5, 1)
	e := max(exp-1, -14)
	q := math.Ldexp(1, e-10)
	r := math.RoundToEven(a/q) * q // scaling by a power of two is exact
	if r > 65504 {
		return sign | 0x7c00
	}
	if r < math.Ldexp(1, -14) {
		return sign | uint16(r*(1<<24))
	}
	m, exp := math.Frexp(r)
	return sign | uint16(exp-1+15)<<10 | uint16((2*m-1)*1024)
}
