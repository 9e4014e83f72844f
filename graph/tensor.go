package graph

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/optc-dev/optc/onnxpb"
)

// storage says where a tensor's data lives.
type storage uint8

const (
	storageRaw      storage = iota // little-endian bytes (raw_data, or set by code)
	storageTyped                   // a typed field of the loaded proto (float_data, int64_data, ...)
	storageExternal                // a side file (data_location EXTERNAL)
)

// Tensor is a constant: an initializer or the value of a Constant node or a
// tensor attribute. Its data is little-endian element bytes, held in the
// loaded file's memory (no copy), a side file (read lazily), or the typed
// fields it was stored in; Bytes and the typed accessors give one view of all
// three.
type Tensor struct {
	Name      string
	DType     DataType
	Dims      []int64
	DocString string

	raw     []byte
	storage storage
	ext     *External
	origin  *onnxpb.TensorProto // as loaded, without raw_data
}

// External describes tensor data stored in a side file.
type External struct {
	Location string // relative to the model's folder
	Offset   int64
	Length   int64 // -1 when the file does not say
	Checksum string
	src      *externalSource
}

// NewTensor returns a tensor holding data, which must be the little-endian
// bytes of the elements (see ByteSize); it is not copied.
func NewTensor(name string, dtype DataType, dims []int64, data []byte) (*Tensor, error) {
	t := &Tensor{Name: name, DType: dtype, Dims: append([]int64{}, dims...), raw: data}
	n, err := t.NumElements()
	if err != nil {
		return nil, err
	}
	if want, ok := dtype.ByteSize(n); !ok || int64(len(data)) != want {
		return nil, fmt.Errorf("tensor %q: %d bytes of data for %s%v (want %d)", name, len(data), dtype, dims, want)
	}
	return t, nil
}

// NewFloat32Tensor returns a float32 tensor with the given values.
func NewFloat32Tensor(name string, dims []int64, vals []float32) (*Tensor, error) {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return NewTensor(name, Float, dims, b)
}

// NewInt64Tensor returns an int64 tensor with the given values.
func NewInt64Tensor(name string, dims []int64, vals []int64) (*Tensor, error) {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return NewTensor(name, Int64, dims, b)
}

// NumElements is the product of the dims, with overflow and negative dims
// reported as errors.
func (t *Tensor) NumElements() (int64, error) {
	n := int64(1)
	for _, d := range t.Dims {
		if d < 0 {
			return 0, fmt.Errorf("tensor %q: negative dimension in %v", t.Name, t.Dims)
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("tensor %q: element count of %v overflows int64", t.Name, t.Dims)
		}
		n *= d
	}
	return n, nil
}

// ByteSize is the size of the tensor's data in bytes as its dtype and dims
// say (0 for strings, whose size the dims do not fix).
func (t *Tensor) ByteSize() int64 {
	n, err := t.NumElements()
	if err != nil {
		return 0
	}
	b, _ := t.DType.ByteSize(n)
	return b
}

// IsExternal reports whether the data lives in a side file.
func (t *Tensor) IsExternal() bool { return t.storage == storageExternal }

// External returns where the data lives when it is in a side file, else nil.
func (t *Tensor) External() *External {
	if t.storage != storageExternal {
		return nil
	}
	return t.ext
}

// Bytes returns the little-endian element bytes. The slice may alias the
// loaded file or a mapped side file: callers must not modify it (use
// SetBytes). Strings have no byte form; use Strings.
func (t *Tensor) Bytes() ([]byte, error) {
	switch t.storage {
	case storageRaw:
		return t.raw, nil
	case storageExternal:
		return t.ext.read(t)
	}
	return t.typedBytes()
}

// SetBytes replaces the data (and keeps dtype and dims; change those first
// when they change). The tensor is written as raw_data from now on.
func (t *Tensor) SetBytes(data []byte) error {
	n, err := t.NumElements()
	if err != nil {
		return err
	}
	if want, ok := t.DType.ByteSize(n); !ok || int64(len(data)) != want {
		return fmt.Errorf("tensor %q: %d bytes of data for %s%v (want %d)", t.Name, len(data), t.DType, t.Dims, want)
	}
	t.raw, t.storage, t.ext = data, storageRaw, nil
	return nil
}

// Strings returns the elements of a string tensor.
func (t *Tensor) Strings() ([][]byte, error) {
	if t.DType != String {
		return nil, fmt.Errorf("tensor %q is %s, not string", t.Name, t.DType)
	}
	return t.origin.GetStringData(), nil
}

// Float32s returns the elements converted to float32. It reads float32,
// float16, bfloat16, float64 and the integer types; the result is a copy.
func (t *Tensor) Float32s() ([]float32, error) {
	if !t.DType.IsFloat() && !t.DType.isInteger() || t.DType.BitSize() < 8 {
		return nil, fmt.Errorf("tensor %q: cannot read %s as float32", t.Name, t.DType)
	}
	b, n, err := t.sized()
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	le := binary.LittleEndian
	for i := range out {
		switch t.DType {
		case Float:
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		case Double:
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		case Float16:
			out[i] = halfToFloat32(le.Uint16(b[2*i:]))
		case BFloat16:
			out[i] = math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16)
		case Uint64:
			out[i] = float32(le.Uint64(b[8*i:]))
		default:
			if !t.DType.isInteger() {
				return nil, fmt.Errorf("tensor %q: cannot read %s as float32", t.Name, t.DType)
			}
			out[i] = float32(intAt(t.DType, b, i))
		}
	}
	return out, nil
}

// Int64s returns the elements of an integer or bool tensor as int64 (shape
// tensors, axes, indices).
func (t *Tensor) Int64s() ([]int64, error) {
	if !t.DType.isInteger() {
		return nil, fmt.Errorf("tensor %q is %s, not an integer type", t.Name, t.DType)
	}
	b, n, err := t.sized()
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = intAt(t.DType, b, i)
	}
	return out, nil
}

// sized returns the data and the element count, checked against each other.
func (t *Tensor) sized() ([]byte, int64, error) {
	b, err := t.Bytes()
	if err != nil {
		return nil, 0, err
	}
	n, err := t.NumElements()
	if err != nil {
		return nil, 0, err
	}
	if want, ok := t.DType.ByteSize(n); !ok || int64(len(b)) != want {
		return nil, 0, fmt.Errorf("tensor %q: has %d bytes, %s%v needs %d", t.Name, len(b), t.DType, t.Dims, want)
	}
	return b, n, nil
}

func (t DataType) isInteger() bool {
	switch t {
	case Int8, Uint8, Bool, Int16, Uint16, Int32, Uint32, Int64, Uint64:
		return true
	}
	return false
}

// intAt reads element i of little-endian integer data of type dt (uint64
// wraps above MaxInt64).
func intAt(dt DataType, b []byte, i int) int64 {
	le := binary.LittleEndian
	switch dt {
	case Int8:
		return int64(int8(b[i]))
	case Uint8, Bool:
		return int64(b[i])
	case Int16:
		return int64(int16(le.Uint16(b[2*i:])))
	case Uint16:
		return int64(le.Uint16(b[2*i:]))
	case Int32:
		return int64(int32(le.Uint32(b[4*i:])))
	case Uint32:
		return int64(le.Uint32(b[4*i:]))
	}
	return int64(le.Uint64(b[8*i:]))
}

// typedBytes converts the typed proto fields into little-endian bytes.
// ONNX stores every type narrower than 32 bits one element per int32_data
// entry, and sub-byte types as one packed byte per entry.
func (t *Tensor) typedBytes() ([]byte, error) {
	p := t.origin
	le := binary.LittleEndian
	switch t.DType {
	case Float, Complex64:
		return packLE(p.FloatData, 4, func(b []byte, v float32) { le.PutUint32(b, math.Float32bits(v)) }), nil
	case Double, Complex128:
		return packLE(p.DoubleData, 8, func(b []byte, v float64) { le.PutUint64(b, math.Float64bits(v)) }), nil
	case Int64:
		return packLE(p.Int64Data, 8, func(b []byte, v int64) { le.PutUint64(b, uint64(v)) }), nil
	case Uint64:
		return packLE(p.Uint64Data, 8, le.PutUint64), nil
	case Uint32:
		return packLE(p.Uint64Data, 4, func(b []byte, v uint64) { le.PutUint32(b, uint32(v)) }), nil
	case Int32:
		return packLE(p.Int32Data, 4, func(b []byte, v int32) { le.PutUint32(b, uint32(v)) }), nil
	case Int16, Uint16, Float16, BFloat16:
		return packLE(p.Int32Data, 2, func(b []byte, v int32) { le.PutUint16(b, uint16(v)) }), nil
	case String:
		return nil, fmt.Errorf("tensor %q: string tensors have no byte form", t.Name)
	}
	if t.DType.BitSize() > 0 && t.DType.BitSize() <= 8 {
		return packLE(p.Int32Data, 1, func(b []byte, v int32) { b[0] = byte(v) }), nil
	}
	return nil, fmt.Errorf("tensor %q: cannot read data of type %s", t.Name, t.DType)
}

// packLE lays out the entries of a typed proto field, size bytes each,
// as put writes one at the start of b.
func packLE[T any](vs []T, size int, put func(b []byte, v T)) []byte {
	b := make([]byte, size*len(vs))
	for i, v := range vs {
		put(b[size*i:], v)
	}
	return b
}

// halfToFloat32 converts IEEE 754 binary16 bits to float32.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := int32(-14)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		frac &= 0x3ff
		return math.Float32frombits(sign | uint32(e+127)<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
