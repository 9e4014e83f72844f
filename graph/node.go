package graph

import (
	"fmt"

	"github.com/optc-dev/optc/onnxpb"
)

// AttrType is the kind of an attribute's value; the numbers are ONNX's.
type AttrType int32

// Attribute kinds.
const (
	AttrUndefined     AttrType = 0
	AttrFloat         AttrType = 1
	AttrInt           AttrType = 2
	AttrString        AttrType = 3
	AttrTensor        AttrType = 4
	AttrGraph         AttrType = 5
	AttrFloats        AttrType = 6
	AttrInts          AttrType = 7
	AttrStrings       AttrType = 8
	AttrTensors       AttrType = 9
	AttrGraphs        AttrType = 10
	AttrSparseTensor  AttrType = 11
	AttrSparseTensors AttrType = 12
	AttrTypeProto     AttrType = 13
	AttrTypeProtos    AttrType = 14
)

// Attr is one node attribute. The field matching Type holds the value.
// Sparse-tensor and type-proto attributes keep their protobuf form.
type Attr struct {
	Name string
	Type AttrType

	Float   float32
	Int     int64
	String  []byte
	Tensor  *Tensor
	Graph   *Graph
	Floats  []float32
	Ints    []int64
	Strings [][]byte
	Tensors []*Tensor
	Graphs  []*Graph

	// RefAttrName, inside function bodies, names the caller's attribute
	// this one takes its value from.
	RefAttrName string
	DocString   string

	origin *onnxpb.AttributeProto
}

// Node is one operator call. Its inputs and outputs are read with Inputs
// and Outputs and changed only through methods, so that every value's use
// list stays correct. An omitted optional input or output is nil.
type Node struct {
	// The fields every walk of the graph reads come first, so that they
	// share the node's first cache lines: a pass over a million nodes is
	// bound by the memory it touches, not by its arithmetic.
	graph   *Graph
	OpType  string
	Domain  string // "" is the default ONNX domain (also spelled ai.onnx)
	Attrs   []*Attr
	inputs  []*Value
	outputs []*Value
	// at is the node's place in its graph's Nodes when the graph was last
	// numbered (Graph.number), for the graph's own walks: a slice indexed
	// by it replaces a map keyed by the node, which at a million nodes
	// misses the CPU caches on every lookup. Valid only where indexOf
	// says so.
	at int
	// usePos[i] is where input i's Use sits in the value's use list, so
	// that dropping it costs O(1) (see Value.removeUse).
	usePos []int

	Name      string
	Overload  string
	DocString string
	// Metadata is the node's metadata_props, in order. optc records what a
	// pass did here (e.g. which activation a Conv absorbed).
	Metadata []KeyValue

	origin *onnxpb.NodeProto // metadata, device configurations, unknown fields
}

// KeyValue is one metadata entry.
type KeyValue struct{ Key, Value string }

// Meta returns the value of metadata key k, or "".
func (n *Node) Meta(k string) string {
	for _, kv := range n.Metadata {
		if kv.Key == k {
			return kv.Value
		}
	}
	return ""
}

// SetMeta sets metadata key k.
func (n *Node) SetMeta(k, v string) {
	for i, kv := range n.Metadata {
		if kv.Key == k {
			n.Metadata[i].Value = v
			return
		}
	}
	n.Metadata = append(n.Metadata, KeyValue{k, v})
}

// Graph returns the graph the node belongs to.
func (n *Node) Graph() *Graph { return n.graph }

// Inputs returns the node's inputs (nil for an omitted optional input).
// The slice must not be modified.
func (n *Node) Inputs() []*Value { return n.inputs }

// Outputs returns the node's outputs (nil for an omitted optional output).
// The slice must not be modified.
func (n *Node) Outputs() []*Value { return n.outputs }

// Input returns input i, or nil when it is omitted or out of range.
func (n *Node) Input(i int) *Value {
	if i < 0 || i >= len(n.inputs) {
		return nil
	}
	return n.inputs[i]
}

// Output returns output i, or nil when it is omitted or out of range.
func (n *Node) Output(i int) *Value {
	if i < 0 || i >= len(n.outputs) {
		return nil
	}
	return n.outputs[i]
}

// SetInput makes input i read v (nil omits it), growing the input list as
// needed.
func (n *Node) SetInput(i int, v *Value) {
	for len(n.inputs) <= i {
		n.inputs = append(n.inputs, nil)
		n.usePos = append(n.usePos, 0)
	}
	if old := n.inputs[i]; old != nil {
		old.removeUse(n, i)
	}
	n.inputs[i] = v
	if v != nil {
		n.usePos[i] = len(v.uses)
		v.uses = append(v.uses, Use{Node: n, Index: i})
	}
}

// AddInput appends an input.
func (n *Node) AddInput(v *Value) { n.SetInput(len(n.inputs), v) }

// TruncateInputs drops the inputs from index k on.
func (n *Node) TruncateInputs(k int) {
	for i := len(n.inputs) - 1; i >= k; i-- {
		n.SetInput(i, nil)
	}
	if k < len(n.inputs) {
		n.inputs, n.usePos = n.inputs[:k], n.usePos[:k]
	}
}

// SetOutput makes the node produce v as output i. v must not already have
// another producer.
func (n *Node) SetOutput(i int, v *Value) error {
	if v != nil && v.producer != nil && v.producer != n {
		return fmt.Errorf("value %q is already produced by node %s", v.Name, v.producer)
	}
	for len(n.outputs) <= i {
		n.outputs = append(n.outputs, nil)
	}
	if old := n.outputs[i]; old != nil && old != v {
		old.producer = nil
	}
	n.outputs[i] = v
	if v != nil {
		v.producer = n
	}
	return nil
}

// Attr returns the attribute called name, or nil.
func (n *Node) Attr(name string) *Attr {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// AttrInt returns an integer attribute, or def when it is absent.
func (n *Node) AttrInt(name string, def int64) int64 {
	if a := n.Attr(name); a != nil && a.Type == AttrInt {
		return a.Int
	}
	return def
}

// AttrFloat returns a float attribute, or def when it is absent.
func (n *Node) AttrFloat(name string, def float32) float32 {
	if a := n.Attr(name); a != nil && a.Type == AttrFloat {
		return a.Float
	}
	return def
}

// AttrInts returns an integer-list attribute, or nil when it is absent.
func (n *Node) AttrInts(name string) []int64 {
	if a := n.Attr(name); a != nil && a.Type == AttrInts {
		return a.Ints
	}
	return nil
}

// AttrString returns a string attribute, or def when it is absent.
func (n *Node) AttrString(name string, def string) string {
	if a := n.Attr(name); a != nil && a.Type == AttrString {
		return string(a.String)
	}
	return def
}

// SetAttr adds or replaces an attribute.
func (n *Node) SetAttr(a *Attr) {
	if n.graph != nil && (a.Graph != nil || len(a.Graphs) > 0) {
		n.graph.forgetStructure() // the new subgraph's names
	}
	for i, old := range n.Attrs {
		if old.Name == a.Name {
			if n.graph != nil && (old.Graph != nil || len(old.Graphs) > 0) {
				n.graph.forgetStructure() // the old subgraph's
			}
			n.Attrs[i] = a
			return
		}
	}
	n.Attrs = append(n.Attrs, a)
}

// Subgraphs returns the graphs held in the node's attributes (If, Loop,
// Scan bodies), in attribute order.
func (n *Node) Subgraphs() []*Graph {
	var gs []*Graph
	for _, a := range n.Attrs {
		if a.Graph != nil {
			gs = append(gs, a.Graph)
		}
		gs = append(gs, a.Graphs...)
	}
	return gs
}

// String names the node for messages: its name and op, e.g. `"conv1" (Conv)`.
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	op := n.OpType
	if n.Domain != "" {
		op = n.Domain + "." + op
	}
	if n.Name == "" {
		return fmt.Sprintf("<unnamed> (%s)", op)
	}
	return fmt.Sprintf("%q (%s)", n.Name, op)
}
