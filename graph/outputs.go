package graph

import "fmt"

// Clone returns an independent copy of m, tensor data included (external
// data is read in, unless the model is over protobuf's 2 GiB limit: then
// the copy reads it from the same side files). Changes to the copy never
// reach m or its files.
func (m *Model) Clone() (*Model, error) {
	s, err := MarshalReferencing(m)
	if err != nil {
		return nil, fmt.Errorf("copy model: %w", err)
	}
	c, err := s.Parse()
	if err != nil {
		return nil, fmt.Errorf("copy model: %w", err)
	}
	c.Path = m.Path
	return c, nil
}

// ExposeValues makes the named values of the main graph extra graph
// outputs, so a runtime returns them too (intermediate tensors for
// calibration and per-layer comparison). Apply it to a Clone: the model's
// interface changes.
func ExposeValues(m *Model, names []string) error {
	g := m.Graph
	for _, name := range names {
		v, ok := g.values[name]
		if !ok {
			return fmt.Errorf("no value %q in the main graph", name)
		}
		if v.producer == nil && v.Const == nil && !g.isInput(v) {
			return fmt.Errorf("value %q is not defined by any node, input or initializer", name)
		}
		if !g.isOutput(v) {
			g.Outputs = append(g.Outputs, v)
		}
	}
	return nil
}

// ExposeNested is ExposeValues for values anywhere in the model: a value
// of an If branch or a Loop/Scan body is passed out of its owner node as an
// extra output (the other If branch gives an empty tensor; a Loop or Scan
// stacks the value of every iteration), level by level up to the main
// graph. It returns, for each name, the name of the main-graph output that
// carries it. Apply it to a Clone.
func ExposeNested(m *Model, names []string) (map[string]string, error) {
	out := map[string]string{}
	var main []string
	for _, name := range names {
		if _, ok := m.Graph.values[name]; ok {
			main = append(main, name)
			out[name] = name
			continue
		}
		var v *Value
		for _, sg := range m.Graph.allSubgraphs() {
			if x, ok := sg.values[name]; ok {
				v = x
				break
			}
		}
		if v == nil {
			return nil, fmt.Errorf("no value %q in the model", name)
		}
		u, err := hoist(v)
		if err != nil {
			return nil, fmt.Errorf("expose %q: %w", name, err)
		}
		main = append(main, u.Name)
		out[name] = u.Name
	}
	return out, ExposeValues(m, main)
}

// hoist passes v, a value of a subgraph, out of the subgraph's owner node,
// up to the main graph, and returns the main-graph value that carries it.
func hoist(v *Value) (*Value, error) {
	sg := v.graph
	n, parent := sg.Owner, sg.Parent
	if n == nil || parent == nil {
		return v, nil
	}
	elem := Float
	if v.Type != nil && v.Type.Elem != Undefined {
		elem = v.Type.Elem
	}
	switch n.OpType {
	case "If":
		var other *Graph
		for _, b := range []string{"then_branch", "else_branch"} {
			if a := n.Attr(b); a != nil && a.Graph != nil && a.Graph != sg {
				other = a.Graph
			}
		}
		if other == nil {
			return nil, fmt.Errorf("node %s: no other branch", n)
		}
		empty, err := NewTensor("", elem, []int64{0}, nil)
		if err != nil {
			return nil, err
		}
		e, err := other.NewValue(other.UniqueName(v.Name + "_empty"))
		if err != nil {
			return nil, err
		}
		e.Type = TensorType(elem, Shape{StaticDim(0)})
		c, err := other.AddNode("Constant", nil, []*Value{e})
		if err != nil {
			return nil, err
		}
		c.SetAttr(&Attr{Name: "value", Type: AttrTensor, Tensor: empty})
		other.Outputs = append(other.Outputs, e)
	case "Loop":
	case "Scan":
		if n.Attr("scan_output_axes") != nil || n.Attr("scan_output_directions") != nil {
			return nil, fmt.Errorf("node %s: a Scan with scan_output_axes or scan_output_directions", n)
		}
	default:
		return nil, fmt.Errorf("node %s: values of %s subgraphs cannot be passed out", n, n.OpType)
	}
	// A copy, so that a value that is already an output of sg (or is
	// exposed twice) still gets an output of its own.
	c, err := sg.NewValue(sg.UniqueName(v.Name + "_out"))
	if err != nil {
		return nil, err
	}
	c.Type = TensorType(elem, nil)
	if _, err := sg.AddNode("Identity", []*Value{v}, []*Value{c}); err != nil {
		return nil, err
	}
	sg.Outputs = append(sg.Outputs, c)
	u, err := parent.NewValue(parent.UniqueName(v.Name + "_exposed"))
	if err != nil {
		return nil, err
	}
	u.Type = TensorType(elem, nil)
	if err := n.SetOutput(len(n.Outputs()), u); err != nil {
		return nil, err
	}
	return hoist(u)
}
