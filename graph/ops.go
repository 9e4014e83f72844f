package graph

// The op census: how many nodes of a model (the main graph and every
// subgraph) run each op type, any domain. A pass that rewrites around
// one op type asks first whether the model has any (HasOp) instead of
// walking a million nodes to find none. The main graph builds it with one
// walk when first asked and keeps it in step as nodes are added, removed or
// change op type (SetOpType); an edit it cannot follow cheaply (a subgraph
// attached, replaced or removed) drops it, to be rebuilt when next asked.
// Verify checks it against the nodes.

// HasOp reports whether some node of g's model has one of the op types
// ops, in any domain.
func (g *Graph) HasOp(ops ...string) bool {
	c := g.root().opCensus()
	for _, op := range ops {
		if c[op] > 0 {
			return true
		}
	}
	return false
}

// SetOpType changes the node's op type, keeping the census in step
// (writing OpType directly leaves it behind; Verify reports that).
func (n *Node) SetOpType(op string) {
	if n.graph != nil {
		n.graph.countOp(n.OpType, -1)
		n.graph.countOp(op, 1)
	}
	n.OpType = op
}

// opCensus returns the main graph's census, counting it first when it
// has none.
func (g *Graph) opCensus() map[string]int {
	if g.ops == nil {
		g.ops = countOps(g)
	}
	return g.ops
}

// countOps counts the op types of the nodes of g and its subgraphs.
func countOps(g *Graph) map[string]int {
	c := map[string]int{}
	g.Walk(func(s *Graph) {
		for _, n := range s.Nodes {
			if n.graph == s {
				c[n.OpType]++
			}
		}
		if s.batch != nil { // inserted in an open batch, not listed yet
			for _, ins := range s.batch.before {
				for _, n := range ins {
					if n.graph == s {
						c[n.OpType]++
					}
				}
			}
		}
	})
	return c
}

// countOp adds d nodes of op to the census of g's model, if it has one.
func (g *Graph) countOp(op string, d int) {
	if c := g.root().ops; c != nil {
		c[op] += d
	}
}
