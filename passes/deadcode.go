package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// deadCode removes nodes whose outputs nothing reads (and that are not
// graph outputs), then initializers nothing reads. Walking the nodes
// backwards removes whole dead chains in one run.
var deadCode = &Pass{
	Name:  "eliminate-dead-code",
	Doc:   "remove nodes and initializers whose results nothing uses",
	Level: 1,
	Run:   runDeadCode,
}

func runDeadCode(c *Context) (Stats, error) {
	// Outputs of every graph: a branch may return an outer value as it is.
	returned := map[*graph.Value]bool{}
	c.Model.Graph.Walk(func(g *graph.Graph) {
		for _, o := range g.Outputs {
			returned[o] = true
		}
	})
	var st Stats
	var err error
	c.Model.Graph.Walk(func(g *graph.Graph) {
		if err != nil {
			return
		}
		dead := map[*graph.Node]bool{}
		var doomed []*graph.Node
		for i := len(g.Nodes) - 1; i >= 0; i-- {
			n := g.Nodes[i]
			if !isDead(n, dead, returned) {
				continue
			}
			dead[n] = true
			doomed = append(doomed, n)
		}
		if len(doomed) > 0 {
			if err = g.RemoveNodes(doomed); err != nil {
				return
			}
			st.Removed += len(doomed)
		}
		var unused []*graph.Value
		for _, v := range g.Initializers {
			if len(v.Uses()) == 0 && !returned[v] && !slices.Contains(g.Inputs, v) {
				unused = append(unused, v)
			}
		}
		err = g.RemoveInitializers(unused)
	})
	return st, err
}

// isDead reports whether no live node or graph reads any output of n.
func isDead(n *graph.Node, dead map[*graph.Node]bool, returned map[*graph.Value]bool) bool {
	for _, v := range n.Outputs() {
		if v == nil {
			continue
		}
		if returned[v] {
			return false
		}
		for _, u := range v.Uses() {
			if !dead[u.Node] {
				return false
			}
		}
	}
	return true
}
