// Package shapes infers the element type and shape of every value of a
// model from its inputs, initializers and operator attributes, the way an
// ONNX runtime does before it runs a graph.
//
// Inference never guesses. A dimension it cannot compute stays unknown
// (graph.DimUnknown), a rank it cannot compute leaves the shape nil, and a
// symbolic dimension of an input (N in [N,3,224,224]) is carried through
// the ops that keep it (Conv, Relu, Concat, Reshape's 0, ...). Constant
// inputs decide shapes where the operator reads them (a Reshape target,
// Slice bounds, Resize scales); besides constants, the values of small
// integer tensors computed from shapes (Shape -> Gather -> Concat ->
// Reshape) are followed, symbols included.
//
// Declared types (graph inputs and outputs, value_info) are merged in: an
// inferred dimension fills an unknown declared one, and a declaration that
// contradicts the inference is kept and reported as a Conflict.
//
// Operators without a rule (other domains than the default one and
// com.microsoft's fused Conv and Gemm, Loop and Scan results, rare ops)
// give unknown outputs, or their declared types. If branches are inferred
// and their outputs joined; Loop and Scan bodies are inferred from what
// their inputs declare.
//
// The model is assumed valid: where broadcasting or Concat make two dims
// equal, a number wins over a symbol. Two assumptions go beyond what the
// file says: a symbol standing for a dim is not 0 (so a Reshape target
// element holding it is not "copy this dim"), and a Slice ending at 2^31-1
// or later takes a symbolic dim to its end.
package shapes

import (
	"errors"
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// Result is what Infer found.
type Result struct {
	// Types is the best known type of every value of the model: its
	// declaration merged with what inference derived. A value missing from
	// the map, or mapped to nil, is unknown. The types may be shared
	// between values and with the model: clone one before changing it.
	Types *graph.ValueTable[*graph.Type]
	// Inferred is what the operator rules derived for node outputs, before
	// any declaration was merged in (absent where no rule applies).
	Inferred *graph.ValueTable[*graph.Type]
	// Conflicts lists declarations that contradict the inference, and
	// nodes whose inputs cannot go together (broadcasting 3 with 4).
	Conflicts []Conflict
	Counts    Counts
}

// Counts summarise Types over the node outputs of all graphs (graph
// inputs and initializers are given, not inferred).
type Counts struct {
	Values int `json:"values"`
	// Static values have a known element type and a fully static shape.
	Static int `json:"static"`
	// Partial values have something known: element type, rank, some dims.
	Partial int `json:"partial"`
	Unknown int `json:"unknown"`
}

// Conflict is a disagreement between a declaration and the inference, or
// a node whose input types contradict each other.
type Conflict struct {
	Node     *graph.Node  // the producer, or the node whose inputs disagree
	Value    *graph.Value // nil for a node-level problem
	Declared *graph.Type
	Inferred *graph.Type
	Reason   string
}

func (c Conflict) String() string {
	if c.Value == nil {
		return fmt.Sprintf("node %s: %s", c.Node, c.Reason)
	}
	return fmt.Sprintf("value %q: declared %s, inferred %s (%s)", c.Value.Name, c.Declared, c.Inferred, c.Reason)
}

// maxValues is the most elements of an integer tensor whose values are
// followed (shape tensors, axes, pads).
const maxValues = 64

// state is one inference run.
type state struct {
	model *graph.Model
	res   *Result
	// values holds the known elements of small integer tensors of rank 0
	// or 1, as dims: static, symbolic (a Shape of a symbolic dim) or
	// unknown.
	values map[*graph.Value][]graph.Dim
}

// Infer computes the type of every value of m. It does not change m.
func Infer(m *graph.Model) (*Result, error) {
	if m == nil || m.Graph == nil {
		return nil, errors.New("shape inference: the model has no graph")
	}
	// Tables indexed by value ID, not maps: at a million values every
	// map lookup misses the CPU caches.
	s := &state{
		model: m,
		res: &Result{
			Types:    graph.NewValueTable[*graph.Type](m.Graph.ValueIDs()),
			Inferred: graph.NewValueTable[*graph.Type](m.Graph.ValueIDs()),
		},
		values: map[*graph.Value][]graph.Dim{},
	}
	s.graph(m.Graph)
	return s.res, nil
}

// graph infers the values of g in node order (which Verify keeps
// topological), subgraphs when their owner comes.
func (s *state) graph(g *graph.Graph) {
	for _, v := range g.Initializers {
		s.constant(v, v.ConstantTensor())
	}
	for _, v := range g.Inputs {
		// A graph input with an initializer is a default callers may
		// override: its declaration is what is known.
		if v.Type != nil || v.Const == nil {
			s.res.Types.Set(v, v.Type)
		}
	}
	for _, n := range g.Nodes {
		s.node(n)
	}
}

// constant records the type of a value with data (nil t: only the type of
// an overridable initializer).
func (s *state) constant(v *graph.Value, t *graph.Tensor) {
	if v.Const != nil {
		s.res.Types.Set(v, graph.TensorType(v.Const.DType, graph.StaticShape(v.Const.Dims...)))
	}
	if d, ok := tensorValues(t); ok {
		s.values[v] = d
	}
}

func (s *state) node(n *graph.Node) {
	var inferred []*graph.Type
	c := &ctx{s: s, n: n, opset: s.model.OpsetVersion(n.Domain)}
	var table map[string]rule
	switch n.Domain {
	case "", "ai.onnx":
		table = rules
	case "com.microsoft":
		table = msRules
	}
	if n.OpType == "If" && (n.Domain == "" || n.Domain == "ai.onnx") {
		inferred = s.ifNode(n)
	} else {
		s.subgraphs(n)
		if r := table[n.OpType]; r != nil {
			inferred = r(c)
		}
	}
	for i, out := range n.Outputs() {
		if out == nil {
			continue
		}
		var inf *graph.Type
		if i < len(inferred) {
			inf = inferred[i]
		}
		if inf != nil {
			s.res.Inferred.Set(out, inf)
		}
		t := s.merge(n, out, inf)
		s.res.Types.Set(out, t)
		s.count(t)
		if d, ok := s.values[out]; ok && !valuesFit(d, t) {
			delete(s.values, out)
		}
	}
}

// subgraphs infers the bodies of a node whose own outputs have no rule
// (Loop, Scan): their inputs are what they declare.
func (s *state) subgraphs(n *graph.Node) {
	for _, sg := range n.Subgraphs() {
		s.graph(sg)
	}
}

// ifNode infers both branches; an output is what the branches agree on.
func (s *state) ifNode(n *graph.Node) []*graph.Type {
	var thenG, elseG *graph.Graph
	for _, a := range n.Attrs {
		switch a.Name {
		case "then_branch":
			thenG = a.Graph
		case "else_branch":
			elseG = a.Graph
		}
	}
	s.subgraphs(n)
	if thenG == nil || elseG == nil || len(thenG.Outputs) != len(elseG.Outputs) {
		return nil
	}
	out := make([]*graph.Type, len(thenG.Outputs))
	for i := range out {
		out[i] = join(s.res.Types.Get(thenG.Outputs[i]), s.res.Types.Get(elseG.Outputs[i]))
	}
	return out
}

// valuesFit reports whether known values agree with the value's final
// type (a declaration may have won over the inference).
func valuesFit(d []graph.Dim, t *graph.Type) bool {
	if t == nil || t.Kind != graph.KindTensor || !isInt(t.Elem) && t.Elem != graph.Undefined {
		return false
	}
	switch {
	case t.Shape == nil:
		return true
	case len(t.Shape) == 0:
		return len(d) == 1
	case len(t.Shape) == 1:
		return t.Shape[0].Kind != graph.DimStatic || t.Shape[0].Value == int64(len(d))
	}
	return false
}

// merge combines a value's declaration with the inferred type: inferred
// dims fill unknown declared ones and replace symbolic ones with numbers;
// a contradiction keeps the declaration and is recorded.
func (s *state) merge(n *graph.Node, v *graph.Value, inf *graph.Type) *graph.Type {
	decl := v.Type
	if decl == nil {
		return inf
	}
	if inf == nil {
		return decl
	}
	conflict := func(reason string) *graph.Type {
		s.res.Conflicts = append(s.res.Conflicts, Conflict{Node: n, Value: v, Declared: decl, Inferred: inf, Reason: reason})
		return decl
	}
	if decl.Kind != inf.Kind {
		return conflict("different kinds of value")
	}
	if decl.Kind != graph.KindTensor && decl.Kind != graph.KindSparseTensor {
		return decl
	}
	// The declaration is copied only where the inference adds to it: on
	// an annotated model (every run after the first) most values keep
	// theirs, and a copy each was a third of what a run allocated.
	var out *graph.Type
	edit := func() *graph.Type {
		if out == nil {
			out = decl.Clone()
		}
		return out
	}
	switch {
	case decl.Elem == graph.Undefined:
		edit().Elem = inf.Elem
	case inf.Elem != graph.Undefined && inf.Elem != decl.Elem:
		return conflict("element types differ")
	}
	switch {
	case inf.Shape == nil:
	case decl.Shape == nil:
		edit().Shape = append(graph.Shape{}, inf.Shape...)
	case len(decl.Shape) != len(inf.Shape):
		return conflict("ranks differ")
	default:
		for i, d := range decl.Shape {
			id := inf.Shape[i]
			switch {
			case d.Kind == graph.DimStatic && id.Kind == graph.DimStatic && d.Value != id.Value:
				return conflict(fmt.Sprintf("dimension %d differs", i))
			case d.Kind == graph.DimUnknown || d.Kind == graph.DimSymbolic && id.Kind == graph.DimStatic:
				edit().Shape[i] = graph.Dim{Kind: id.Kind, Value: id.Value, Param: id.Param, Denotation: d.Denotation}
			}
		}
	}
	if out == nil || out.Elem == decl.Elem && sameShape(out.Shape, decl.Shape) {
		return decl
	}
	return out
}

// join is the type two values share: where If branches agree.
func join(a, b *graph.Type) *graph.Type {
	if a == nil || b == nil || a.Kind != b.Kind || a.Kind != graph.KindTensor {
		return nil
	}
	t := graph.TensorType(a.Elem, nil)
	if a.Elem != b.Elem {
		t.Elem = graph.Undefined
	}
	if a.Shape != nil && b.Shape != nil && len(a.Shape) == len(b.Shape) {
		t.Shape = make(graph.Shape, len(a.Shape))
		for i := range a.Shape {
			if sameDim(a.Shape[i], b.Shape[i]) {
				t.Shape[i] = bare(a.Shape[i])
			}
		}
	}
	return typeOrNil(t)
}

func (s *state) count(t *graph.Type) {
	c := &s.res.Counts
	c.Values++
	switch {
	case t == nil || t.Kind == graph.KindUnknown || t.Kind == graph.KindTensor && t.Elem == graph.Undefined && t.Shape == nil:
		c.Unknown++
	case t.Kind == graph.KindTensor && t.Elem != graph.Undefined && t.Shape.IsStatic():
		c.Static++
	default:
		c.Partial++
	}
}

// problem records a node whose inputs contradict each other.
func (s *state) problem(n *graph.Node, format string, args ...any) {
	s.res.Conflicts = append(s.res.Conflicts, Conflict{Node: n, Reason: fmt.Sprintf(format, args...)})
}
