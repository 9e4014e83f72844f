package graph

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/onnxpb"
)

// DimKind says what is known about one dimension.
type DimKind uint8

// A dimension is unknown, a number, or a named symbol.
const (
	DimUnknown DimKind = iota
	DimStatic
	DimSymbolic
)

// Dim is one dimension of a shape. The zero Dim is unknown.
type Dim struct {
	Kind       DimKind
	Value      int64  // when Kind is DimStatic
	Param      string // when Kind is DimSymbolic, e.g. "N" or "batch"
	Denotation string // optional semantic tag such as DATA_BATCH
}

// StaticDim returns a dimension of known size n.
func StaticDim(n int64) Dim { return Dim{Kind: DimStatic, Value: n} }

// SymbolicDim returns a dimension named by a symbol.
func SymbolicDim(name string) Dim { return Dim{Kind: DimSymbolic, Param: name} }

func (d Dim) String() string {
	switch d.Kind {
	case DimStatic:
		return strconv.FormatInt(d.Value, 10)
	case DimSymbolic:
		return d.Param
	}
	return "?"
}

// Shape is a tensor shape. A nil Shape means the rank is unknown; an empty
// non-nil Shape is a scalar.
type Shape []Dim

// StaticShape builds a fully known shape.
func StaticShape(dims ...int64) Shape {
	s := make(Shape, len(dims))
	for i, d := range dims {
		s[i] = StaticDim(d)
	}
	return s
}

// IsStatic reports whether the rank and every dimension are known numbers.
func (s Shape) IsStatic() bool {
	if s == nil {
		return false
	}
	for _, d := range s {
		if d.Kind != DimStatic {
			return false
		}
	}
	return true
}

// Dims returns the dimensions as numbers, with -1 for symbolic or unknown
// ones; nil when the rank is unknown.
func (s Shape) Dims() []int64 {
	if s == nil {
		return nil
	}
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = -1
		if d.Kind == DimStatic {
			out[i] = d.Value
		}
	}
	return out
}

func (s Shape) String() string {
	if s == nil {
		return "[?]"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TypeKind is the kind of value a Type describes.
type TypeKind uint8

// Value kinds, as in ONNX's TypeProto.
const (
	KindUnknown TypeKind = iota
	KindTensor
	KindSparseTensor
	KindSequence
	KindMap
	KindOptional
	KindOpaque
)

// Type is the declared type of a value. Tensors (dense and sparse) are
// modelled fully; sequences, maps, optionals and opaque types keep their
// protobuf form and are written back as loaded. Values may share one Type
// (infer-shapes gives many values the types inference made): change a
// copy (Clone) and assign it, never a Type in place.
type Type struct {
	Kind       TypeKind
	Elem       DataType // element type of a (sparse) tensor
	Shape      Shape    // nil: rank unknown
	Denotation string

	origin *onnxpb.TypeProto // as loaded; reused on save while unchanged
}

// TensorType returns the type of a dense tensor.
func TensorType(elem DataType, shape Shape) *Type {
	return &Type{Kind: KindTensor, Elem: elem, Shape: shape}
}

func (t *Type) String() string {
	if t == nil {
		return "?"
	}
	switch t.Kind {
	case KindTensor:
		return t.Elem.String() + t.Shape.String()
	case KindSparseTensor:
		return "sparse " + t.Elem.String() + t.Shape.String()
	case KindSequence:
		return "sequence"
	case KindMap:
		return "map"
	case KindOptional:
		return "optional"
	case KindOpaque:
		return "opaque"
	}
	return "?"
}

// Admits reports whether a value of type t may hold x: a nil type admits
// anything; otherwise a dense tensor of the same element type (or an
// undeclared one) whose static dims agree.
func (t *Type) Admits(x *Tensor) bool {
	if t == nil {
		return true
	}
	if t.Kind != KindTensor && t.Kind != KindUnknown || t.Elem != Undefined && t.Elem != x.DType {
		return false
	}
	return t.Shape == nil || shapeAdmits(t.Shape, x.Dims)
}

// Clone returns a deep copy that can be changed independently.
func (t *Type) Clone() *Type {
	if t == nil {
		return nil
	}
	c := *t
	if t.Shape != nil {
		c.Shape = append(Shape{}, t.Shape...)
	}
	return &c
}

func (t *Type) equal(o *Type) bool {
	if t == nil || o == nil {
		return t == o
	}
	if t.Kind != o.Kind || t.Elem != o.Elem || t.Denotation != o.Denotation || (t.Shape == nil) != (o.Shape == nil) || len(t.Shape) != len(o.Shape) {
		return false
	}
	for i := range t.Shape {
		if t.Shape[i] != o.Shape[i] {
			return false
		}
	}
	return true
}

func decodeType(p *onnxpb.TypeProto) *Type {
	if p == nil {
		return nil
	}
	t := &Type{Denotation: p.GetDenotation(), origin: p}
	switch v := p.Value.(type) {
	case *onnxpb.TypeProto_TensorType:
		t.Kind = KindTensor
		t.Elem = DataType(v.TensorType.GetElemType())
		t.Shape = decodeShape(v.TensorType.GetShape())
	case *onnxpb.TypeProto_SparseTensorType:
		t.Kind = KindSparseTensor
		t.Elem = DataType(v.SparseTensorType.GetElemType())
		t.Shape = decodeShape(v.SparseTensorType.GetShape())
	case *onnxpb.TypeProto_SequenceType:
		t.Kind = KindSequence
	case *onnxpb.TypeProto_MapType:
		t.Kind = KindMap
	case *onnxpb.TypeProto_OptionalType:
		t.Kind = KindOptional
	case *onnxpb.TypeProto_OpaqueType:
		t.Kind = KindOpaque
	}
	return t
}

func decodeShape(p *onnxpb.TensorShapeProto) Shape {
	if p == nil {
		return nil
	}
	s := make(Shape, len(p.Dim))
	for i, d := range p.Dim {
		s[i].Denotation = d.GetDenotation()
		switch v := d.Value.(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			s[i].Kind, s[i].Value = DimStatic, v.DimValue
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			s[i].Kind, s[i].Param = DimSymbolic, v.DimParam
		}
	}
	return s
}

// encodeType returns the protobuf form of t: the loaded message itself while
// t still says what it said, so unmodelled details survive.
func encodeType(t *Type) (*onnxpb.TypeProto, error) {
	if t == nil {
		return nil, nil
	}
	if t.origin != nil && t.equal(decodeType(t.origin)) {
		return t.origin, nil
	}
	p := &onnxpb.TypeProto{Denotation: opt(t.Denotation, t.originDenotation())}
	switch t.Kind {
	case KindTensor:
		p.Value = &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: ptr(int32(t.Elem)), Shape: encodeShape(t.Shape)}}
	case KindSparseTensor:
		p.Value = &onnxpb.TypeProto_SparseTensorType{SparseTensorType: &onnxpb.TypeProto_SparseTensor{
			ElemType: ptr(int32(t.Elem)), Shape: encodeShape(t.Shape)}}
	default:
		if t.origin == nil {
			return nil, fmt.Errorf("type %s has no encoding: only tensor types can be built", t)
		}
		p.Value = t.origin.Value
	}
	return p, nil
}

func (t *Type) originDenotation() *string {
	if t.origin == nil {
		return nil
	}
	return t.origin.Denotation
}

func encodeShape(s Shape) *onnxpb.TensorShapeProto {
	if s == nil {
		return nil
	}
	p := &onnxpb.TensorShapeProto{Dim: make([]*onnxpb.TensorShapeProto_Dimension, len(s))}
	for i, d := range s {
		pd := &onnxpb.TensorShapeProto_Dimension{}
		if d.Denotation != "" {
			pd.Denotation = ptr(d.Denotation)
		}
		switch d.Kind {
		case DimStatic:
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Value}
		case DimSymbolic:
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
		}
		p.Dim[i] = pd
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// opt returns the pointer to store for an optional proto2 field whose IR
// value is v and whose loaded pointer was orig: the loaded pointer while the
// value is unchanged (so an explicitly stored zero stays stored and an absent
// field stays absent), nil for a new zero value, else a pointer to v.
func opt[T comparable](v T, orig *T) *T {
	var zero T
	switch {
	case orig != nil && *orig == v:
		return orig
	case orig == nil && v == zero:
		return nil
	}
	return &v
}
