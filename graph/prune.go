package graph

import "slices"

// Prune removes the nodes whose results nothing returned depends on, in
// every graph of m, then the initializers nothing reads. What a graph
// returns is its Outputs (a branch may return an outer value as it is), so
// narrowing m.Graph.Outputs first keeps only what computes the values left
// there. Walking each graph's nodes backwards removes whole dead chains in
// one call; a node of an outer graph read only by a dead node of a branch
// goes on a later call. It returns how many nodes it removed.
func Prune(m *Model) (int, error) {
	returned := map[*Value]bool{}
	m.Graph.Walk(func(g *Graph) {
		for _, o := range g.Outputs {
			returned[o] = true
		}
	})
	removed := 0
	var err error
	m.Graph.Walk(func(g *Graph) {
		if err != nil {
			return
		}
		g.number()
		dead := make([]bool, len(g.Nodes))
		var doomed []*Node
		for i := len(g.Nodes) - 1; i >= 0; i-- {
			n := g.Nodes[i]
			if !isDead(g, n, dead, returned) {
				continue
			}
			dead[i] = true
			doomed = append(doomed, n)
		}
		if len(doomed) > 0 {
			if err = g.RemoveNodes(doomed); err != nil {
				return
			}
			removed += len(doomed)
		}
		var unused []*Value
		for _, v := range g.Initializers {
			if len(v.Uses()) == 0 && !returned[v] && !slices.Contains(g.Inputs, v) {
				unused = append(unused, v)
			}
		}
		err = g.RemoveInitializers(unused)
	})
	return removed, err
}

// isDead reports whether no live node or graph reads any output of n, a
// node of g; dead holds g's nodes found dead so far (by Node.at).
func isDead(g *Graph, n *Node, dead []bool, returned map[*Value]bool) bool {
	for _, v := range n.Outputs() {
		if v == nil {
			continue
		}
		if returned[v] {
			return false
		}
		for _, u := range v.Uses() {
			if i := g.indexOf(u.Node); i < 0 || !dead[i] {
				return false
			}
		}
	}
	return true
}
