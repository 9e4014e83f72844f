package passes

import (
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// convActivationCases are the activations the pass pairs with a Conv,
// as tests write them.
var convActivationCases = []struct {
	name   string
	opset  int64
	op     string
	params []float32
	build  func(f *fusionFixture, y *graph.Value) *graph.Node
}{
	{"Relu", 13, "Relu", nil, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("Relu", []*graph.Value{y})
	}},
	{"Sigmoid", 13, "Sigmoid", nil, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("Sigmoid", []*graph.Value{y})
	}},
	{"Tanh", 13, "Tanh", nil, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("Tanh", []*graph.Value{y})
	}},
	{"LeakyRelu", 13, "LeakyRelu", []float32{0.1}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.attrFloat(f.node("LeakyRelu", []*graph.Value{y}), "alpha", 0.1)
	}},
	{"LeakyRelu default alpha", 13, "LeakyRelu", []float32{0.01}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("LeakyRelu", []*graph.Value{y})
	}},
	{"HardSigmoid", 13, "HardSigmoid", []float32{0.3, 0.4}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.attrFloat(f.attrFloat(f.node("HardSigmoid", []*graph.Value{y}), "alpha", 0.3), "beta", 0.4)
	}},
	{"Clip opset 9", 9, "Clip", []float32{-0.5, 0.75}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.attrFloat(f.attrFloat(f.node("Clip", []*graph.Value{y}), "min", -0.5), "max", 0.75)
	}},
	{"Clip opset 13", 13, "Clip", []float32{0, 6}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("Clip", []*graph.Value{y, f.constant("lo", nil, []float32{0}), f.init("hi", nil, []float32{6})})
	}},
	{"Clip opset 13, max only", 13, "Clip", []float32{-3.4028235e38, 0.5}, func(f *fusionFixture, y *graph.Value) *graph.Node {
		return f.node("Clip", []*graph.Value{y, nil, f.init("hi", nil, []float32{0.5})})
	}},
}

// convForActivation adds a Conv with bias, pads, strides and two groups.
func (f *fusionFixture) convForActivation() *graph.Node {
	n := f.node("Conv", []*graph.Value{f.input("x", 2, 4, 6, 6), f.weight("w", 6, 2, 3, 3), f.weight("b", 6)})
	f.attrInts(n, "pads", 1, 0, 1, 0)
	f.attrInts(n, "strides", 2, 1)
	return f.attrInt(n, "group", 2)
}

func TestFuseConvActivationNotes(t *testing.T) {
	for _, a := range convActivationCases {
		t.Run(a.name, func(t *testing.T) {
			f := newFusionFixture(t, a.opset)
			conv := f.convForActivation()
			act := a.build(f, conv.Output(0))
			act.Name = ""
			f.output(act.Output(0))
			n := len(f.Graph.Nodes)
			f.fuses(fuseConvActivation, Context{}, Stats{Rewritten: 1}, -2, 2)
			if len(f.Graph.Nodes) != n || act.Graph() == nil {
				t.Errorf("the nodes changed")
			}
			if act.Name == "" || conv.Meta(metaFusedActivation) != a.op || conv.Meta(metaFusedActivationNode) != act.Name {
				t.Errorf("conv metadata %v, activation named %q", conv.Metadata, act.Name)
			}
			m, err := graph.Parse(f.Marshal(), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range m.Graph.Nodes {
				if n.OpType == "Conv" && n.Meta(metaFusedActivation) != a.op {
					t.Errorf("metadata after a save and load: %v", n.Metadata)
				}
			}
		})
	}
}

func TestFuseConvActivationFusedConv(t *testing.T) {
	for _, a := range convActivationCases {
		t.Run(a.name, func(t *testing.T) {
			f := newFusionFixture(t, a.opset)
			conv := f.convForActivation()
			conv.Name = "conv"
			act := a.build(f, conv.Output(0))
			y := act.Output(0)
			f.output(f.op("Neg", y))
			f.fuses(fuseConvActivation, Context{FusedConv: true}, Stats{Removed: 2, Added: 1}, -2, 2)
			n := y.Producer()
			if n.OpType != "FusedConv" || n.Domain != "com.microsoft" || n.Name != "conv" {
				t.Fatalf("%q is produced by %s", y.Name, n)
			}
			if got := n.AttrString("activation", ""); got != a.op {
				t.Errorf("activation %q, want %q", got, a.op)
			}
			var params []float32
			if p := n.Attr("activation_params"); p != nil {
				params = p.Floats
			}
			if !slices.Equal(params, a.params) {
				t.Errorf("activation_params %v, want %v", params, a.params)
			}
			if n.AttrInt("group", 0) != 2 || len(n.Inputs()) != 3 {
				t.Errorf("the Conv's attributes or inputs were not carried over")
			}
			if f.Model.OpsetVersion("com.microsoft") != 1 {
				t.Errorf("opsets %v", f.Model.Opsets)
			}
		})
	}
}

func TestFuseConvActivationUpdatesStaleNote(t *testing.T) {
	f := newFusionFixture(t, 13)
	conv := f.convForActivation()
	conv.SetMeta(metaFusedActivation, "Relu")
	conv.SetMeta(metaFusedActivationNode, "gone")
	act := f.node("Sigmoid", []*graph.Value{conv.Output(0)})
	f.output(act.Output(0))
	if st := f.run(fuseConvActivation, Context{}); st != (Stats{Rewritten: 1}) {
		t.Fatalf("stats %+v", st)
	}
	if conv.Meta(metaFusedActivation) != "Sigmoid" || conv.Meta(metaFusedActivationNode) != act.Name {
		t.Errorf("metadata %v", conv.Metadata)
	}
}

func TestFuseConvActivationRefuses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opset     int64
		fusedConv bool
		build     func(f *fusionFixture, conv *graph.Node)
	}{
		{"conv output read twice", 13, false, func(f *fusionFixture, conv *graph.Node) {
			f.output(f.op("Relu", conv.Output(0)))
			f.output(f.op("Neg", conv.Output(0)))
		}},
		{"conv output is a graph output", 13, true, func(f *fusionFixture, conv *graph.Node) {
			f.output(f.op("Relu", conv.Output(0)))
			f.output(conv.Output(0))
		}},
		{"Clip bound not constant", 13, false, func(f *fusionFixture, conv *graph.Node) {
			f.output(f.op("Clip", conv.Output(0), f.input("lo"), nil))
		}},
		{"Elu", 13, true, func(f *fusionFixture, conv *graph.Node) {
			f.output(f.op("Elu", conv.Output(0)))
		}},
		{"Relu in another domain", 13, true, func(f *fusionFixture, conv *graph.Node) {
			f.Model.Opsets = append(f.Model.Opsets, graph.OpsetImport{Domain: "custom", Version: 1})
			n := f.node("Relu", []*graph.Value{conv.Output(0)})
			n.Domain = "custom"
			f.output(n.Output(0))
		}},
		{"FusedConv with a weight of unknown type", 13, true, func(f *fusionFixture, conv *graph.Node) {
			w := f.value("w_in")
			f.Graph.Inputs = append(f.Graph.Inputs, w)
			conv.SetInput(1, w)
			f.output(f.op("Relu", conv.Output(0)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, tc.opset)
			tc.build(f, f.convForActivation())
			f.refuses(fuseConvActivation, Context{FusedConv: tc.fusedConv})
		})
	}
}
