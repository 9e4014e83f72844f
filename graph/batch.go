package graph

import "slices"

// A batch lets a caller make many small edits of one graph in a row (a
// pass rewriting pattern after pattern) at a cost proportional to the
// edits, not to the graph: InsertNodeBefore, RemoveNode and RemoveNodes
// change the dataflow at once (uses, producers, the names in scope), just
// as outside a batch, but the rewriting of g.Nodes and g.ValueInfo, which
// costs the whole list each time, waits for EndBatch and happens once.
// Outside a batch, a pass of n rewrites would cost n times the graph.
//
// Until EndBatch, g.Nodes still lists the removed nodes (their Graph() is
// nil; Walk skips them) and lacks the inserted ones, so the batch's owner
// must not read g.Nodes itself; TopoSort brings the list up to date first.
// A node inserted during a batch is not walked into until EndBatch (no
// rewrite inserts a node that holds subgraphs).
type batch struct {
	// before lists, for each node, the nodes inserted just before it, in
	// the order they were inserted: the last one sits next to it.
	before  map[*Node][]*Node
	removed bool
	gone    map[*Value]bool // outputs of removed nodes, for ValueInfo
}

// BeginBatch starts a batch of edits of g (see batch); EndBatch ends it.
// Batches do not nest: a second BeginBatch ends the first.
func (g *Graph) BeginBatch() {
	g.EndBatch()
	g.batch = &batch{before: map[*Node][]*Node{}, gone: map[*Value]bool{}}
}

// EndBatch brings g.Nodes and g.ValueInfo up to date with the batch's
// edits, in one sweep, and ends the batch. Without a batch it does
// nothing.
func (g *Graph) EndBatch() {
	g.flushBatch()
	g.batch = nil
}

// flushBatch rewrites g.Nodes and g.ValueInfo as the batch's edits would
// have, had each been made outside a batch, and keeps the batch open.
func (g *Graph) flushBatch() {
	b := g.batch
	if b == nil || len(b.before) == 0 && !b.removed {
		return
	}
	order := make([]*Node, 0, len(g.Nodes)+len(b.before))
	var place func(n *Node)
	place = func(n *Node) {
		for _, p := range b.before[n] {
			place(p)
		}
		if n.graph == g {
			order = append(order, n)
		}
	}
	for _, n := range g.Nodes {
		place(n)
	}
	g.Nodes = order
	if len(b.gone) > 0 {
		g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *Value) bool { return b.gone[v] })
	}
	clear(b.before)
	clear(b.gone)
	b.removed = false
}

// NodeNames returns the names of every node of g's model (the main graph
// and all subgraphs), as they would be listed had no batch been open:
// nodes inserted in an open batch count, nodes removed in it do not.
func (g *Graph) NodeNames() map[string]bool {
	names := map[string]bool{}
	g.root().Walk(func(s *Graph) {
		for _, n := range s.Nodes {
			if n.graph == s {
				names[n.Name] = true
			}
		}
		if s.batch != nil {
			for _, inserted := range s.batch.before {
				for _, n := range inserted {
					if n.graph == s {
						names[n.Name] = true
					}
				}
			}
		}
	})
	return names
}
