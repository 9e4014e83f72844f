package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
)

// inferShapes writes what shape inference knows into the model: every node
// output whose declared type is missing or says less (an unknown rank, an
// unknown or symbolic dim the inference has a number for) gets the
// inferred type, and is listed in its graph's value_info unless it is a
// graph output. Declarations that say more, or contradict the inference,
// stay as they are; graph inputs and initializers are never touched.
// Later passes and runtimes read the annotations. A second run finds
// nothing to add, so the fixed-point loop ends.
var inferShapes = &Pass{
	Name:           "infer-shapes",
	Doc:            "annotate values with their inferred element types and shapes",
	Level:          1,
	Form:           GraphWide,
	ProvidesShapes: true,
	Run:            runInferShapes,
}

func runInferShapes(c *Context) (Stats, error) {
	res, err := shapes.Infer(c.Model)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	c.Model.Graph.Walk(func(g *graph.Graph) {
		var add []*graph.Value // refined, listed unless they are already
		for _, n := range g.Nodes {
			for _, v := range n.Outputs() {
				if v == nil {
					continue
				}
				t := res.Types.Get(v)
				if !refines(t, v.Type) {
					continue
				}
				// Not a copy: values may share a Type, which is
				// copied by whatever changes it (graph.Type); a copy
				// a value was a third of what the pipeline allocated.
				v.Type = t
				st.Rewritten++
				add = append(add, v)
			}
		}
		g.ValueInfo = append(g.ValueInfo, unlisted(g, add)...)
	})
	return st, nil
}

// unlisted returns the values of vs (each a node output, once) that
// neither g.ValueInfo nor g.Outputs holds, in order. The table it builds
// is of the smaller side: on the first run the values are many and the
// list short, on later runs the other way round, and at a million
// entries every lookup in a table misses the CPU caches.
func unlisted(g *graph.Graph, vs []*graph.Value) []*graph.Value {
	if len(vs) == 0 {
		return nil
	}
	listedAt := func(visit func(*graph.Value)) {
		for _, v := range g.ValueInfo {
			visit(v)
		}
		for _, v := range g.Outputs {
			visit(v)
		}
	}
	if len(vs) <= len(g.ValueInfo)+len(g.Outputs) {
		listed := make(map[*graph.Value]bool, len(vs))
		for _, v := range vs {
			listed[v] = false
		}
		listedAt(func(v *graph.Value) {
			if _, ok := listed[v]; ok {
				listed[v] = true
			}
		})
		return slices.DeleteFunc(vs, func(v *graph.Value) bool { return listed[v] })
	}
	listed := make(map[*graph.Value]bool, len(g.ValueInfo)+len(g.Outputs))
	listedAt(func(v *graph.Value) { listed[v] = true })
	return slices.DeleteFunc(vs, func(v *graph.Value) bool { return listed[v] })
}

// refines reports whether tensor type t says more than decl and nothing
// against it: a known element type where decl has none, a rank where decl
// has none, numbers or symbols for unknown dims, numbers for symbols.
func refines(t, decl *graph.Type) bool {
	if t == nil || t.Kind != graph.KindTensor || t.Elem == graph.Undefined {
		return false
	}
	if decl == nil {
		return true
	}
	if decl.Kind != graph.KindTensor || decl.Elem != graph.Undefined && decl.Elem != t.Elem {
		return false
	}
	more := decl.Elem == graph.Undefined
	switch {
	case t.Shape == nil:
		return more && decl.Shape == nil
	case decl.Shape == nil:
		return true
	case len(decl.Shape) != len(t.Shape):
		return false
	}
	for i, d := range decl.Shape {
		e := t.Shape[i]
		switch {
		case d.Kind == e.Kind && d.Value == e.Value && d.Param == e.Param:
		case d.Kind == graph.DimUnknown, d.Kind == graph.DimSymbolic && e.Kind == graph.DimStatic:
			more = true
		default:
			return false
		}
	}
	return more
}
