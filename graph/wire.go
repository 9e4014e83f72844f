package graph

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
)

// Field numbers the loader and writer handle at the wire level, so that
// initializer data is neither copied on load nor on save.
const (
	modelGraphField       protowire.Number = 7
	graphInitializerField protowire.Number = 5
	tensorRawDataField    protowire.Number = 9
)

// rawField is a tensor's raw_data as found in the file.
type rawField struct {
	data    []byte
	present bool
}

// field is one top-level field of a serialized message.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	whole []byte // tag and value
	value []byte // the payload of a length-delimited field
}

// scanFields splits a serialized message into its top-level fields,
// reporting where it is malformed.
func scanFields(b []byte, what string) ([]field, error) {
	var fs []field
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, fmt.Errorf("%s: bad field tag at byte %d: %v", what, off, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			return nil, fmt.Errorf("%s: field %d at byte %d: %v", what, num, off, protowire.ParseError(m))
		}
		f := field{num: num, typ: typ, whole: b[off : off+n+m]}
		if typ == protowire.BytesType {
			f.value, _ = protowire.ConsumeBytes(b[off+n:])
		}
		fs = append(fs, f)
		off += n + m
	}
	return fs, nil
}

// unmarshalModel decodes a ModelProto. The raw_data of the main graph's
// initializers is not copied: it is returned as slices of b, one per
// initializer, and left out of the protobuf messages.
func unmarshalModel(b []byte) (*onnxpb.ModelProto, []rawField, error) {
	fs, err := scanFields(b, "model")
	if err != nil {
		return nil, nil, err
	}
	var rest []byte
	var graphs []field
	for _, f := range fs {
		if f.num == modelGraphField && f.typ == protowire.BytesType {
			graphs = append(graphs, f)
			continue
		}
		rest = append(rest, f.whole...)
	}
	mp := &onnxpb.ModelProto{}
	if len(graphs) != 1 {
		// No graph, or a graph split over several fields that protobuf
		// merges: take the plain, copying path.
		if err := proto.Unmarshal(b, mp); err != nil {
			return nil, nil, fmt.Errorf("model: %w", err)
		}
		return mp, nil, nil
	}
	if err := proto.Unmarshal(rest, mp); err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	gp, raws, err := unmarshalGraph(graphs[0].value)
	if err != nil {
		return nil, nil, err
	}
	mp.Graph = gp
	return mp, raws, nil
}

func unmarshalGraph(b []byte) (*onnxpb.GraphProto, []rawField, error) {
	fs, err := scanFields(b, "graph")
	if err != nil {
		return nil, nil, err
	}
	var rest []byte
	var inits []*onnxpb.TensorProto
	var raws []rawField
	for _, f := range fs {
		if f.num != graphInitializerField || f.typ != protowire.BytesType {
			rest = append(rest, f.whole...)
			continue
		}
		tp, raw, err := unmarshalTensor(f.value)
		if err != nil {
			return nil, nil, fmt.Errorf("initializer %d: %w", len(inits), err)
		}
		inits = append(inits, tp)
		raws = append(raws, raw)
	}
	gp := &onnxpb.GraphProto{}
	if err := proto.Unmarshal(rest, gp); err != nil {
		return nil, nil, fmt.Errorf("graph: %w", err)
	}
	gp.Initializer = inits
	return gp, raws, nil
}

func unmarshalTensor(b []byte) (*onnxpb.TensorProto, rawField, error) {
	fs, err := scanFields(b, "tensor")
	if err != nil {
		return nil, rawField{}, err
	}
	var rest []byte
	var raw rawField
	for _, f := range fs {
		if f.num == tensorRawDataField && f.typ == protowire.BytesType {
			raw = rawField{data: f.value, present: true} // the last one wins, as in protobuf
			continue
		}
		rest = append(rest, f.whole...)
	}
	tp := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(rest, tp); err != nil {
		return nil, rawField{}, err
	}
	return tp, raw, nil
}

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// pieces is a serialized message held as a list of byte slices, so that
// large tensor data is written straight from where it lives.
type pieces struct {
	parts [][]byte
	size  int64
}

// join is the pieces in one slice.
func (p *pieces) join() []byte {
	b := make([]byte, 0, p.size)
	for _, part := range p.parts {
		b = append(b, part...)
	}
	return b
}

func (p *pieces) add(b []byte) {
	if len(b) > 0 {
		p.parts = append(p.parts, b)
		p.size += int64(len(b))
	}
}

func (p *pieces) addPieces(q *pieces) {
	p.parts = append(p.parts, q.parts...)
	p.size += q.size
}

func (p *pieces) addTag(num protowire.Number, length int64) {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	p.add(protowire.AppendVarint(b, uint64(length)))
}

// insertAt returns the offset in the serialized message b (of msg) where
// field num belongs: before the first larger field, and before the unknown
// fields that protobuf appends at the end.
func insertAt(b []byte, msg proto.Message, num protowire.Number) int {
	limit := len(b) - len(msg.ProtoReflect().GetUnknown())
	for off := 0; off < limit; {
		n, typ, l := protowire.ConsumeTag(b[off:])
		if n > num {
			return off
		}
		off += l + protowire.ConsumeFieldValue(n, typ, b[off+l:])
	}
	return limit
}

// spliceField serializes msg with the field num (length-delimited, absent
// from msg) holding the content of inner at its place in field order.
func spliceField(msg proto.Message, num protowire.Number, inner []*pieces) (*pieces, error) {
	b, err := marshalOpts.Marshal(msg)
	if err != nil {
		return nil, err
	}
	at := insertAt(b, msg, num)
	out := &pieces{}
	out.add(b[:at])
	for _, in := range inner {
		out.addTag(num, in.size)
		out.addPieces(in)
	}
	out.add(b[at:])
	return out, nil
}
