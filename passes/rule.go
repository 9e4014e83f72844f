package passes

import "github.com/optc-dev/optc/graph"

// Rule is a local fusion anchored at one node, in the manner of ONNX
// Runtime's RewriteRule: the op types of the anchor node (default ONNX
// domain), a condition that finds the pattern there without changing
// anything (Match returns it, or false to leave the graph alone), and the
// rewrite (Apply), which changes the graph and reports what it did. A
// fusion pass builds its Rule from the run's context (opset, inferred
// shapes) and returns rule.apply(c.Model).
//
// Graph-wide cleanups that need more than one node at a time (CSE,
// deduplicating initializers, removing nodes whose outputs a graph
// returns) use editGraphs (cleanup_helpers.go) instead.
type Rule[P any] struct {
	OpTypes []string
	Match   func(n *graph.Node) (P, bool)
	Apply   func(p P) (Stats, error)
}

// apply runs the rule at every node of m (main graph and subgraphs) whose
// op type is one of OpTypes, over a snapshot of each graph's nodes, and
// sums the stats; it stops at the first error.
func (r Rule[P]) apply(m *graph.Model) (Stats, error) {
	return forEachNode(m, func(n *graph.Node) (Stats, error) {
		if !isOp(n, r.OpTypes...) {
			return Stats{}, nil
		}
		p, ok := r.Match(n)
		if !ok {
			return Stats{}, nil
		}
		return r.Apply(p)
	})
}

// importDomain adds an opset import of domain (version 1) to m when it
// has none: a fusion that wrote an operator of that domain calls it.
func importDomain(m *graph.Model, domain string) {
	if m.OpsetVersion(domain) == 0 {
		m.Opsets = append(m.Opsets, graph.OpsetImport{Domain: domain, Version: 1})
	}
}
