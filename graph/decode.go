package graph

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/optc-dev/optc/onnxpb"
)

// decodeModel builds the IR from a parsed ModelProto. raws holds the
// main graph's initializer data when it was kept out of the messages.
func decodeModel(mp *onnxpb.ModelProto, raws []rawField, src *externalSource) (*Model, error) {
	if mp.Graph == nil {
		return nil, errors.New("not an ONNX model: it has no graph")
	}
	m := &Model{
		IRVersion:       mp.GetIrVersion(),
		ProducerName:    mp.GetProducerName(),
		ProducerVersion: mp.GetProducerVersion(),
		Domain:          mp.GetDomain(),
		ModelVersion:    mp.GetModelVersion(),
		DocString:       mp.GetDocString(),
		Metadata:        mp.MetadataProps,
		Functions:       mp.Functions,
		TrainingInfo:    mp.TrainingInfo,
		Configuration:   mp.Configuration,
		origin:          mp,
		opsetsAt:        mp.OpsetImport,
		ext:             src,
	}
	for _, o := range mp.OpsetImport {
		m.Opsets = append(m.Opsets, OpsetImport{Domain: o.GetDomain(), Version: o.GetVersion()})
	}
	g, err := decodeGraph(mp.Graph, nil, nil, raws, src)
	if err != nil {
		return nil, err
	}
	m.Graph = g
	return m, nil
}

func decodeGraph(gp *onnxpb.GraphProto, parent *Graph, owner *Node, raws []rawField, src *externalSource) (*Graph, error) {
	g := &Graph{
		Name:                    gp.GetName(),
		DocString:               gp.GetDocString(),
		QuantizationAnnotations: gp.QuantizationAnnotation,
		Metadata:                gp.MetadataProps,
		Parent:                  parent,
		Owner:                   owner,
		values:                  map[string]*Value{},
		decls:                   map[declKey]*onnxpb.ValueInfoProto{},
		origin:                  gp,
	}
	where := "graph " + strconv.Quote(g.Name)
	if err := g.decodeValues(gp, raws, src, where); err != nil {
		return nil, err
	}
	nodes, err := g.decodeNodes(gp, src, where)
	if err != nil {
		return nil, err
	}
	g.Nodes = nodes
	for _, vi := range gp.Output {
		v := g.resolve(vi.GetName())
		g.Outputs = append(g.Outputs, v)
		g.declare(declOutput, v, vi)
	}
	for _, vi := range gp.ValueInfo {
		v := g.resolve(vi.GetName())
		g.ValueInfo = append(g.ValueInfo, v)
		g.declare(declValueInfo, v, vi)
	}
	return g, nil
}

// define registers a new value of g named name (what says what defines
// it, for the errors); a name empty or defined twice is an error.
func (g *Graph) define(where, name, what string) (*Value, error) {
	if name == "" {
		return nil, fmt.Errorf("%s: %s has an empty name", where, what)
	}
	if _, dup := g.values[name]; dup {
		return nil, fmt.Errorf("%s: %s %q: the name is defined twice", where, what, name)
	}
	v := g.makeValue(name)
	g.register(v)
	return v, nil
}

// resolve finds a value in scope; a name nothing defines becomes a value
// with no producer, which Verify reports.
func (g *Graph) resolve(name string) *Value {
	if v := g.Value(name); v != nil {
		return v
	}
	v := g.makeValue(name)
	g.register(v)
	return v
}

// decodeValues defines g's initializers, sparse initializers and inputs.
func (g *Graph) decodeValues(gp *onnxpb.GraphProto, raws []rawField, src *externalSource, where string) error {
	for i, tp := range gp.Initializer {
		raw := rawField{data: tp.RawData, present: tp.RawData != nil}
		if raws != nil {
			raw = raws[i]
		}
		t, err := decodeTensor(tp, raw, src)
		if err != nil {
			return fmt.Errorf("%s: initializer %q: %w", where, tp.GetName(), err)
		}
		v, err := g.define(where, t.Name, "initializer")
		if err != nil {
			return err
		}
		v.Const = t
		g.Initializers = append(g.Initializers, v)
	}
	for _, sp := range gp.SparseInitializer {
		v, err := g.define(where, sp.GetValues().GetName(), "sparse initializer")
		if err != nil {
			return err
		}
		v.Sparse = sp
		g.SparseInitializers = append(g.SparseInitializers, v)
	}
	for _, vi := range gp.Input {
		v := g.values[vi.GetName()]
		if v == nil || (v.Const == nil && v.Sparse == nil) || g.isInput(v) {
			var err error
			if v, err = g.define(where, vi.GetName(), "graph input"); err != nil {
				return err
			}
		}
		g.Inputs = append(g.Inputs, v)
		g.declare(declInput, v, vi)
	}
	return nil
}

// decodeNodes makes g's nodes: their outputs first, then their inputs and
// subgraphs, so that they can refer to any value of this graph whatever
// the node order.
func (g *Graph) decodeNodes(gp *onnxpb.GraphProto, src *externalSource, where string) ([]*Node, error) {
	nodes := make([]*Node, len(gp.Node))
	for i, np := range gp.Node {
		n := &Node{
			Name: np.GetName(), OpType: np.GetOpType(), Domain: np.GetDomain(),
			Overload: np.GetOverload(), DocString: np.GetDocString(),
			graph: g, origin: np,
		}
		for _, kv := range np.MetadataProps {
			n.Metadata = append(n.Metadata, KeyValue{kv.GetKey(), kv.GetValue()})
		}
		for j, name := range np.Output {
			if name == "" {
				n.outputs = append(n.outputs, nil)
				continue
			}
			v, err := g.define(where, name, fmt.Sprintf("output %d of node %s", j, n))
			if err != nil {
				return nil, err
			}
			n.outputs = append(n.outputs, v)
			v.producer = n
		}
		nodes[i] = n
	}
	for i, np := range gp.Node {
		n := nodes[i]
		for _, name := range np.Input {
			if name == "" {
				n.AddInput(nil)
			} else {
				n.AddInput(g.resolve(name))
			}
		}
		for _, ap := range np.Attribute {
			a, err := decodeAttr(ap, n, src)
			if err != nil {
				return nil, fmt.Errorf("%s: node %s: attribute %q: %w", where, n, ap.GetName(), err)
			}
			n.Attrs = append(n.Attrs, a)
		}
	}
	return nodes, nil
}

// declare records a value declaration; the first declaration with a type
// gives the value its type.
func (g *Graph) declare(l declList, v *Value, vi *onnxpb.ValueInfoProto) {
	g.decls[declKey{l, v}] = vi
	if v.Type == nil {
		v.Type = decodeType(vi.Type)
		v.loadedType = v.Type
	}
}

func decodeAttr(ap *onnxpb.AttributeProto, n *Node, src *externalSource) (*Attr, error) {
	a := &Attr{
		Name: ap.GetName(), Type: AttrType(ap.GetType()),
		Float: ap.GetF(), Int: ap.GetI(), String: ap.S,
		Floats: ap.Floats, Ints: ap.Ints, Strings: ap.Strings,
		RefAttrName: ap.GetRefAttrName(), DocString: ap.GetDocString(),
		origin: ap,
	}
	if ap.Type == nil {
		a.Type = inferAttrType(ap)
	}
	var err error
	if ap.T != nil {
		if a.Tensor, err = decodeTensor(ap.T, rawField{data: ap.T.RawData, present: ap.T.RawData != nil}, src); err != nil {
			return nil, err
		}
	}
	for _, tp := range ap.Tensors {
		t, err := decodeTensor(tp, rawField{data: tp.RawData, present: tp.RawData != nil}, src)
		if err != nil {
			return nil, err
		}
		a.Tensors = append(a.Tensors, t)
	}
	if ap.G != nil {
		if a.Graph, err = decodeGraph(ap.G, n.graph, n, nil, src); err != nil {
			return nil, err
		}
	}
	for _, gp := range ap.Graphs {
		sg, err := decodeGraph(gp, n.graph, n, nil, src)
		if err != nil {
			return nil, err
		}
		a.Graphs = append(a.Graphs, sg)
	}
	return a, nil
}

// inferAttrType reads the kind of an attribute from IR version 1 files,
// which have no type field, by which value field is set.
func inferAttrType(ap *onnxpb.AttributeProto) AttrType {
	switch {
	case ap.F != nil:
		return AttrFloat
	case ap.I != nil:
		return AttrInt
	case ap.S != nil:
		return AttrString
	case ap.T != nil:
		return AttrTensor
	case ap.G != nil:
		return AttrGraph
	case len(ap.Floats) > 0:
		return AttrFloats
	case len(ap.Ints) > 0:
		return AttrInts
	case len(ap.Strings) > 0:
		return AttrStrings
	case len(ap.Tensors) > 0:
		return AttrTensors
	case len(ap.Graphs) > 0:
		return AttrGraphs
	}
	return AttrUndefined
}

func decodeTensor(tp *onnxpb.TensorProto, raw rawField, src *externalSource) (*Tensor, error) {
	t := &Tensor{
		Name: tp.GetName(), DType: DataType(tp.GetDataType()), Dims: tp.Dims,
		DocString: tp.GetDocString(), origin: tp,
	}
	tp.RawData = nil // the Tensor holds it from here on
	switch {
	case tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL:
		ext, err := decodeExternal(t, tp.ExternalData, src)
		if err != nil {
			return nil, err
		}
		t.storage, t.ext = storageExternal, ext
	case raw.present:
		t.storage, t.raw = storageRaw, raw.data
		if t.raw == nil {
			t.raw = []byte{}
		}
	default:
		t.storage = storageTyped
	}
	return t, nil
}
