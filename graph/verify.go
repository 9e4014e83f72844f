package graph

import (
	"fmt"
	"slices"
	"strings"
)

// VerifyError lists everything Verify found wrong, one problem a line.
type VerifyError struct {
	Problems []string
}

func (e *VerifyError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems: %s", len(e.Problems), strings.Join(e.Problems, "; "))
}

// Verify checks the model's invariants: every value read is defined,
// each name has one definition, use lists match node inputs, the graph has
// no cycles and its nodes are in topological order, every node's domain is
// imported, and declared types agree with initializer data. Each problem
// names the node or value. Passes are checked with it after every run.
func (m *Model) Verify() error {
	if m.Graph == nil {
		return &VerifyError{Problems: []string{"model has no graph"}}
	}
	v := &verifier{model: m, reads: NewValueTable[int32](m.Graph.ValueIDs())}
	imported := map[string]bool{}
	for _, o := range m.Opsets {
		imported[canonicalDomain(o.Domain)] = true
	}
	for _, f := range m.Functions {
		imported[canonicalDomain(f.GetDomain())] = true
	}
	v.imported = imported
	if len(m.Opsets) == 0 && m.IRVersion >= 3 {
		v.problem("the model imports no operator set")
	}
	v.graph(m.Graph)
	v.census(m.Graph)
	if len(v.problems) > 0 {
		return &VerifyError{Problems: v.problems}
	}
	return nil
}

// census checks the op census (ops.go), when the model keeps one, against
// its nodes: an op type written without SetOpType would hide its nodes
// from the passes that look for them.
func (v *verifier) census(g *Graph) {
	if g.ops == nil {
		return
	}
	counted := countOps(g)
	ops := make([]string, 0, len(counted.ops))
	for op := range counted.ops {
		ops = append(ops, op)
	}
	for op := range g.ops.ops {
		if _, ok := counted.ops[op]; !ok {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	for _, op := range ops {
		if counted.ops[op] != g.ops.ops[op] {
			v.problem("the op census counts %d %s nodes, the graphs have %d (an op type changed without Node.SetOpType)", g.ops.ops[op], op, counted.ops[op])
		}
	}
	if counted.holders != g.ops.holders {
		v.problem("the op census counts %d nodes holding subgraphs, the graphs have %d (a graph attribute set without Node.SetAttr)", g.ops.holders, counted.holders)
	}
}

// moreProblems ends a list of problems cut at 50.
const moreProblems = "(further problems not listed)"

type verifier struct {
	model    *Model
	imported map[string]bool
	problems []string
	reads    *ValueTable[int32] // per value: the node inputs its use list names
}

// listsUse reports whether x's use list names input i of n: at the place
// n keeps for it, or (were that place wrong) anywhere.
func listsUse(x *Value, n *Node, i int) bool {
	u := Use{Node: n, Index: i}
	if i < len(n.usePos) {
		if p := n.usePos[i]; p >= 0 && p < len(x.uses) && x.uses[p] == u {
			return true
		}
	}
	return slices.Contains(x.uses, u)
}

func (v *verifier) problem(format string, args ...any) {
	if len(v.problems) < 50 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	} else if len(v.problems) == 50 {
		v.problems = append(v.problems, moreProblems)
	}
}

func (v *verifier) graph(g *Graph) {
	where := ""
	if g.Parent != nil {
		where = fmt.Sprintf(" (in subgraph %q of node %s)", g.Name, g.Owner)
	}
	for _, n := range g.Nodes {
		v.node(g, n, where)
	}
	v.values(g, where)
	for i, out := range g.Outputs {
		if g.Value(out.Name) != out || !isDefined(out) {
			v.problem("graph output %d %q%s is not defined", i, out.Name, where)
		}
	}
	for _, x := range g.Initializers {
		v.checkConst(x, where)
	}
	v.order(g, where)
}

// isDefined: something defines x (a node, an initializer or a graph
// input).
func isDefined(x *Value) bool {
	return x.producer != nil || x.Const != nil || x.Sparse != nil || x.graph.isInput(x)
}

// registeredIn: x is in g's scope. That is on the value (regName): no
// lookup of a name per edge and no walk of the scope's map, whose order
// is random (at a million values a cache miss each).
func registeredIn(x *Value, g *Graph) bool { return x.graph == g && x.regName != "" }

// node checks one node of g: its graph, domain and attributes, its
// inputs' scope and use lists, its outputs' producer and registration,
// and its subgraphs.
func (v *verifier) node(g *Graph, n *Node, where string) {
	if n.graph != g {
		v.problem("node %s%s: is listed in a graph it does not belong to", n, where)
	}
	if !v.imported[canonicalDomain(n.Domain)] {
		v.problem("node %s%s: domain %q is not imported by the model", n, where, n.Domain)
	}
	if canonicalDomain(n.Domain) == "" {
		for _, name := range requiredAttrs[n.OpType] {
			if n.Attr(name) == nil {
				v.problem("node %s%s: %s needs attribute %q", n, where, n.OpType, name)
			}
		}
	}
	for i, in := range n.inputs {
		if in == nil {
			continue
		}
		if listsUse(in, n, i) {
			v.reads.Set(in, v.reads.Get(in)+1)
		} else {
			v.problem("node %s%s: input %d %q is missing from the value's use list", n, where, i, in.Name)
		}
		if in.graph == g && !registeredIn(in, g) || in.graph != g && g.Value(in.Name) != in {
			v.problem("node %s%s: input %d %q is not the value of that name in scope", n, where, i, in.Name)
		} else if !isDefined(in) {
			v.problem("node %s%s: input %d %q is not defined by any node, input or initializer", n, where, i, in.Name)
		}
	}
	for i, out := range n.outputs {
		if out == nil {
			continue
		}
		// No map of every output by name: a value has one producer,
		// and two values of one name cannot both be registered, so
		// the producer and registration checks find a name produced
		// twice (at a million nodes the map was a tenth of Verify).
		if p := out.producer; p != n {
			if p != nil && slices.Contains(p.outputs, out) {
				v.problem("value %q%s is produced by two nodes: %s and %s", out.Name, where, p, n)
			} else {
				v.problem("node %s%s: output %d %q names another producer (%s)", n, where, i, out.Name, p)
			}
		}
		if !registeredIn(out, g) {
			v.problem("node %s%s: output %d %q is not registered in its graph", n, where, i, out.Name)
		}
		if out.Const != nil || g.isInput(out) {
			v.problem("value %q%s is both produced by node %s and an initializer or graph input", out.Name, where, n)
		}
	}
	for _, sg := range n.Subgraphs() {
		if sg.Parent != g || sg.Owner != n {
			v.problem("node %s%s: subgraph %q has the wrong parent", n, where, sg.Name)
		}
		v.graph(sg)
	}
}

// values checks the values g defines, after the nodes (their problems are
// listed after the nodes', as they always were): each under its own name,
// and a use list naming more inputs than were counted reading it (the
// subgraphs' nodes are counted by now) names one that reads something
// else.
func (v *verifier) values(g *Graph, where string) {
	var valueProblems []string
	checkValue := func(x *Value) {
		if !registeredIn(x, g) {
			return
		}
		if x.Name != x.regName {
			valueProblems = append(valueProblems, fmt.Sprintf("value %q%s: registered under the name %q", x.Name, where, x.regName))
		}
		if int(v.reads.Get(x)) == len(x.uses)-x.holes {
			return
		}
		for _, u := range x.Uses() {
			if u.Node.Input(u.Index) != x {
				valueProblems = append(valueProblems, fmt.Sprintf("value %q%s: its use list names input %d of node %s, which reads something else", x.Name, where, u.Index, u.Node))
			}
		}
	}
	for _, n := range g.Nodes {
		if n.graph != g {
			continue
		}
		for _, out := range n.outputs {
			if out != nil && out.producer == n {
				checkValue(out)
			}
		}
	}
	inputs := make(map[*Value]bool, len(g.Inputs))
	for _, x := range g.Inputs {
		if !inputs[x] {
			inputs[x] = true
			checkValue(x)
		}
	}
	for _, x := range g.Initializers {
		if !inputs[x] {
			checkValue(x)
		}
	}
	for _, p := range valueProblems {
		if len(v.problems) > 50 {
			break
		}
		v.problems = append(v.problems, p)
	}
	if len(v.problems) > 51 || len(v.problems) == 51 && v.problems[50] != moreProblems {
		v.problems = append(v.problems[:50], moreProblems)
	}
}

// requiredAttrs are the attributes of ai.onnx operators that every opset
// since the first requires (ONNX's operator schemas): a node without one
// cannot run, and a pass must not be left to guess a default.
var requiredAttrs = map[string][]string{
	"AveragePool":   {"kernel_shape"},
	"Cast":          {"to"},
	"DepthToSpace":  {"blocksize"},
	"Einsum":        {"equation"},
	"If":            {"then_branch", "else_branch"},
	"LRN":           {"size"},
	"Loop":          {"body"},
	"LpPool":        {"kernel_shape"},
	"MaxPool":       {"kernel_shape"},
	"MaxRoiPool":    {"pooled_shape"},
	"RandomNormal":  {"shape"},
	"RandomUniform": {"shape"},
	"Scan":          {"body", "num_scan_inputs"},
	"SpaceToDepth":  {"blocksize"},
}

// checkConst compares an initializer's data with its declared type.
func (v *verifier) checkConst(x *Value, where string) {
	t := x.Const
	if t == nil {
		v.problem("initializer %q%s has no data", x.Name, where)
		return
	}
	if _, err := t.NumElements(); err != nil {
		v.problem("initializer %q%s: %v", x.Name, where, err)
		return
	}
	if t.storage == storageRaw && t.DType != String {
		if want, ok := t.DType.ByteSize(mustElements(t)); !ok {
			v.problem("initializer %q%s: %s%v is too large to hold in memory", x.Name, where, t.DType, t.Dims)
		} else if int64(len(t.raw)) != want {
			v.problem("initializer %q%s: %d bytes of data, but %s%v needs %d", x.Name, where, len(t.raw), t.DType, t.Dims, want)
		}
	}
	if ty := x.Type; ty != nil && ty.Kind == KindTensor {
		if ty.Elem != t.DType {
			v.problem("initializer %q%s: declared %s, but its data is %s", x.Name, where, ty.Elem, t.DType)
		}
		if ty.Shape != nil && !shapeAdmits(ty.Shape, t.Dims) {
			v.problem("initializer %q%s: declared shape %s, but its data has shape %v", x.Name, where, ty.Shape, t.Dims)
		}
	}
}

func mustElements(t *Tensor) int64 {
	n, _ := t.NumElements()
	return n
}

// shapeAdmits reports whether dims fits a declared shape.
func shapeAdmits(s Shape, dims []int64) bool {
	if len(s) != len(dims) {
		return false
	}
	for i, d := range s {
		if d.Kind == DimStatic && d.Value != dims[i] {
			return false
		}
	}
	return true
}

// order checks for cycles and that every node comes after the producers of
// its inputs (including values its subgraphs read from this graph).
func (v *verifier) order(g *Graph, where string) {
	if cyc := findCycle(g); cyc != nil { // numbers the nodes (Node.at)
		names := make([]string, len(cyc))
		for i, n := range cyc {
			names[i] = n.String()
		}
		v.problem("graph %q%s has a cycle: %s", g.Name, where, strings.Join(names, " -> "))
		return
	}
	for i, n := range g.Nodes {
		for _, in := range dependencies(g, n) {
			if p := in.producer; p != nil && p.graph == g && g.indexOf(p) > i {
				v.problem("node %s%s reads %q before node %s produces it: nodes are not in topological order", n, where, in.Name, p)
				return
			}
		}
	}
}
