package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// The edit a Rule (rule.go) and the graph-wide cleanups make of one graph:
// readers are rewired at once, nodes removed in one sweep at the end (so a
// pass stays linear in the graph's size), and a bypassed graph output
// keeps its name. The graph is in a batch (graph/batch.go) while it is
// edited: a fusion's InsertNodeBefore and RemoveNodes change the dataflow
// at once but the node list only when the edit ends, so a fusion must not
// read g.Nodes itself.

// graphEdit collects what a pass does to one graph. Readers are rewired at
// once; nodes are removed, and bypassed graph outputs renamed, in finish.
type graphEdit struct {
	m *graph.Model
	g *graph.Graph
	// returnedBy lists, for each value some graph returns, the graphs
	// whose output list holds it (a branch may return an outer value).
	returnedBy map[*graph.Value][]*graph.Graph
	doomed     []*graph.Node
	gone       map[*graph.Node]bool
	renames    []outputRename
	renamed    map[*graph.Value]bool // values with a rename pending
	st         Stats
}

// outputRename gives v the name (and declared type) of the graph output
// it replaced, once the node that produced that output is gone.
type outputRename struct {
	v    *graph.Value
	name string
	typ  *graph.Type
}

// editGraphs calls fn with an edit of each graph of m, the main graph
// first, and applies the edit before moving into the graph's subgraphs.
func editGraphs(m *graph.Model, fn func(e *graphEdit) error) (Stats, error) {
	// One walk finds the graphs (no walk of the nodes for a model whose
	// census knows it has no subgraphs): the outputs of all are known
	// before any is edited.
	var graphs []*graph.Graph
	returnedBy := map[*graph.Value][]*graph.Graph{}
	m.Graph.Walk(func(g *graph.Graph) {
		graphs = append(graphs, g)
		for _, o := range g.Outputs {
			if !slices.Contains(returnedBy[o], g) {
				returnedBy[o] = append(returnedBy[o], g)
			}
		}
	})
	var st Stats
	// A subgraph whose node an edit of its graph removed is no longer
	// part of the model: it is not edited (no pass adds subgraphs).
	detached := map[*graph.Graph]bool{}
	for _, g := range graphs {
		if o := g.Owner; o != nil && (o.Graph() != g.Parent || detached[g.Parent]) {
			detached[g] = true
			continue
		}
		e := &graphEdit{m: m, g: g, returnedBy: returnedBy, gone: map[*graph.Node]bool{}, renamed: map[*graph.Value]bool{}}
		// The rewrites insert and remove nodes through a batch, so that
		// each costs its own size and g.Nodes is rewritten once, here.
		g.BeginBatch()
		err := fn(e)
		if err == nil {
			err = e.finish()
		}
		g.EndBatch()
		st.add(e.st)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// returned reports whether some graph returns v.
func (e *graphEdit) returned(v *graph.Value) bool { return len(e.returnedBy[v]) > 0 }

// singleUse reports whether exactly one node input reads v and no graph
// returns it: the producer of v may then be folded into that reader.
func (e *graphEdit) singleUse(v *graph.Value) bool {
	return v != nil && len(v.Uses()) == 1 && !e.returned(v)
}

// remove schedules n for removal; its outputs must have no readers left
// by the time finish runs.
func (e *graphEdit) remove(n *graph.Node) {
	if !e.gone[n] {
		e.gone[n] = true
		e.doomed = append(e.doomed, n)
		e.st.Removed++
	}
}

// removed reports whether n is scheduled for removal.
func (e *graphEdit) removed(n *graph.Node) bool { return e.gone[n] }

// absorbable returns the producer of v when a rewrite of v's one reader
// may absorb it: one of ops (default domain), in the edited graph and not
// scheduled for removal, with v as its only output, read once and
// returned by no graph, and an input 0. Otherwise nil.
func (e *graphEdit) absorbable(v *graph.Value, ops ...string) *graph.Node {
	if v == nil {
		return nil
	}
	p := v.Producer()
	if !isOp(p, ops...) || p.Graph() != e.g || e.removed(p) || len(p.Outputs()) != 1 ||
		!e.singleUse(p.Output(0)) || p.Input(0) == nil {
		return nil
	}
	return p
}

// canBypass reports whether the readers of out may read in instead. When
// out is a graph output, in takes out's name so the model's interface
// stays the same: that needs in to be a node output of the same graph that
// no graph returns (not a graph input, initializer or outer value).
func (e *graphEdit) canBypass(out, in *graph.Value) bool {
	if out == nil || in == nil || out == in || e.renamed[out] {
		return false
	}
	if !e.returned(out) {
		return true
	}
	return in.Producer() != nil && in.Graph() == out.Graph() && !e.returned(in) && !e.removed(in.Producer())
}

// bypass makes every reader of out read in (see canBypass), renaming in
// after out in finish when out is a graph output. The caller removes
// out's producer.
func (e *graphEdit) bypass(out, in *graph.Value) {
	if e.returned(out) {
		e.renames = append(e.renames, outputRename{v: in, name: out.Name, typ: out.Type})
		e.renamed[in] = true
	}
	e.replaceUses(out, in)
}

// replaceUses makes every node input and graph output that reads old read
// new. Unlike graph.ReplaceAllUses it finds the graph outputs in the map
// built once per pass, so many replacements stay linear.
func (e *graphEdit) replaceUses(old, new *graph.Value) {
	for _, u := range slices.Clone(old.Uses()) {
		u.Node.SetInput(u.Index, new)
	}
	for _, g := range e.returnedBy[old] {
		for i, o := range g.Outputs {
			if o == old {
				g.Outputs[i] = new
			}
		}
		if !slices.Contains(e.returnedBy[new], g) {
			e.returnedBy[new] = append(e.returnedBy[new], g)
		}
	}
	delete(e.returnedBy, old)
}

// finish removes the scheduled nodes and renames bypassed outputs.
func (e *graphEdit) finish() error {
	if len(e.doomed) == 0 {
		return nil
	}
	if err := e.g.RemoveNodes(e.doomed); err != nil {
		return err
	}
	if len(e.renames) == 0 {
		return nil
	}
	nowOutput := map[*graph.Value]bool{}
	for _, r := range e.renames {
		if err := e.g.Rename(r.v, r.name); err != nil {
			return err
		}
		if r.typ != nil {
			r.v.Type = r.typ
		}
		nowOutput[r.v] = true
	}
	e.g.ValueInfo = slices.DeleteFunc(e.g.ValueInfo, func(v *graph.Value) bool { return nowOutput[v] })
	return nil
}

// opset is the model's default-domain operator set version.
func (e *graphEdit) opset() int64 { return e.m.OpsetVersion("") }
