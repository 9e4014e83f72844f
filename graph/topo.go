package graph

import (
	"fmt"
	"slices"
)

// dependencies returns the values n needs that g defines or that enclose
// g: its inputs and the outer values its subgraphs read. It may return
// n's own input list, which the caller must not change.
func dependencies(g *Graph, n *Node) []*Value {
	subgraphs := n.Subgraphs()
	if len(subgraphs) == 0 && !slices.ContainsFunc(n.inputs, func(v *Value) bool { return !producedIn(v, g) }) {
		return n.inputs // the common case, without a copy per node
	}
	deps := append([]*Value{}, n.inputs...)
	for _, sg := range subgraphs {
		sg.Walk(func(inner *Graph) {
			for _, m := range inner.Nodes {
				for _, in := range m.inputs {
					if in != nil && !definedWithin(in, sg) {
						deps = append(deps, in)
					}
				}
			}
			for _, out := range inner.Outputs {
				if !definedWithin(out, sg) {
					deps = append(deps, out)
				}
			}
		})
	}
	out := deps[:0]
	for _, d := range deps {
		if producedIn(d, g) {
			out = append(out, d)
		}
	}
	return out
}

// producedIn reports whether a node of g produces v.
func producedIn(v *Value, g *Graph) bool {
	return v != nil && v.producer != nil && v.producer.graph == g
}

// number records each node's place in g.Nodes (Node.at).
func (g *Graph) number() {
	for i, n := range g.Nodes {
		n.at = i
	}
}

// Positions numbers g's nodes and returns a lookup of a node's place in
// g.Nodes (-1 for a node not listed there). It holds until g.Nodes
// changes, so a pass that defers its removals can tell which of two nodes
// comes first without a map keyed by node (at a million nodes every
// lookup in one misses the CPU caches). Nodes an unfinished batch inserts
// are not listed yet.
func (g *Graph) Positions() func(*Node) int {
	g.number()
	return g.indexOf
}

// indexOf is n's place in g.Nodes as of the last number, or -1 when n is
// not there (another graph's node, or one removed since).
func (g *Graph) indexOf(n *Node) int {
	if i := n.at; i >= 0 && i < len(g.Nodes) && g.Nodes[i] == n {
		return i
	}
	return -1
}

// definedWithin reports whether v belongs to sg or a graph nested in it.
func definedWithin(v *Value, sg *Graph) bool {
	for s := v.graph; s != nil; s = s.Parent {
		if s == sg {
			return true
		}
	}
	return false
}

// TopoSort orders g's nodes so that every node follows the producers of
// what it reads, keeping the current order wherever it is already valid. It
// fails, changing nothing, when the graph has a cycle.
func (g *Graph) TopoSort() error {
	g.flushBatch()
	if cyc := findCycle(g); cyc != nil {
		return fmt.Errorf("graph %q has a cycle through node %s", g.Name, cyc[0])
	}
	g.number()
	placed := make([]bool, len(g.Nodes))
	order := make([]*Node, 0, len(g.Nodes))
	var place func(n *Node)
	place = func(n *Node) {
		i := g.indexOf(n)
		if i < 0 || placed[i] {
			return
		}
		placed[i] = true
		for _, d := range dependencies(g, n) {
			place(d.producer)
		}
		order = append(order, n)
	}
	for _, n := range g.Nodes {
		place(n)
	}
	g.Nodes = order
	return nil
}

// findCycle returns the nodes of one cycle in g, or nil. It walks the
// graph iteratively so that long chains cannot exhaust the stack.
func findCycle(g *Graph) []*Node {
	const (
		unseen = iota
		active
		done
	)
	g.number()
	state := make([]uint8, len(g.Nodes))
	type frame struct {
		n    *Node
		deps []*Value
		next int
	}
	for k, start := range g.Nodes {
		if state[k] != unseen || g.indexOf(start) != k {
			continue // done, or listed twice (the verifier says so)
		}
		stack := []frame{{n: start, deps: dependencies(g, start)}}
		state[k] = active
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(top.deps) {
				state[g.indexOf(top.n)] = done
				stack = stack[:len(stack)-1]
				continue
			}
			p := top.deps[top.next].producer
			top.next++
			i := g.indexOf(p)
			if i < 0 {
				continue // not in g.Nodes: no cycle runs through it here
			}
			switch state[i] {
			case active:
				var cyc []*Node
				for i := len(stack) - 1; i >= 0; i-- {
					cyc = append([]*Node{stack[i].n}, cyc...)
					if stack[i].n == p {
						break
					}
				}
				return cyc
			case unseen:
				state[i] = active
				stack = append(stack, frame{n: p, deps: dependencies(g, p)})
			}
		}
	}
	return nil
}
