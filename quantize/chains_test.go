package quantize

import (
	"math"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// chainNet is a MobileNetV3/ShuffleNet-style block: a conv with HardSwish
// (x*HardSigmoid(x), opset 13), a channel shuffle
// (Reshape/Transpose/Reshape), a channel Slice, a 1x1 conv with a squeeze-excite gate
// (GlobalAveragePool, conv, HardSigmoid with PaddleOCR's alpha 0.2, Mul)
// and a last conv.
func chainNet(t testing.TB) *builder {
	b := newBuilder(t, 13)
	x := b.Input("x", 1, 4, 8, 8)
	c1 := b.paddedConv("conv1", x, b.weight("W1", 0.5, 8, 4, 3, 3), b.weight("b1", 0.2, 8))
	hs := b.Node("hs", "HardSigmoid", c1.Output(0))
	hs.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 1.0 / 6})
	hs.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: 0.5})
	hswish := b.Node("hswish", "Mul", c1.Output(0), hs.Output(0))
	r1 := b.Node("split", "Reshape", hswish.Output(0), b.Int64s("shape1", []int64{5}, 1, 2, 4, 8, 8))
	tr := b.Node("shuffle", "Transpose", r1.Output(0))
	tr.SetAttr(ints("perm", 0, 2, 1, 3, 4))
	r2 := b.Node("merge", "Reshape", tr.Output(0), b.Int64s("shape2", []int64{4}, 1, 8, 8, 8))
	cut := b.Node("cut", "Slice", r2.Output(0), b.Int64s("starts", []int64{1}, 0), b.Int64s("ends", []int64{1}, 6), b.Int64s("axes", []int64{1}, 1))
	c2 := b.Node("conv2", "Conv", cut.Output(0), b.weight("W2", 0.5, 8, 6, 1, 1), b.weight("b2", 0.2, 8))
	gap := b.Node("gap", "GlobalAveragePool", c2.Output(0))
	c3 := b.Node("conv3", "Conv", gap.Output(0), b.weight("W3", 1, 8, 8, 1, 1), b.weight("b3", 0.5, 8))
	gate := b.Node("gate", "HardSigmoid", c3.Output(0))
	gate.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 0.2})
	se := b.Node("se", "Mul", c2.Output(0), gate.Output(0))
	c4 := b.Node("conv4", "Conv", se.Output(0), b.weight("W4", 0.5, 4, 8, 1, 1))
	b.Output(c4.Output(0), 1, 4, 8, 8)
	return b
}

// floatHardSigmoids undoes integerHardSigmoid in a copy of the quantized
// model: each gate's Clip + DequantizeLinear becomes HardSigmoid on the
// input's own DequantizeLinear, the float computation the integer form
// claims to reproduce.
func floatHardSigmoids(t *testing.T, model []byte) []byte {
	t.Helper()
	m, err := graph.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	g := m.Graph
	params := map[string][2]float32{"hs": {1.0 / 6, 0.5}, "gate": {0.2, 0.5}}
	for name, p := range params {
		var clip *graph.Node
		for _, n := range g.Nodes {
			if n.Name == name && n.OpType == "Clip" {
				clip = n
			}
		}
		if clip == nil {
			t.Fatalf("no integer HardSigmoid %q", name)
		}
		xq := clip.Input(0)
		var dx *graph.Node
		for _, u := range xq.Uses() {
			if u.Node.OpType == "DequantizeLinear" {
				dx = u.Node
			}
		}
		gdq := clip.Output(0).Uses()[0].Node
		out := gdq.Output(0)
		if err := gdq.SetOutput(0, nil); err != nil {
			t.Fatal(err)
		}
		if dx == nil { // a gate's conv output had no other reader
			qn := xq.Producer()
			x, err := g.NewValue(g.UniqueName("x_dequantized"))
			if err != nil {
				t.Fatal(err)
			}
			if dx, err = g.InsertNodeBefore(gdq, "DequantizeLinear", []*graph.Value{xq, qn.Input(1), qn.Input(2)}, []*graph.Value{x}); err != nil {
				t.Fatal(err)
			}
		}
		hs, err := g.InsertNodeBefore(gdq, "HardSigmoid", []*graph.Value{dx.Output(0)}, []*graph.Value{out})
		if err != nil {
			t.Fatal(err)
		}
		hs.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: p[0]})
		hs.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: p[1]})
		if err := g.RemoveNodes([]*graph.Node{gdq, clip}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	return testgraph.Marshal(t, m)
}

// TestIntegerChains: ort keeps chainNet's activations integer from
// the first conv to the last: every conv reads and writes uint8
// (QuantizeOutputs), both HardSigmoids become Clips of uint8 tensors
// (IntegerHardSigmoid) that ORT's QLinearMul reads, and the shuffle runs
// and the Slice on uint8 data (ShareScaleOps). ORT's optimized graph at level all is
// checked for those kernels; the result is checked against the same Q/DQ
// model with float HardSigmoids (the integer form's claim: the same
// values up to float rounding) and against the float model, at levels
// disable and all.
func TestIntegerChains(t *testing.T) {
	ortenv.Require(t)
	b := chainNet(t)
	before := testgraph.Marshal(t, b.Model)
	ranges := measure(t, before, "random", data.Options{Samples: 256, Seed: 3}, activationNames(b.Model))
	rep, err := Apply(b.Model, ranges, Options{ReduceRange: boolp(true)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) > 0 {
		t.Errorf("skipped %v", rep.Skipped)
	}
	if n := countOps(b.Graph, "HardSigmoid"); n != 0 {
		t.Errorf("%d float HardSigmoid left", n)
	}
	for _, name := range []string{"split_out", "shuffle_out", "merge_out", "cut_out"} {
		if got, want := rangeOf(t, b.Graph, name), rangeOf(t, b.Graph, "hswish_out"); got != want {
			t.Errorf("%s quantized for %v, want the shuffle's input's %v", name, got, want)
		}
	}
	after := testgraph.Marshal(t, b.Model)
	again := chainNet(t)
	if _, err := Apply(again.Model, ranges, Options{ReduceRange: boolp(true)}); err != nil {
		t.Fatal(err)
	}
	if string(testgraph.Marshal(t, again.Model)) != string(after) {
		t.Error("the same model and ranges quantized twice give different bytes")
	}

	// The kernels ORT picks at level all.
	counts := ortOps(t, after)
	t.Logf("ORT level all kernels: %v", counts)
	for op, want := range map[string]int{"QLinearConv": 3, "QLinearMul": 2, "QLinearGlobalAveragePool": 1} {
		if counts[op] != want {
			t.Errorf("ORT made %d %s, want %d (kernels %v)", counts[op], op, want, counts)
		}
	}
	// Float: only the last conv (its output is the model's; its input
	// and weight dequantized) and the input's one QuantizeLinear.
	for op, want := range map[string]int{"HardSigmoid": 0, "Mul": 0, "GlobalAveragePool": 0, "QuantizeLinear": 1, "Conv": 1, "DequantizeLinear": 2, "Slice": 1} {
		if counts[op] != want {
			t.Errorf("ORT runs %d %s, want %d (kernels %v)", counts[op], op, want, counts)
		}
	}

	ref := floatHardSigmoids(t, after)
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		res, err := compare.Models(compare.Options{ModelA: "float HardSigmoid", AInMemory: graph.Serialized{Bytes: ref}, ModelB: "integer", BInMemory: graph.Serialized{Bytes: after},
			Data: "random", DataOpts: data.Options{Samples: 16, Seed: 5, High: 1}, Session: ort.Options{Level: level}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Outputs {
			t.Logf("level %v, integer vs float HardSigmoid: max abs %.3g (max |ref| %.3f)", level, o.MaxAbs, o.MaxRef)
			// Exact on these inputs; a float rounding tie could move one
			// element by one step.
			if o.MaxAbs != 0 {
				t.Errorf("level %v: the integer HardSigmoids differ from float ones by %.3g", level, o.MaxAbs)
			}
		}
		if err := difftest.Compare(before, after, difftest.Options{Atol: 0.1, Rtol: 0.05, Level: level, DataOpts: data.Options{Samples: 8, Seed: 4, High: 1}}); err != nil {
			t.Errorf("level %v vs float: %v", level, err)
		}
	}
}

// rangeOf is the range the activation Q/DQ of value name stands for.
func rangeOf(t *testing.T, g *graph.Graph, name string) [2]float64 {
	t.Helper()
	for _, n := range g.Nodes {
		if n.OpType != "QuantizeLinear" || n.Input(0).Name != name {
			continue
		}
		s, _ := n.Input(1).Const.Float32s()
		zb, _ := n.Input(2).Const.Bytes()
		scale, z := float64(s[0]), float64(zb[0])
		return [2]float64{math.Round(-z*scale*1e4) / 1e4, math.Round((255-z)*scale*1e4) / 1e4}
	}
	t.Fatalf("%s has no QuantizeLinear", name)
	return [2]float64{}
}
