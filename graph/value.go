package graph

import "github.com/optc-dev/optc/onnxpb"

// Value is a named edge of the graph: a graph input, an initializer, a node
// output, or (seen from a subgraph) a value of an enclosing graph. Each value
// has at most one producer; its uses are kept in step by the mutation API.
type Value struct {
	Name string
	// Type is the declared type (graph input/output or value_info), nil
	// when undeclared. For initializers see Const.
	Type *Type
	// Const is the initializer's data, nil for other values.
	Const *Tensor
	// Sparse is a sparse initializer, kept in its protobuf form.
	Sparse *onnxpb.SparseTensorProto

	producer *Node
	uses     []Use // with holes (zero Uses) left by removeUse; see Uses
	holes    int
	graph    *Graph // the graph whose scope defines the value
	// regName is the name the value is registered under in its graph's
	// scope, "" when it is not (removed): unregistering needs no lookup
	// of the name first, and Verify sees a name changed behind the
	// graph's back without reading the scope's map.
	regName string
	// loadedType is Type as loaded; while Type is still it and unchanged,
	// each declaration is written back with the type it had in the file.
	loadedType *Type
	id         int // see ID
}

// ID is a number given to v when it was made, counted per model from 0
// in the order values are made (mostly graph order), so that an analysis
// can keep what it knows of each value in a slice indexed by it
// (ValueTable) instead of a map: at a million values every map lookup
// misses the CPU caches. Two values of one model share an ID only when a
// graph made apart (NewGraph) was attached to it later; ValueTable checks
// the value a slot holds, so it stays exact.
func (v *Value) ID() int { return v.id }

// typeUnchanged reports whether v's type is the one it was loaded with.
func (v *Value) typeUnchanged() bool {
	t := v.Type
	if t != v.loadedType {
		return false
	}
	return t == nil || t.origin == nil || t.equal(decodeType(t.origin))
}

// Use is one place a value is read: input Index of Node.
type Use struct {
	Node  *Node
	Index int
}

// Producer returns the node that computes v, or nil for graph inputs,
// initializers and values that nothing defines.
func (v *Value) Producer() *Node { return v.producer }

// Uses returns the node inputs that read v, in no particular order. The
// slice must not be modified.
func (v *Value) Uses() []Use {
	if v.holes > 0 {
		v.squeeze()
	}
	return v.uses
}

// Graph returns the graph that defines v.
func (v *Value) Graph() *Graph { return v.graph }

// IsConstant reports whether v's content is known before the model runs:
// an initializer that is not also a graph input (which callers may
// override), or the output of a Constant node.
func (v *Value) IsConstant() bool {
	return v.ConstantTensor() != nil
}

// ConstantTensor returns v's content when it is constant (see IsConstant),
// else nil. Constant nodes count: PaddleOCR models, for example, keep every
// weight in one.
func (v *Value) ConstantTensor() *Tensor {
	if v.Const != nil {
		if v.graph != nil && v.graph.isInput(v) {
			return nil
		}
		return v.Const
	}
	if n := v.producer; n != nil && n.OpType == "Constant" && n.Domain == "" && len(n.outputs) == 1 {
		if a := n.Attr("value"); a != nil && a.Type == AttrTensor {
			return a.Tensor
		}
	}
	return nil
}

// removeUse drops input index of n from v's uses. A value read by many
// nodes (a shared initializer) loses its uses one by one as a pass
// rewrites its readers, in any order: the slot (found through n.usePos)
// becomes a hole, and the holes are squeezed out, keeping the order of
// the uses, when they are half the list or when Uses is called. Each
// removal thus costs O(1) amortized instead of the list's length.
func (v *Value) removeUse(n *Node, index int) {
	u := Use{Node: n, Index: index}
	i := -1
	if index < len(n.usePos) {
		if p := n.usePos[index]; p < len(v.uses) && v.uses[p] == u {
			i = p
		}
	}
	if i < 0 { // not where it was noted: search (never expected)
		for p, x := range v.uses {
			if x == u {
				i = p
				break
			}
		}
		if i < 0 {
			return
		}
	}
	v.uses[i] = Use{}
	v.holes++
	if 2*v.holes >= len(v.uses) {
		v.squeeze()
	}
}

// squeeze removes the holes from v's use list, keeping its order, and
// notes each use's new place on its node.
func (v *Value) squeeze() {
	j := 0
	for _, u := range v.uses {
		if u.Node == nil {
			continue
		}
		v.uses[j] = u
		u.Node.usePos[u.Index] = j
		j++
	}
	clear(v.uses[j:])
	v.uses = v.uses[:j]
	v.holes = 0
}
