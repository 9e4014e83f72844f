package graph

import (
	"fmt"
	"strings"
)

// DataType is an ONNX tensor element type. The numbers are ONNX's
// (TensorProto.DataType), so a DataType converts to and from the file format
// unchanged, and unknown future types survive a round trip.
type DataType int32

// The ONNX element types.
const (
	Undefined      DataType = 0
	Float          DataType = 1
	Uint8          DataType = 2
	Int8           DataType = 3
	Uint16         DataType = 4
	Int16          DataType = 5
	Int32          DataType = 6
	Int64          DataType = 7
	String         DataType = 8
	Bool           DataType = 9
	Float16        DataType = 10
	Double         DataType = 11
	Uint32         DataType = 12
	Uint64         DataType = 13
	Complex64      DataType = 14
	Complex128     DataType = 15
	BFloat16       DataType = 16
	Float8E4M3FN   DataType = 17
	Float8E4M3FNUZ DataType = 18
	Float8E5M2     DataType = 19
	Float8E5M2FNUZ DataType = 20
	Uint4          DataType = 21
	Int4           DataType = 22
	Float4E2M1     DataType = 23
	Float8E8M0     DataType = 24
	Uint2          DataType = 25
	Int2           DataType = 26
)

var dataTypeNames = map[DataType]string{
	Undefined: "undefined", Float: "float32", Uint8: "uint8", Int8: "int8",
	Uint16: "uint16", Int16: "int16", Int32: "int32", Int64: "int64",
	String: "string", Bool: "bool", Float16: "float16", Double: "float64",
	Uint32: "uint32", Uint64: "uint64", Complex64: "complex64",
	Complex128: "complex128", BFloat16: "bfloat16",
	Float8E4M3FN: "float8e4m3fn", Float8E4M3FNUZ: "float8e4m3fnuz",
	Float8E5M2: "float8e5m2", Float8E5M2FNUZ: "float8e5m2fnuz",
	Uint4: "uint4", Int4: "int4", Float4E2M1: "float4e2m1",
	Float8E8M0: "float8e8m0", Uint2: "uint2", Int2: "int2",
}

// String returns the numpy-style name (float32, int64, ...).
func (t DataType) String() string {
	if s, ok := dataTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("dtype(%d)", int32(t))
}

// ParseDataType accepts the names String returns, plus ONNX's upper-case
// names (FLOAT, INT64, ...) and the common aliases float and double.
func ParseDataType(s string) (DataType, error) {
	l := strings.ToLower(s)
	switch l {
	case "float":
		return Float, nil
	case "double":
		return Double, nil
	}
	for t, name := range dataTypeNames {
		if name == l {
			return t, nil
		}
	}
	return Undefined, fmt.Errorf("unknown data type %q", s)
}

// Known reports whether t is one of the types this version of optc knows.
func (t DataType) Known() bool {
	_, ok := dataTypeNames[t]
	return ok && t != Undefined
}

// BitSize is the storage size of one element in bits (4 for int4, 2 for
// int2), or 0 for strings and unknown types.
func (t DataType) BitSize() int {
	switch t {
	case Bool, Int8, Uint8, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return 8
	case Int16, Uint16, Float16, BFloat16:
		return 16
	case Float, Int32, Uint32:
		return 32
	case Double, Int64, Uint64, Complex64:
		return 64
	case Complex128:
		return 128
	case Int4, Uint4, Float4E2M1:
		return 4
	case Int2, Uint2:
		return 2
	}
	return 0
}

// ByteSize returns the number of bytes that n elements of type t occupy in
// raw_data (sub-byte types are packed, the last byte padded), and false for
// strings and unknown types.
func (t DataType) ByteSize(n int64) (int64, bool) {
	bits := int64(t.BitSize())
	if bits == 0 || n < 0 {
		return 0, false
	}
	if bits >= 8 {
		if n > (1<<62)/(bits/8) {
			return 0, false
		}
		return n * (bits / 8), true
	}
	perByte := 8 / bits
	b := n / perByte // rounded up below; n+perByte-1 could overflow
	if n%perByte != 0 {
		b++
	}
	return b, true
}

// IsFloat reports whether t is a floating-point type of any width.
func (t DataType) IsFloat() bool {
	switch t {
	case Float, Double, Float16, BFloat16, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float4E2M1, Float8E8M0:
		return true
	}
	return false
}
