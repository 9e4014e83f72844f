package testgraph

import (
	"os"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// Marshal returns m's protobuf bytes, failing the test when it cannot be
// serialized.
func Marshal(t testing.TB, m *graph.Model) []byte {
	t.Helper()
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Marshal returns the protobuf bytes of the model built so far.
func (b *Builder) Marshal() []byte {
	b.T.Helper()
	return Marshal(b.T, b.Model)
}

// ReadModel reads the model file at path and returns its bytes and the
// model they parse to, failing the test on any error.
func ReadModel(t testing.TB, path string) ([]byte, *graph.Model) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := graph.Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

// LoadFile loads the model file at path (see graph.LoadFile), failing
// the test on any error; the model is closed when the test ends.
func LoadFile(t testing.TB, path string) *graph.Model {
	t.Helper()
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// OpCounts counts g's nodes by operator (its own nodes, not those of its
// subgraphs).
func OpCounts(g *graph.Graph) map[string]int {
	c := map[string]int{}
	for _, n := range g.Nodes {
		c[n.OpType]++
	}
	return c
}
