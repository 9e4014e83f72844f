package graph

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/optc-dev/optc/onnxpb"
)

// Graph is a computation graph: nodes in order, inputs, outputs and
// initializers, and the values that connect them. A subgraph (an If branch,
// a Loop or Scan body) is a Graph whose Parent is the enclosing graph; its
// nodes may read values of enclosing graphs.
type Graph struct {
	Name      string
	DocString string
	Nodes     []*Node
	Inputs    []*Value
	Outputs   []*Value
	// Initializers lists the values with constant data (Value.Const), in
	// file order.
	Initializers []*Value
	// SparseInitializers lists the values with sparse data (Value.Sparse).
	SparseInitializers []*Value
	// ValueInfo lists the values with a declared type that are neither
	// inputs nor outputs, in file order.
	ValueInfo []*Value
	// QuantizationAnnotations and Metadata are carried as loaded.
	QuantizationAnnotations []*onnxpb.TensorAnnotation
	Metadata                []*onnxpb.StringStringEntryProto

	Parent *Graph // nil for the main graph
	Owner  *Node  // the node whose attribute holds this graph

	values     map[string]*Value
	nested     map[string]bool                    // main graph only: names defined in subgraphs (see usedBelow)
	subgraphs  []*Graph                           // main graph only: every nested graph; nil until needed
	nextSuffix map[string]int                     // main graph only: UniqueName's counters
	decls      map[declKey]*onnxpb.ValueInfoProto // value declarations as loaded
	origin     *onnxpb.GraphProto
	batch      *batch    // edits whose rewriting of Nodes waits (batch.go); nil outside one
	valueIDs   int       // main graph only: the next Value.ID
	ops        *opCensus // main graph only: the op census (ops.go); nil until needed
}

// declList names the three lists of value declarations in a graph.
type declList uint8

const (
	declInput declList = iota
	declOutput
	declValueInfo
)

type declKey struct {
	list  declList
	value *Value
}

// NewGraph returns an empty main graph.
func NewGraph(name string) *Graph {
	return &Graph{Name: name, values: map[string]*Value{}, decls: map[declKey]*onnxpb.ValueInfoProto{}}
}

// Value returns the value called name visible in g (its own or an enclosing
// graph's), or nil.
func (g *Graph) Value(name string) *Value {
	for s := g; s != nil; s = s.Parent {
		if v, ok := s.values[name]; ok {
			return v
		}
	}
	return nil
}

// Values returns the values g defines, sorted by name.
func (g *Graph) Values() []*Value {
	vs := make([]*Value, 0, len(g.values))
	for _, v := range g.values {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *Value) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return vs
}

// NewValue creates a value called name in g. The name must not be visible
// in g already (ONNX names are single-assignment across nested scopes).
func (g *Graph) NewValue(name string) (*Value, error) {
	if name == "" {
		return nil, fmt.Errorf("graph %q: a value needs a name", g.Name)
	}
	if g.Value(name) != nil || g.usedBelow(name) {
		return nil, fmt.Errorf("graph %q: value name %q is already in use", g.Name, name)
	}
	v := g.makeValue(name)
	g.register(v)
	g.noteName(name, true)
	return v, nil
}

// register puts v, a value of g, in g's scope under its name.
func (g *Graph) register(v *Value) {
	g.values[v.Name] = v
	v.regName = v.Name
}

// makeValue returns a new value of g, with the model's next ID, not yet
// registered.
func (g *Graph) makeValue(name string) *Value {
	r := g.root()
	v := &Value{Name: name, graph: g, id: r.valueIDs}
	r.valueIDs++
	return v
}

// ValueIDs bounds the IDs of the values made in g's model: each is below
// it (see Value.ID).
func (g *Graph) ValueIDs() int { return g.root().valueIDs }

// usedBelow reports whether a subgraph (of any graph of the model)
// defines name. The names are gathered once and kept in step by NewValue,
// Rename and forget, so that creating many values stays linear.
func (g *Graph) usedBelow(name string) bool {
	return g.root().nestedNames()[name]
}

// forgetStructure drops what the main graph caches about its subgraphs;
// called when a node holding subgraphs comes or goes.
func (g *Graph) forgetStructure() {
	r := g.root()
	r.nested, r.subgraphs, r.ops = nil, nil, nil
}

// allSubgraphs returns every graph nested in the main graph, cached.
func (g *Graph) allSubgraphs() []*Graph {
	r := g.root()
	if r.subgraphs == nil {
		r.subgraphs = []*Graph{}
		r.Walk(func(s *Graph) {
			if s != r {
				r.subgraphs = append(r.subgraphs, s)
			}
		})
	}
	return r.subgraphs
}

// IsReturned reports whether the main graph or any subgraph returns v as
// an output (a branch may return an outer value as it is).
func (v *Value) IsReturned() bool {
	if v.graph == nil {
		return false
	}
	if v.graph.root().isOutput(v) {
		return true
	}
	for _, s := range v.graph.allSubgraphs() {
		if s.isOutput(v) {
			return true
		}
	}
	return false
}

func (g *Graph) root() *Graph {
	for g.Parent != nil {
		g = g.Parent
	}
	return g
}

// nestedNames returns the names defined in subgraphs; only a main graph
// holds the set.
func (g *Graph) nestedNames() map[string]bool {
	if g.nested == nil {
		g.nested = map[string]bool{}
		g.Walk(func(s *Graph) {
			if s != g {
				for name := range s.values {
					g.nested[name] = true
				}
			}
		})
	}
	return g.nested
}

// noteName keeps the root's set of subgraph names in step with g.
func (g *Graph) noteName(name string, defined bool) {
	if g.Parent == nil {
		return
	}
	if r := g.root(); r.nested != nil {
		if defined {
			r.nested[name] = true
		} else {
			delete(r.nested, name)
		}
	}
}

// UniqueName returns a value name starting with prefix that is not in use
// in g or the graphs around or inside it. Each prefix continues counting
// where it last stopped, so naming many values stays linear.
func (g *Graph) UniqueName(prefix string) string {
	free := func(name string) bool { return g.Value(name) == nil && !g.usedBelow(name) }
	if free(prefix) {
		return prefix
	}
	r := g.root()
	if r.nextSuffix == nil {
		r.nextSuffix = map[string]int{}
	}
	for i := max(r.nextSuffix[prefix], 1); ; i++ {
		if name := prefix + "_" + strconv.Itoa(i); free(name) {
			r.nextSuffix[prefix] = i
			return name
		}
	}
}

// Rename gives v a new name, keeping its uses (which refer to v, not to
// the name) and its tensor's name in step.
func (g *Graph) Rename(v *Value, name string) error {
	if v.graph == nil {
		return fmt.Errorf("rename %q: value belongs to no graph", v.Name)
	}
	if name == v.Name {
		return nil
	}
	if name == "" || v.graph.Value(name) != nil || v.graph.usedBelow(name) {
		return fmt.Errorf("rename %q to %q: name is empty or already in use", v.Name, name)
	}
	delete(v.graph.values, v.regName)
	v.graph.noteName(v.regName, false)
	v.Name = name
	v.graph.register(v)
	v.graph.noteName(name, true)
	if v.Const != nil {
		v.Const.Name = name
	}
	return nil
}

// AddNode appends a node computing op over inputs into outputs.
func (g *Graph) AddNode(op string, inputs, outputs []*Value) (*Node, error) {
	n := &Node{OpType: op}
	if err := g.attach(n, inputs, outputs); err != nil {
		return nil, err
	}
	g.Nodes = append(g.Nodes, n)
	return n, nil
}

// InsertNodeBefore inserts a new node just before anchor in g's order.
func (g *Graph) InsertNodeBefore(anchor *Node, op string, inputs, outputs []*Value) (*Node, error) {
	i := -1
	if g.batch != nil {
		if anchor.graph == g {
			i = 0 // listed, or inserted earlier in the batch
		}
	} else {
		i = slices.Index(g.Nodes, anchor)
	}
	if i < 0 {
		return nil, fmt.Errorf("insert before %s: node is not in graph %q", anchor, g.Name)
	}
	n := &Node{OpType: op}
	if err := g.attach(n, inputs, outputs); err != nil {
		return nil, err
	}
	if g.batch != nil {
		g.batch.before[anchor] = append(g.batch.before[anchor], n)
		return n, nil
	}
	g.Nodes = slices.Insert(g.Nodes, i, n)
	return n, nil
}

func (g *Graph) attach(n *Node, inputs, outputs []*Value) error {
	for _, v := range outputs {
		if v != nil && v.producer != nil {
			return fmt.Errorf("%s: value %q is already produced by node %s", n.OpType, v.Name, v.producer)
		}
	}
	n.graph = g
	if len(n.Subgraphs()) > 0 {
		g.forgetStructure()
	} else {
		g.countOp(n.OpType, 1)
	}
	for _, v := range inputs {
		n.AddInput(v)
	}
	for i, v := range outputs {
		if err := n.SetOutput(i, v); err != nil {
			return err
		}
	}
	return nil
}

// RemoveNode deletes n from g. Its outputs must have no uses left and must
// not be graph outputs; they are removed from g's scope.
func (g *Graph) RemoveNode(n *Node) error {
	if g.batch != nil {
		return g.RemoveNodes([]*Node{n})
	}
	i := slices.Index(g.Nodes, n)
	if i < 0 {
		return fmt.Errorf("remove %s: node is not in graph %q", n, g.Name)
	}
	for _, v := range n.outputs {
		if v == nil {
			continue
		}
		if uses := v.Uses(); len(uses) > 0 {
			return fmt.Errorf("remove %s: output %q is still used by node %s", n, v.Name, uses[0].Node)
		}
		if g.usedAsOutput(v) {
			return fmt.Errorf("remove %s: output %q is a graph output", n, v.Name)
		}
	}
	n.detachInputs()
	for _, v := range n.outputs {
		if v != nil {
			v.producer = nil
			g.forget(v)
		}
	}
	g.Nodes = slices.Delete(g.Nodes, i, i+1)
	g.countOp(n.OpType, -1)
	n.graph = nil
	return nil
}

// RemoveNodes deletes a set of nodes from g in one sweep (RemoveNode's
// rules apply to each), so that removing many nodes stays linear. Nodes
// of the set may feed each other.
func (g *Graph) RemoveNodes(nodes []*Node) error {
	doomed := make(map[*Node]bool, len(nodes))
	for _, n := range nodes {
		if n.graph != g {
			return fmt.Errorf("remove %s: node is not in graph %q", n, g.Name)
		}
		doomed[n] = true
	}
	// Which values some graph returns: one walk for a single call; in a
	// batch, which calls this once per rewrite, a look at the outputs of
	// the graphs that can see the value (IsReturned) instead.
	returned := (*Value).IsReturned
	if g.batch == nil {
		outputs := map[*Value]bool{}
		g.Walk(func(s *Graph) {
			for _, o := range s.Outputs {
				outputs[o] = true
			}
		})
		returned = func(v *Value) bool { return outputs[v] }
	}
	for _, n := range nodes {
		for _, v := range n.outputs {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				if !doomed[u.Node] {
					return fmt.Errorf("remove %s: output %q is still used by node %s", n, v.Name, u.Node)
				}
			}
			if returned(v) {
				return fmt.Errorf("remove %s: output %q is a graph output", n, v.Name)
			}
		}
	}
	for _, n := range nodes {
		n.detachInputs()
	}
	gone := map[*Value]bool{}
	for _, n := range nodes {
		for _, v := range n.outputs {
			if v != nil {
				v.producer = nil
				gone[v] = true
				g.unregister(v)
			}
		}
		g.countOp(n.OpType, -1)
		n.graph = nil
	}
	if b := g.batch; b != nil {
		b.removed = true
		for v := range gone {
			b.gone[v] = true
		}
		return nil
	}
	g.Nodes = slices.DeleteFunc(g.Nodes, func(n *Node) bool { return doomed[n] })
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *Value) bool { return gone[v] })
	return nil
}

// detachInputs drops n's inputs and those of the nodes in its subgraphs,
// so a removed node leaves no uses behind on the values it read.
func (n *Node) detachInputs() {
	n.TruncateInputs(0)
	if n.graph != nil && len(n.Subgraphs()) > 0 {
		n.graph.forgetStructure()
	}
	for _, sg := range n.Subgraphs() {
		sg.Walk(func(s *Graph) {
			for _, inner := range s.Nodes {
				inner.TruncateInputs(0)
			}
		})
	}
}

// forget drops v from g's scope and declaration lists.
func (g *Graph) forget(v *Value) {
	if v.graph == nil || v.regName == "" {
		return
	}
	v.graph.ValueInfo = slices.DeleteFunc(v.graph.ValueInfo, func(x *Value) bool { return x == v })
	g.unregister(v)
}

// unregister drops v from its graph's scope, leaving the ValueInfo list to
// the caller.
func (g *Graph) unregister(v *Value) {
	owner := v.graph
	if owner == nil || v.regName == "" {
		return
	}
	delete(owner.values, v.regName)
	owner.noteName(v.regName, false)
	v.regName = ""
	if len(owner.decls) > 0 {
		for _, l := range []declList{declInput, declOutput, declValueInfo} {
			delete(owner.decls, declKey{l, v})
		}
	}
}

// ReplaceAllUses makes every reader of old read new instead: node inputs
// in g and its subgraphs, and the outputs of old's graph and of the
// subgraphs that return it. The caller keeps the graph's interface names
// stable where that matters (see Rename).
func (g *Graph) ReplaceAllUses(old, new *Value) {
	if old == new {
		return
	}
	for _, u := range slices.Clone(old.Uses()) {
		u.Node.SetInput(u.Index, new)
	}
	if old.graph == nil {
		return
	}
	old.graph.Walk(func(s *Graph) {
		for i, o := range s.Outputs {
			if o == old {
				s.Outputs[i] = new
			}
		}
	})
}

// usedAsOutput reports whether v is an output of g or of a subgraph nested
// in it (a branch may return an outer value as it is).
func (g *Graph) usedAsOutput(v *Value) bool {
	found := false
	g.Walk(func(s *Graph) { found = found || s.isOutput(v) })
	return found
}

// AddInitializer adds a constant value called t.Name holding t.
func (g *Graph) AddInitializer(t *Tensor) (*Value, error) {
	v, err := g.NewValue(t.Name)
	if err != nil {
		return nil, err
	}
	v.Const = t
	g.Initializers = append(g.Initializers, v)
	return v, nil
}

// RemoveInitializer deletes an unused initializer.
func (g *Graph) RemoveInitializer(v *Value) error {
	if v.Const == nil || v.graph != g || !slices.Contains(g.Initializers, v) {
		return fmt.Errorf("remove initializer %q: not an initializer of graph %q", v.Name, g.Name)
	}
	if len(v.Uses()) > 0 || g.usedAsOutput(v) || g.isInput(v) {
		return fmt.Errorf("remove initializer %q: still used", v.Name)
	}
	g.Initializers = slices.DeleteFunc(g.Initializers, func(x *Value) bool { return x == v })
	g.forget(v)
	return nil
}

// RemoveInitializers deletes a set of unused initializers of g in one
// sweep (RemoveInitializer's rules apply to each), so that removing many
// stays linear. It changes nothing when one of them is refused.
func (g *Graph) RemoveInitializers(vs []*Value) error {
	// doomed holds 1 for each value removed, 2 once it is found among g's
	// initializers: a table of the values removed, not of every
	// initializer (at a million of them each lookup misses the CPU
	// caches); indexed by ID when they are many, so that marking and
	// finding them reads it in about the order they were made.
	size := 0
	if g.Parent == nil && 16*len(vs) > g.ValueIDs() {
		size = g.ValueIDs()
	}
	doomed := NewValueTable[uint8](size)
	for _, v := range vs {
		doomed.Set(v, 1)
	}
	for _, v := range g.Initializers {
		if doomed.Get(v) == 1 {
			doomed.Set(v, 2)
		}
	}
	outputs := map[*Value]bool{}
	g.Walk(func(s *Graph) {
		for _, o := range s.Outputs {
			outputs[o] = true
		}
	})
	inputs := make(map[*Value]bool, len(g.Inputs))
	for _, v := range g.Inputs {
		inputs[v] = true
	}
	for _, v := range vs {
		if v.Const == nil || v.graph != g || doomed.Get(v) != 2 {
			return fmt.Errorf("remove initializer %q: not an initializer of graph %q", v.Name, g.Name)
		}
		if len(v.Uses()) > 0 || outputs[v] || inputs[v] {
			return fmt.Errorf("remove initializer %q: still used", v.Name)
		}
	}
	gone := func(x *Value) bool { return doomed.Get(x) == 2 }
	g.Initializers = slices.DeleteFunc(g.Initializers, gone)
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, gone)
	for _, v := range vs {
		g.unregister(v) // a value listed twice goes once
	}
	return nil
}

func (g *Graph) isInput(v *Value) bool  { return slices.Contains(g.Inputs, v) }
func (g *Graph) isOutput(v *Value) bool { return slices.Contains(g.Outputs, v) }

// IsOutput reports whether v is one of g's outputs.
func (g *Graph) IsOutput(v *Value) bool { return g.isOutput(v) }

// Walk calls fn for g and then every nested subgraph, depth first.
// Nodes removed in a batch that has not ended are skipped (batch.go).
func (g *Graph) Walk(fn func(*Graph)) { g.walk(fn, true) }

// walk is Walk; with trustCensus false it looks at every node for
// subgraphs even where the census knows of none (for checking the census).
func (g *Graph) walk(fn func(*Graph), trustCensus bool) {
	fn(g)
	if trustCensus && g.noSubgraphs() {
		return // the census knows no node holds one: no walk of the nodes
	}
	for _, n := range g.Nodes {
		if n.graph != g {
			continue
		}
		// Subgraphs, without building its slice for every node.
		for _, a := range n.Attrs {
			if a.Graph != nil {
				a.Graph.walk(fn, trustCensus)
			}
			for _, sg := range a.Graphs {
				sg.walk(fn, trustCensus)
			}
		}
	}
}
