package passes

import (
	"fmt"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// TestUnlisted leaves out what the graph lists already, in order, whether
// the values or the lists are the longer side.
func TestUnlisted(t *testing.T) {
	g := graph.NewGraph("g")
	var vs []*graph.Value
	for i := range 6 {
		v, err := g.NewValue(fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	names := func(vs []*graph.Value) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Name)
		}
		return s
	}
	// Few values, long lists.
	g.ValueInfo = []*graph.Value{vs[0], vs[2], vs[4], vs[5]}
	g.Outputs = []*graph.Value{vs[3]}
	if got := names(unlisted(g, []*graph.Value{vs[1], vs[2], vs[3]})); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("few values: %v, want [v1]", got)
	}
	// Many values, short lists.
	g.ValueInfo = []*graph.Value{vs[4]}
	g.Outputs = []*graph.Value{vs[1]}
	if got := names(unlisted(g, slices.Clone(vs))); !slices.Equal(got, []string{"v0", "v2", "v3", "v5"}) {
		t.Errorf("many values: %v, want [v0 v2 v3 v5]", got)
	}
}
