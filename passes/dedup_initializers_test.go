package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestDedupInitializers(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	w1 := b.f32("w1", []int64{3}, 1, 2, 3)
	w2 := b.f32("w2", []int64{3}, 1, 2, 3)
	w3 := b.f32("w3", []int64{3}, 1, 2, 3)
	other := b.f32("other", []int64{3}, 1, 2, 4) // same shape, other bytes
	shaped := b.f32("shaped", []int64{1, 3}, 1, 2, 3)
	a1 := b.node("a1", "Add", x, w1)
	a2 := b.node("a2", "Add", a1.Output(0), w2)
	m := b.node("m", "Mul", a2.Output(0), w3)
	s := b.node("s", "Sub", m.Output(0), w2)
	d := b.node("d", "Div", s.Output(0), other)
	e := b.node("e", "Add", d.Output(0), shaped)
	b.output(e.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, dedupInitializers, Stats{Rewritten: 3})
	if len(b.Graph.Initializers) != 3 || b.Graph.Value("w2") != nil || b.Graph.Value("w3") != nil {
		t.Fatalf("%d initializers left, want w1, other, shaped", len(b.Graph.Initializers))
	}
	for _, n := range []*graph.Node{a2, m, s} {
		if n.Input(1) != w1 {
			t.Errorf("%s reads %q, want w1", n.Name, n.Input(1).Name)
		}
	}
}

func TestDedupInitializersLeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel, x *graph.Value){
		"graph input with a default": func(b *cleanupModel, x *graph.Value) {
			w1 := b.f32("w1", []int64{3}, 1, 2, 3)
			w2 := b.f32("w2", []int64{3}, 1, 2, 3)
			w2.Type = graph.TensorType(graph.Float, graph.StaticShape(3))
			b.Graph.Inputs = append(b.Graph.Inputs, w2)
			a := b.node("a", "Add", x, w1)
			b.output(b.node("s", "Sub", a.Output(0), w2).Output(0), graph.Float, 2, 3)
		},
		"duplicate is a graph output": func(b *cleanupModel, x *graph.Value) {
			w1 := b.f32("w1", []int64{3}, 1, 2, 3)
			w2 := b.f32("w2", []int64{3}, 1, 2, 3)
			a := b.node("a", "Add", x, w1)
			b.output(b.node("s", "Sub", a.Output(0), w2).Output(0), graph.Float, 2, 3)
			b.output(w2, graph.Float, 3)
		},
		"same bytes, different types": func(b *cleanupModel, x *graph.Value) {
			for i, dt := range []graph.DataType{graph.Int64, graph.Double} {
				tn, err := graph.NewTensor([]string{"i", "d"}[i], dt, []int64{2}, make([]byte, 16))
				if err != nil {
					b.T.Fatal(err)
				}
				v, err := b.Graph.AddInitializer(tn)
				if err != nil {
					b.T.Fatal(err)
				}
				cast := b.node("cast"+v.Name, "Cast", v)
				cast.SetAttr(clInt("to", int64(graph.Float)))
				b.output(cast.Output(0), graph.Float, 2)
			}
		},
		"unused duplicate": func(b *cleanupModel, x *graph.Value) {
			w1 := b.f32("w1", []int64{3}, 1, 2, 3)
			b.f32("w2", []int64{3}, 1, 2, 3)
			b.output(b.node("a", "Add", x, w1).Output(0), graph.Float, 2, 3)
		},
	}
	clAllUnchanged(t, dedupInitializers, []int64{2, 3}, cases)
}
