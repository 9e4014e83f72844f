package passes

import "github.com/optc-dev/optc/graph"

// Rule is the one way a pass writes a local rewrite (one anchor node and
// its neighbours), in the manner of ONNX Runtime's RewriteRule: the op
// types of the anchor node (default ONNX domain), a condition that finds
// the pattern there without changing anything (Match returns it, or false
// to leave the graph alone), and the rewrite (Apply), which changes the
// graph and reports what it did. A pass builds its Rule from the run's
// context (opset, inferred shapes) and returns rule.apply(c.Model).
//
// Both functions get the edit of the anchor's graph (edit.go). A rewrite
// that lets readers read past a node (eliminate-identity, merge-*) uses
// it: e.bypass and e.remove defer the removal to the end of the graph's
// sweep, so a pass stays linear in the graph's size and a bypassed graph
// output keeps its name. A fusion that builds new nodes edits the graph
// directly (InsertNodeBefore, RemoveNodes) and ignores e: the graph is in
// a batch meanwhile (graph/batch.go), so each edit costs its own size, not
// the graph's, and the fusion must not read g.Nodes.
//
// Graph-wide passes, which compare or rewrite many unrelated nodes at once
// (CSE, deduplicating initializers, constants to initializers, constant
// folding, dead code, shape inference), are not rules: they loop over the
// graph themselves, the cleanups among them through editGraphs.
type Rule[P any] struct {
	OpTypes []string
	Match   func(e *graphEdit, n *graph.Node) (P, bool)
	Apply   func(e *graphEdit, p P) (Stats, error)
}

// apply runs the rule at every node of m (main graph first, then each
// graph's subgraphs) whose op type is one of OpTypes, when m has any, in node order over a
// snapshot of the graph's nodes, skipping nodes an earlier rewrite removed
// or scheduled for removal. It sums the stats and stops at the first
// error.
func (r Rule[P]) apply(m *graph.Model) (Stats, error) {
	if !m.Graph.HasOp(r.OpTypes...) {
		// No anchor anywhere: nothing to walk for (a pass per absent op
		// type was a walk of every node, bound by memory, not work).
		return Stats{}, nil
	}
	return editGraphs(m, func(e *graphEdit) error {
		// No copy of the node list: inside editGraphs' batch no edit
		// changes the listed nodes in place (insertions and removals wait
		// for the batch's end, AddNode appends past the end), and a
		// million-node list copied per rule per round was a quarter of
		// the pipeline's allocations.
		for _, n := range e.g.Nodes {
			if n.Graph() != e.g || e.removed(n) || !isOp(n, r.OpTypes...) {
				continue
			}
			p, ok := r.Match(e, n)
			if !ok {
				continue
			}
			st, err := r.Apply(e, p)
			if err != nil {
				return err
			}
			e.st.add(st)
		}
		return nil
	})
}

// importDomain adds an opset import of domain (version 1) to m when it
// has none: a fusion that wrote an operator of that domain calls it.
func importDomain(m *graph.Model, domain string) {
	if m.OpsetVersion(domain) == 0 {
		m.Opsets = append(m.Opsets, graph.OpsetImport{Domain: domain, Version: 1})
	}
}
