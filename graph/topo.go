package graph

import "fmt"

// dependencies returns the values n needs that g defines or that enclose
// g: its inputs and the outer values its subgraphs read.
func dependencies(g *Graph, n *Node) []*Value {
	deps := append([]*Value{}, n.inputs...)
	for _, sg := range n.Subgraphs() {
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
		if d != nil && d.producer != nil && d.producer.graph == g {
			out = append(out, d)
		}
	}
	return out
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
	placed := make(map[*Node]bool, len(g.Nodes))
	order := make([]*Node, 0, len(g.Nodes))
	var place func(n *Node)
	place = func(n *Node) {
		if placed[n] {
			return
		}
		placed[n] = true
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
	state := make(map[*Node]int, len(g.Nodes))
	type frame struct {
		n    *Node
		deps []*Value
		next int
	}
	for _, start := range g.Nodes {
		if state[start] != unseen {
			continue
		}
		stack := []frame{{n: start, deps: dependencies(g, start)}}
		state[start] = active
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(top.deps) {
				state[top.n] = done
				stack = stack[:len(stack)-1]
				continue
			}
			p := top.deps[top.next].producer
			top.next++
			switch state[p] {
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
				state[p] = active
				stack = append(stack, frame{n: p, deps: dependencies(g, p)})
			}
		}
	}
	return nil
}
