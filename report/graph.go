package report

import "github.com/optc-dev/optc/graph"

// ReadGraph sets the model's size and graph from the model file at path.
func (m *Model) ReadGraph(path string) error {
	g, err := graph.LoadFile(path)
	if err != nil {
		return err
	}
	defer g.Close()
	m.SetGraph(graph.Summarize(g))
	return nil
}
