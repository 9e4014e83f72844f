package graph_test

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// TestValueTable holds values of two graphs made apart, whose IDs
// collide (0, 1, ... in each), exactly: a value whose slot another holds
// goes to the map.
func TestValueTable(t *testing.T) {
	var vs []*graph.Value
	for _, g := range []*graph.Graph{graph.NewGraph("a"), graph.NewGraph("b")} {
		for i := range 3 {
			v, err := g.NewValue(fmt.Sprintf("%s%d", g.Name, i))
			if err != nil {
				t.Fatal(err)
			}
			if v.ID() != i {
				t.Fatalf("%s: ID %d, want %d", v.Name, v.ID(), i)
			}
			vs = append(vs, v)
		}
	}
	tab := graph.NewValueTable[int](1) // grows past the size it was given
	for i, v := range vs {
		tab.Set(v, i)
	}
	tab.Set(vs[4], 40)
	want := map[string]int{"a0": 0, "a1": 1, "a2": 2, "b0": 3, "b1": 40, "b2": 5}
	check := func() {
		t.Helper()
		if tab.Len() != len(want) {
			t.Errorf("Len %d, want %d", tab.Len(), len(want))
		}
		for _, v := range vs {
			x, ok := tab.Lookup(v)
			if w, in := want[v.Name]; ok != in || x != w {
				t.Errorf("%s: %d %v, want %d %v", v.Name, x, ok, w, in)
			}
		}
		seen := 0
		tab.All(func(v *graph.Value, x int) {
			seen++
			if x != want[v.Name] {
				t.Errorf("All: %s %d, want %d", v.Name, x, want[v.Name])
			}
		})
		if seen != len(want) {
			t.Errorf("All visited %d, want %d", seen, len(want))
		}
	}
	check()
	// b1 (in the map) set again is not counted twice.
	tab.Set(vs[4], 41)
	want["b1"] = 41
	check()
}

// TestValueIDsCountPerModel numbers the values of a model's subgraphs
// with the main graph's counter, values made later too.
func TestValueIDsCountPerModel(t *testing.T) {
	m := parseProto(t, ifModelProto())
	if _, err := m.Graph.NewValue("late"); err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, v := range g.Values() {
			if other, dup := seen[v.ID()]; dup {
				t.Errorf("%s and %s share ID %d", v.Name, other, v.ID())
			}
			seen[v.ID()] = v.Name
			if v.ID() >= m.Graph.ValueIDs() {
				t.Errorf("%s: ID %d not below ValueIDs %d", v.Name, v.ID(), m.Graph.ValueIDs())
			}
		}
	})
}
