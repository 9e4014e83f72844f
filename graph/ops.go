package graph

// The op census: how many nodes of a model (the main graph and every
// subgraph) run each op type, any domain, and how many hold subgraphs. A
// pass that rewrites around one op type asks first whether the model has
// any (HasOp) instead of walking a million nodes to find none, and a walk
// of a model whose nodes hold no subgraphs (most models) visits the main
// graph alone without looking at its nodes. The main graph builds the
// census with one walk when first asked and keeps it in step as nodes are
// added, removed or change op type (SetOpType); an edit it cannot follow
// cheaply (a node holding subgraphs added or removed, a graph attribute
// set or replaced) drops it, to be rebuilt when next asked. Verify checks
// it against the nodes.
type opCensus struct {
	ops     map[string]int
	holders int // nodes whose attributes hold graphs
}

// HasOp reports whether some node of g's model has one of the op types
// ops, in any domain.
func (g *Graph) HasOp(ops ...string) bool {
	c := g.root().census()
	for _, op := range ops {
		if c.ops[op] > 0 {
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

// census returns the main graph's census, counting it first when it has
// none.
func (g *Graph) census() *opCensus {
	if g.ops == nil {
		g.ops = countOps(g)
	}
	return g.ops
}

// noSubgraphs reports whether g is a main graph known to hold no
// subgraphs: its census says no node holds any.
func (g *Graph) noSubgraphs() bool {
	return g.Parent == nil && g.ops != nil && g.ops.holders == 0
}

// countOps counts the op types of the nodes of g and its subgraphs, and
// the nodes that hold subgraphs.
func countOps(g *Graph) *opCensus {
	c := &opCensus{ops: map[string]int{}}
	count := func(n *Node) {
		c.ops[n.OpType]++
		if holdsGraphs(n) {
			c.holders++
		}
	}
	g.walk(func(s *Graph) {
		for _, n := range s.Nodes {
			if n.graph == s {
				count(n)
			}
		}
		if s.batch != nil { // inserted in an open batch, not listed yet
			for _, ins := range s.batch.before {
				for _, n := range ins {
					if n.graph == s {
						count(n)
					}
				}
			}
		}
	}, false) // not the census it may be checking
	return c
}

// holdsGraphs reports whether an attribute of n holds a graph.
func holdsGraphs(n *Node) bool {
	for _, a := range n.Attrs {
		if a.Graph != nil || len(a.Graphs) > 0 {
			return true
		}
	}
	return false
}

// countOp adds d nodes of op to the census of g's model, if it has one.
func (g *Graph) countOp(op string, d int) {
	if c := g.root().ops; c != nil {
		c.ops[op] += d
	}
}
