package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestEliminateIdentity(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	id1 := b.node("id1", "Identity", x)
	relu := b.node("relu", "Relu", id1.Output(0))
	relu.Output(0).Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
	b.Graph.ValueInfo = append(b.Graph.ValueInfo, relu.Output(0))
	id2 := b.node("id2", "Identity", relu.Output(0))
	b.output(id2.Output(0), graph.Float, 2, 3)
	neg := b.node("neg", "Neg", id2.Output(0)) // reads the output being renamed
	b.output(neg.Output(0), graph.Float, 2, 3)

	clRewrites(t, b.Model, eliminateIdentity, Stats{Removed: 2})
	clWantOps(t, b.Graph, map[string]int{"Relu": 1, "Neg": 1})
	clWantOutputs(t, b.Graph, "id2_out", "neg_out")
	if p := b.Graph.Outputs[0].Producer(); p != relu || relu.Input(0) != x || neg.Input(0) != relu.Output(0) {
		t.Fatalf("relu should read x and produce the output id2_out")
	}
	if len(b.Graph.ValueInfo) != 0 {
		t.Errorf("the renamed output is still listed in value_info")
	}
}

func TestEliminateDropout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opset int64
		build func(b *cleanupModel, x *graph.Value) *graph.Node
	}{
		{"opset 7 with mask unused", 7, func(b *cleanupModel, x *graph.Value) *graph.Node {
			n := b.op(b.Graph, "drop", "Dropout", []*graph.Value{x}, "d", "mask")
			n.SetAttr(&graph.Attr{Name: "ratio", Type: graph.AttrFloat, Float: 0.3})
			return n
		}},
		{"opset 13 without training_mode", 13, func(b *cleanupModel, x *graph.Value) *graph.Node {
			return b.op(b.Graph, "drop", "Dropout", []*graph.Value{x, b.f32("ratio", nil, 0.5)}, "d")
		}},
		{"opset 13 training_mode constant false", 13, func(b *cleanupModel, x *graph.Value) *graph.Node {
			tm, err := graph.NewTensor("tm", graph.Bool, nil, []byte{0})
			if err != nil {
				b.T.Fatal(err)
			}
			return b.op(b.Graph, "drop", "Dropout", []*graph.Value{x, nil, b.constant("tm", tm)}, "d")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, tc.opset)
			x := b.input("x", graph.Float, 2, 3)
			relu := b.node("relu", "Relu", x)
			d := tc.build(b, relu.Output(0))
			neg := b.node("neg", "Neg", d.Output(0))
			b.output(neg.Output(0), graph.Float, 2, 3)
			clRewrites(t, b.Model, eliminateIdentity, Stats{Removed: 1})
			if neg.Input(0) != relu.Output(0) {
				t.Fatalf("neg reads %q", neg.Input(0).Name)
			}
		})
	}
}

func TestEliminateIdentityLeavesAlone(t *testing.T) {
	boolConst := func(b *cleanupModel, v byte) *graph.Value {
		tm, err := graph.NewTensor("tm", graph.Bool, nil, []byte{v})
		if err != nil {
			b.T.Fatal(err)
		}
		return b.constant("tm", tm)
	}
	cases := map[string]func(b *cleanupModel, x *graph.Value){
		"input to output": func(b *cleanupModel, x *graph.Value) {
			id := b.node("id", "Identity", x)
			b.output(id.Output(0), graph.Float, 2, 3)
		},
		"output to output": func(b *cleanupModel, x *graph.Value) {
			relu := b.node("relu", "Relu", x)
			b.output(relu.Output(0), graph.Float, 2, 3)
			id := b.node("id", "Identity", relu.Output(0))
			b.output(id.Output(0), graph.Float, 2, 3)
		},
		"initializer to output": func(b *cleanupModel, x *graph.Value) {
			id := b.node("id", "Identity", b.f32("w", []int64{2}, 1, 2))
			b.output(id.Output(0), graph.Float, 2)
		},
		"branch returns an outer value": func(b *cleanupModel, x *graph.Value) {
			relu := b.node("relu", "Relu", x)
			ifn := b.ifNode("if", b.input("cond", graph.Bool), func(sg *graph.Graph, br string) *graph.Value {
				return b.op(sg, br+"_id", "Identity", []*graph.Value{relu.Output(0)}, br+"_out").Output(0)
			})
			b.output(ifn.Output(0), graph.Float, 2, 3)
		},
		"dropout mask used": func(b *cleanupModel, x *graph.Value) {
			d := b.op(b.Graph, "drop", "Dropout", []*graph.Value{x}, "d", "mask")
			cast := b.node("cast", "Cast", d.Output(1))
			cast.SetAttr(clInt("to", int64(graph.Float)))
			add := b.node("add", "Add", d.Output(0), cast.Output(0))
			b.output(add.Output(0), graph.Float, 2, 3)
		},
		"dropout training_mode true": func(b *cleanupModel, x *graph.Value) {
			d := b.op(b.Graph, "drop", "Dropout", []*graph.Value{x, nil, boolConst(b, 1)}, "d")
			neg := b.node("neg", "Neg", d.Output(0))
			b.output(neg.Output(0), graph.Float, 2, 3)
		},
		"dropout training_mode an input": func(b *cleanupModel, x *graph.Value) {
			d := b.op(b.Graph, "drop", "Dropout", []*graph.Value{x, nil, b.input("tm", graph.Bool)}, "d")
			neg := b.node("neg", "Neg", d.Output(0))
			b.output(neg.Output(0), graph.Float, 2, 3)
		},
	}
	clAllUnchanged(t, eliminateIdentity, []int64{2, 3}, cases)
	t.Run("dropout opset 6", func(t *testing.T) {
		b := newCleanupModel(t, 6)
		x := b.input("x", graph.Float, 2, 3)
		d := b.op(b.Graph, "drop", "Dropout", []*graph.Value{x}, "d")
		d.SetAttr(clInt("is_test", 0))
		neg := b.node("neg", "Neg", d.Output(0))
		b.output(neg.Output(0), graph.Float, 2, 3)
		clUnchanged(t, b.Model, eliminateIdentity)
	})
}

// TestEliminateIdentityInBranch removes an Identity inside a subgraph
// whose input is a value of the branch itself, renaming it after the
// branch output.
func TestEliminateIdentityInBranch(t *testing.T) {
	b := newCleanupModel(t, 13)
	x := b.input("x", graph.Float, 2, 3)
	ifn := b.ifNode("if", b.input("cond", graph.Bool), func(sg *graph.Graph, br string) *graph.Value {
		op := map[string]string{"then_branch": "Relu", "else_branch": "Neg"}[br]
		n := b.op(sg, br+"_op", op, []*graph.Value{x}, br+"_t")
		return b.op(sg, br+"_id", "Identity", []*graph.Value{n.Output(0)}, br+"_out").Output(0)
	})
	b.output(ifn.Output(0), graph.Float, 2, 3)
	clRewrites(t, b.Model, eliminateIdentity, Stats{Removed: 2})
	for _, sg := range ifn.Subgraphs() {
		if len(sg.Nodes) != 1 || sg.Outputs[0].Name != sg.Name+"_out" || sg.Outputs[0].Producer() != sg.Nodes[0] {
			t.Errorf("branch %s: %d nodes, output %q", sg.Name, len(sg.Nodes), sg.Outputs[0].Name)
		}
	}
}
