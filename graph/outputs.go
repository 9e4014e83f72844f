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
