package passes

import (
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testgraph"
)

func TestConstantsToInitializers(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 1, 4)
	c1 := b.constant("c1", testgraph.Float32Tensor(t, []int64{4}, 1, 2, 3, 4))
	add := b.node("add", "Add", x, c1)
	c2 := b.op(b.Graph, "c2_node", "Constant", nil, "c2").Output(0)
	c2.Producer().SetAttr(&graph.Attr{Name: "value_float", Type: graph.AttrFloat, Float: 0.5})
	c2.Type = graph.TensorType(graph.Float, graph.Shape{}) // declared, and agreeing
	b.Graph.ValueInfo = append(b.Graph.ValueInfo, c2)
	mul := b.node("mul", "Mul", add.Output(0), c2)
	c3 := b.op(b.Graph, "c3_node", "Constant", nil, "c3").Output(0)
	c3.Producer().SetAttr(clInts("value_ints", 2, 2))
	c4 := b.op(b.Graph, "c4_node", "Constant", nil, "c4").Output(0)
	c4.Producer().SetAttr(&graph.Attr{Name: "value_floats", Type: graph.AttrFloats, Floats: []float32{1, -1}})
	c5 := b.op(b.Graph, "c5_node", "Constant", nil, "c5").Output(0)
	c5.Producer().SetAttr(clInt("value_int", 0))
	r := b.node("reshape", "Reshape", mul.Output(0), c3)
	sub := b.node("sub", "Sub", r.Output(0), c4)
	g := b.node("gather", "Gather", sub.Output(0), c5)
	b.output(g.Output(0), graph.Float, 2)

	clRewrites(t, b.Model, constantsToInitializers, Stats{Removed: 5})
	clWantOps(t, b.Graph, map[string]int{"Add": 1, "Mul": 1, "Reshape": 1, "Sub": 1, "Gather": 1})
	var names []string
	for _, v := range b.Graph.Initializers {
		names = append(names, v.Name)
		if v.Const.Name != v.Name || b.Graph.Value(v.Name) != v {
			t.Errorf("initializer %q: tensor called %q", v.Name, v.Const.Name)
		}
	}
	if !slices.Equal(names, []string{"c1", "c2", "c3", "c4", "c5"}) {
		t.Errorf("initializers %v", names)
	}
	if d := b.Graph.Value("c3").Const.Dims; !slices.Equal(d, []int64{2}) {
		t.Errorf("value_ints became dims %v", d)
	}
	if d := b.Graph.Value("c2").Const.Dims; len(d) != 0 {
		t.Errorf("value_float became dims %v, want a scalar", d)
	}
	clUnchanged(t, b.Model, constantsToInitializers)
}

func TestConstantsToInitializersLeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel){
		"graph output": func(b *cleanupModel) {
			c := b.constant("c", testgraph.Float32Tensor(b.T, []int64{2}, 1, 2))
			b.output(c, graph.Float, 2)
		},
		"string value": func(b *cleanupModel) {
			n := b.op(b.Graph, "s_node", "Constant", nil, "s")
			n.SetAttr(&graph.Attr{Name: "value_strings", Type: graph.AttrStrings, Strings: [][]byte{[]byte("a")}})
			id := b.node("id", "Identity", n.Output(0))
			b.output(id.Output(0), graph.String, 1)
		},
		"declared type disagrees": func(b *cleanupModel) {
			c := b.constant("c", testgraph.Float32Tensor(b.T, []int64{2}, 1, 2))
			c.Type = graph.TensorType(graph.Float, graph.StaticShape(3))
			b.Graph.ValueInfo = append(b.Graph.ValueInfo, c)
			n := b.node("neg", "Neg", c)
			b.output(n.Output(0), graph.Float, 2)
		},
		"IR version 3": func(b *cleanupModel) {
			b.Model.IRVersion = 3
			c := b.constant("c", testgraph.Float32Tensor(b.T, []int64{2}, 1, 2))
			n := b.node("neg", "Neg", c)
			b.output(n.Output(0), graph.Float, 2)
		},
		"subgraph": func(b *cleanupModel) {
			ifn := b.ifNode("if", b.input("cond", graph.Bool), func(sg *graph.Graph, br string) *graph.Value {
				n := b.op(sg, br+"_c", "Constant", nil, br+"_out")
				n.SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: testgraph.Float32Tensor(b.T, []int64{2, 3}, 1, 2, 3, 4, 5, 6)})
				return n.Output(0)
			})
			b.output(ifn.Output(0), graph.Float, 2, 3)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := newCleanupModel(t, 13)
			build(b)
			clUnchanged(t, b.Model, constantsToInitializers)
		})
	}
}
