package graph

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/optc-dev/optc/onnxpb"
)

// encoder turns the IR back into protobuf. Every message starts as a
// shallow copy of the one it was loaded from, so fields the IR does not
// model (and unknown fields) survive; the fields the IR models are then set
// from it, keeping the loaded presence where the value is unchanged.
type encoder struct {
	side      *sideWriter // where tensors at or above threshold go; nil: inline
	threshold int64
	// keepExternal leaves tensors that still lie in a loaded side file
	// there (referenced, not inlined); externalDir is the folder of those
	// files.
	keepExternal bool
	externalDir  string
}

// shallowClone copies the populated fields of src into a new message; the
// copy shares sub-messages and lists with src.
func shallowClone[M proto.Message](src M, fresh M) M {
	if src.ProtoReflect().IsValid() {
		dst := fresh.ProtoReflect()
		src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			dst.Set(fd, v)
			return true
		})
		dst.SetUnknown(src.ProtoReflect().GetUnknown())
	}
	return fresh
}

// fromOrigin returns the message an IR element was loaded from (an empty
// one for an element made in memory) and the shallow copy of it that the
// element's encoding starts as.
func fromOrigin[T any, M interface {
	*T
	proto.Message
}](origin M) (o, p M) {
	o = origin
	if o == nil {
		o = new(T)
	}
	return o, shallowClone(o, M(new(T)))
}

// model serializes m. The main graph's initializer data is not copied: the
// result refers to it where it lives.
func (e *encoder) model(m *Model) (*pieces, error) {
	o, p := fromOrigin(m.origin)
	p.IrVersion = opt(m.IRVersion, o.IrVersion)
	p.ProducerName = opt(m.ProducerName, o.ProducerName)
	p.ProducerVersion = opt(m.ProducerVersion, o.ProducerVersion)
	p.Domain = opt(m.Domain, o.Domain)
	p.ModelVersion = opt(m.ModelVersion, o.ModelVersion)
	p.DocString = opt(m.DocString, o.DocString)
	p.MetadataProps = m.Metadata
	p.Functions = m.Functions
	p.TrainingInfo = m.TrainingInfo
	p.Configuration = m.Configuration
	p.OpsetImport = nil
	for i, op := range m.Opsets {
		var was *onnxpb.OperatorSetIdProto
		if i < len(m.opsetsAt) {
			was = m.opsetsAt[i]
		} else {
			was = &onnxpb.OperatorSetIdProto{}
		}
		q := shallowClone(was, &onnxpb.OperatorSetIdProto{})
		q.Domain = opt(op.Domain, was.Domain)
		q.Version = opt(op.Version, was.Version)
		p.OpsetImport = append(p.OpsetImport, q)
	}
	p.Graph = nil
	if m.Graph == nil {
		return nil, fmt.Errorf("model has no graph")
	}
	gp, inits, err := e.graph(m.Graph, true)
	if err != nil {
		return nil, err
	}
	gb, err := spliceField(gp, graphInitializerField, inits)
	if err != nil {
		return nil, err
	}
	return spliceField(p, modelGraphField, []*pieces{gb})
}

// graph encodes g. With streamInits the initializers are returned as
// serialized pieces, not put into the message.
func (e *encoder) graph(g *Graph, streamInits bool) (*onnxpb.GraphProto, []*pieces, error) {
	o, p := fromOrigin(g.origin)
	p.Name = opt(g.Name, o.Name)
	p.DocString = opt(g.DocString, o.DocString)
	p.QuantizationAnnotation = g.QuantizationAnnotations
	p.MetadataProps = g.Metadata
	p.Node = make([]*onnxpb.NodeProto, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		np, err := e.node(n)
		if err != nil {
			return nil, nil, err
		}
		p.Node = append(p.Node, np)
	}
	p.Initializer = nil
	var streamed []*pieces
	for _, v := range g.Initializers {
		tp, raw, err := e.tensor(v.Const)
		if err != nil {
			return nil, nil, fmt.Errorf("initializer %q: %w", v.Name, err)
		}
		if !streamInits {
			tp.RawData = raw
			p.Initializer = append(p.Initializer, tp)
			continue
		}
		tpieces := &pieces{}
		if raw == nil {
			b, err := marshalOpts.Marshal(tp)
			if err != nil {
				return nil, nil, err
			}
			tpieces.add(b)
		} else if tpieces, err = spliceRaw(tp, raw); err != nil {
			return nil, nil, err
		}
		streamed = append(streamed, tpieces)
	}
	p.SparseInitializer = nil
	for _, v := range g.SparseInitializers {
		p.SparseInitializer = append(p.SparseInitializer, v.Sparse)
	}
	var err error
	if p.Input, err = e.decls(g, declInput, g.Inputs); err != nil {
		return nil, nil, err
	}
	if p.Output, err = e.decls(g, declOutput, g.Outputs); err != nil {
		return nil, nil, err
	}
	if p.ValueInfo, err = e.decls(g, declValueInfo, g.ValueInfo); err != nil {
		return nil, nil, err
	}
	return p, streamed, nil
}

// spliceRaw serializes a tensor with raw as its raw_data without copying raw.
func spliceRaw(tp *onnxpb.TensorProto, raw []byte) (*pieces, error) {
	data := &pieces{}
	data.add(raw)
	return spliceField(tp, tensorRawDataField, []*pieces{data})
}

func (e *encoder) decls(g *Graph, l declList, vs []*Value) ([]*onnxpb.ValueInfoProto, error) {
	out := make([]*onnxpb.ValueInfoProto, 0, len(vs))
	for _, v := range vs {
		o, p := fromOrigin(g.decls[declKey{l, v}])
		p.Name = opt(v.Name, o.Name)
		if g.decls[declKey{l, v}] != nil && v.typeUnchanged() {
			p.Type = o.Type // as this declaration had it, typed or not
		} else {
			t, err := encodeType(v.Type)
			if err != nil {
				return nil, fmt.Errorf("value %q: %w", v.Name, err)
			}
			p.Type = t
		}
		out = append(out, p)
	}
	return out, nil
}

func (e *encoder) node(n *Node) (*onnxpb.NodeProto, error) {
	o, p := fromOrigin(n.origin)
	p.Name = opt(n.Name, o.Name)
	p.OpType = opt(n.OpType, o.OpType)
	p.Domain = opt(n.Domain, o.Domain)
	p.Overload = opt(n.Overload, o.Overload)
	p.DocString = opt(n.DocString, o.DocString)
	if !sameMetadata(n.Metadata, o.MetadataProps) {
		p.MetadataProps = nil
		for _, kv := range n.Metadata {
			p.MetadataProps = append(p.MetadataProps, &onnxpb.StringStringEntryProto{Key: ptr(kv.Key), Value: ptr(kv.Value)})
		}
	}
	p.Input = valueNames(n.inputs)
	p.Output = valueNames(n.outputs)
	p.Attribute = make([]*onnxpb.AttributeProto, 0, len(n.Attrs))
	for _, a := range n.Attrs {
		ap, err := e.attr(a)
		if err != nil {
			return nil, fmt.Errorf("node %s: attribute %q: %w", n, a.Name, err)
		}
		p.Attribute = append(p.Attribute, ap)
	}
	return p, nil
}

func sameMetadata(kvs []KeyValue, ps []*onnxpb.StringStringEntryProto) bool {
	if len(kvs) != len(ps) {
		return false
	}
	for i, p := range ps {
		if p.GetKey() != kvs[i].Key || p.GetValue() != kvs[i].Value {
			return false
		}
	}
	return true
}

func valueNames(vs []*Value) []string {
	if len(vs) == 0 {
		return nil
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		if v != nil {
			names[i] = v.Name
		}
	}
	return names
}

func (e *encoder) attr(a *Attr) (*onnxpb.AttributeProto, error) {
	o, p := fromOrigin(a.origin)
	p.Name = opt(a.Name, o.Name)
	p.RefAttrName = opt(a.RefAttrName, o.RefAttrName)
	p.DocString = opt(a.DocString, o.DocString)
	if o.Type == nil && a.Type == inferAttrType(o) && a.origin != nil {
		p.Type = nil // an IR version 1 attribute stays without a type field
	} else {
		t := onnxpb.AttributeProto_AttributeType(a.Type)
		p.Type = opt(t, o.Type)
		if p.Type == nil && a.Type != AttrUndefined {
			p.Type = &t
		}
	}
	// The value field of the attribute's kind is always written, even
	// when zero; the others keep what was loaded.
	p.F = opt(a.Float, o.F)
	if a.Type == AttrFloat && p.F == nil {
		p.F = ptr(a.Float)
	}
	p.I = opt(a.Int, o.I)
	if a.Type == AttrInt && p.I == nil {
		p.I = ptr(a.Int)
	}
	p.S = a.String
	if a.Type == AttrString && p.S == nil {
		p.S = []byte{}
	}
	p.Floats, p.Ints, p.Strings = a.Floats, a.Ints, a.Strings
	p.T, p.G, p.Tensors, p.Graphs = nil, nil, nil, nil
	var err error
	if a.Tensor != nil {
		if p.T, err = e.inlineTensor(a.Tensor); err != nil {
			return nil, err
		}
	}
	if p.Tensors, err = encodeEach(a.Tensors, e.inlineTensor); err != nil {
		return nil, err
	}
	if a.Graph != nil {
		if p.G, err = e.subgraph(a.Graph); err != nil {
			return nil, err
		}
	}
	if p.Graphs, err = encodeEach(a.Graphs, e.subgraph); err != nil {
		return nil, err
	}
	return p, nil
}

// encodeEach encodes each of xs with encode; nil for none.
func encodeEach[X, P any](xs []X, encode func(X) (P, error)) ([]P, error) {
	var out []P
	for _, x := range xs {
		p, err := encode(x)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// inlineTensor encodes t with its raw data in the message.
func (e *encoder) inlineTensor(t *Tensor) (*onnxpb.TensorProto, error) {
	tp, raw, err := e.tensor(t)
	if err != nil {
		return nil, err
	}
	tp.RawData = raw
	return tp, nil
}

// subgraph encodes g, an attribute's graph, with its initializers in it.
func (e *encoder) subgraph(g *Graph) (*onnxpb.GraphProto, error) {
	gp, _, err := e.graph(g, false)
	return gp, err
}

// tensor encodes t without its raw data, which is returned separately (nil
// when the tensor has none inline).
func (e *encoder) tensor(t *Tensor) (*onnxpb.TensorProto, []byte, error) {
	o, p := fromOrigin(t.origin)
	p.Name = opt(t.Name, o.Name)
	p.DataType = opt(int32(t.DType), o.DataType)
	if p.DataType == nil {
		p.DataType = ptr(int32(t.DType))
	}
	p.Dims = t.Dims
	p.DocString = opt(t.DocString, o.DocString)
	p.RawData = nil

	if e.side != nil && t.DType != String && t.ByteSize() >= e.threshold {
		data, err := t.Bytes()
		if err != nil {
			return nil, nil, err
		}
		off, err := e.side.write(data)
		if err != nil {
			return nil, nil, err
		}
		clearTyped(p)
		p.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: ptr("location"), Value: ptr(e.side.location)},
			{Key: ptr("offset"), Value: ptr(strconv.FormatInt(off, 10))},
			{Key: ptr("length"), Value: ptr(strconv.Itoa(len(data)))},
		}
		p.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		return p, nil, nil
	}
	if e.keepExternal && t.storage == storageExternal {
		// p keeps the external_data entries it was loaded with.
		if e.externalDir != "" && e.externalDir != t.ext.src.dir {
			return nil, nil, fmt.Errorf("tensor %q: its side file is in %s, others in %s: one folder only", t.Name, t.ext.src.dir, e.externalDir)
		}
		e.externalDir = t.ext.src.dir
		return p, nil, nil
	}
	switch t.storage {
	case storageRaw:
		clearTyped(p)
		raw := t.raw
		if raw == nil {
			raw = []byte{}
		}
		return p, raw, nil
	case storageExternal:
		data, err := t.Bytes()
		if err != nil {
			return nil, nil, err
		}
		clearTyped(p)
		p.ExternalData, p.DataLocation = nil, nil
		if data == nil {
			data = []byte{}
		}
		return p, data, nil
	}
	return p, nil, nil
}

func clearTyped(p *onnxpb.TensorProto) {
	p.FloatData, p.Int32Data, p.Int64Data, p.DoubleData, p.Uint64Data = nil, nil, nil, nil, nil
	if p.GetDataType() != int32(String) {
		p.StringData = nil
	}
}
