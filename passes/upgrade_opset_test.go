package passes

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// upgradeCase builds a one-op model at opset from with input x.
type upgradeCase struct {
	name  string
	from  int64
	dims  []int64
	build func(b *cleanupModel, x *graph.Value) *graph.Value
	want  string // an op the upgraded model must contain
}

// oneNodeCase is a case's build for one node, op, reading x, with attrs.
func oneNodeCase(name, op string, attrs ...*graph.Attr) func(b *cleanupModel, x *graph.Value) *graph.Value {
	return func(b *cleanupModel, x *graph.Value) *graph.Value {
		n := b.node(name, op, x)
		for _, a := range attrs {
			n.SetAttr(a)
		}
		return n.Output(0)
	}
}

func TestUpgradeOpsetOps(t *testing.T) {
	cases := []upgradeCase{
		{"clip min max", 9, []int64{2, 3, 4}, oneNodeCase("clip", "Clip", &graph.Attr{Name: "min", Type: graph.AttrFloat, Float: 0.2}, &graph.Attr{Name: "max", Type: graph.AttrFloat, Float: 0.7}), "Clip"},
		{"clip max only", 9, []int64{2, 3, 4}, oneNodeCase("clip", "Clip", &graph.Attr{Name: "max", Type: graph.AttrFloat, Float: 0.5}), "Clip"},
		{"pad constant value", 9, []int64{1, 2, 3, 4}, oneNodeCase("pad", "Pad", clInts("pads", 0, 0, 1, 2, 0, 0, 2, 1), &graph.Attr{Name: "value", Type: graph.AttrFloat, Float: 1.5}), "Pad"},
		{"pad reflect", 9, []int64{1, 2, 4, 4}, oneNodeCase("pad", "Pad", clInts("pads", 0, 0, 1, 2, 0, 0, 2, 1), clStr("mode", "reflect")), "Pad"},
		{"squeeze unsqueeze", 11, []int64{2, 1, 3}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			s := b.node("sq", "Squeeze", x)
			s.SetAttr(clInts("axes", 1))
			u := b.node("usq", "Unsqueeze", s.Output(0))
			u.SetAttr(clInts("axes", 0, -1))
			return u.Output(0)
		}, "Unsqueeze"},
		{"reduce sum", 9, []int64{2, 3, 4}, oneNodeCase("rs", "ReduceSum", clInts("axes", 1, 2), clInt("keepdims", 0)), "ReduceSum"},
		{"split", 9, []int64{2, 6}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			n := b.op(b.Graph, "split", "Split", []*graph.Value{x}, "s0", "s1")
			n.SetAttr(clInt("axis", 1))
			n.SetAttr(clInts("split", 2, 4))
			r := b.node("red", "ReduceSum", n.Output(1))
			r.SetAttr(clInts("axes", 1))
			a := b.node("add", "Add", n.Output(0), r.Output(0))
			return a.Output(0)
		}, "Split"},
		{"slice", 9, []int64{3, 8, 5}, oneNodeCase("slice", "Slice", clInts("starts", 1, 2), clInts("ends", 7, 1000), clInts("axes", 1, 2)), "Slice"},
		{"slice no axes", 9, []int64{3, 8}, oneNodeCase("slice", "Slice", clInts("starts", 1, 0), clInts("ends", 3, -2)), "Slice"},
		{"softmax last axis", 9, []int64{2, 3, 5}, oneNodeCase("sm", "Softmax", clInt("axis", 2)), "Softmax"},
		{"softmax default axis rank 4", 9, []int64{2, 3, 2, 5}, oneNodeCase("sm", "Softmax"), "Flatten"},
		{"logsoftmax axis 2 rank 4 opset 11", 11, []int64{2, 3, 2, 5}, oneNodeCase("lsm", "LogSoftmax", clInt("axis", 2)), "Flatten"},
		{"hardmax axis 1", 9, []int64{2, 3, 4}, oneNodeCase("hm", "Hardmax", clInt("axis", 1)), "Reshape"},
		{"softmax unknown rank", 9, []int64{2, 3, 4}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			// A Reshape to a runtime shape hides the rank from inference.
			sh := b.node("shape", "Shape", x)
			r := b.node("reshape", "Reshape", x, sh.Output(0))
			n := b.node("sm", "Softmax", r.Output(0))
			n.SetAttr(clInt("axis", 1))
			return n.Output(0)
		}, "Flatten"},
		{"dropout", 11, []int64{2, 3}, oneNodeCase("drop", "Dropout", &graph.Attr{Name: "ratio", Type: graph.AttrFloat, Float: 0.3}), "Dropout"},
		{"upsample nearest", 9, []int64{1, 2, 3, 4}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			n := b.node("up", "Upsample", x, b.f32("scales", []int64{4}, 1, 1, 2, 3))
			return n.Output(0)
		}, "Resize"},
		{"upsample linear", 9, []int64{1, 2, 3, 4}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			n := b.node("up", "Upsample", x, b.f32("scales", []int64{4}, 1, 1, 2, 2))
			n.SetAttr(clStr("mode", "linear"))
			return n.Output(0)
		}, "Resize"},
		{"resize 10 linear downsample", 10, []int64{1, 2, 6, 8}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			n := b.node("rs", "Resize", x, b.f32("scales", []int64{4}, 1, 1, 0.5, 0.75))
			n.SetAttr(clStr("mode", "linear"))
			return n.Output(0)
		}, "Resize"},
		{"resize 10 nearest", 10, []int64{1, 2, 3, 4}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			n := b.node("rs", "Resize", x, b.f32("scales", []int64{4}, 1, 1, 2.5, 1.5))
			return n.Output(0)
		}, "Resize"},
		{"unchanged ops", 9, []int64{1, 3, 4, 4}, func(b *cleanupModel, x *graph.Value) *graph.Value {
			c := b.node("conv", "Conv", x, b.f32("w", []int64{2, 3, 1, 1}, 1, 2, 3, -1, 0.5, 0.25))
			r := b.node("relu", "Relu", c.Output(0))
			h := b.node("hs", "HardSigmoid", r.Output(0))
			g := b.node("gap", "GlobalAveragePool", h.Output(0))
			f := b.node("flat", "Flatten", g.Output(0))
			return f.Output(0)
		}, "Flatten"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, tc.from)
			b.Model.IRVersion = irForOpset(tc.from)
			out := tc.build(b, b.input("x", graph.Float, tc.dims...))
			b.Graph.Outputs = append(b.Graph.Outputs, out)
			if err := b.Model.Verify(); err != nil {
				t.Fatal(err)
			}
			before := testgraph.Marshal(t, b.Model)
			changed, err := UpgradeOpset(b.Model, 13)
			if err != nil {
				t.Fatal(err)
			}
			if b.Model.OpsetVersion("") != 13 {
				t.Fatalf("opset %d after upgrade", b.Model.OpsetVersion(""))
			}
			if tc.name != "unchanged ops" && changed == 0 {
				t.Fatal("nothing changed")
			}
			if testgraph.OpCounts(b.Graph)[tc.want] == 0 {
				t.Fatalf("no %s in %v", tc.want, testgraph.OpCounts(b.Graph))
			}
			for _, n := range b.Graph.Nodes {
				for _, a := range n.Attrs {
					if (n.OpType == "Clip" || n.OpType == "Pad" || n.OpType == "Slice") && a.Type != graph.AttrString {
						t.Fatalf("%s keeps attribute %s", n, a.Name)
					}
				}
			}
			after := testgraph.Marshal(t, b.Model)
			opts := difftest.Options{Atol: 1e-6, Rtol: 1e-6,
				DataOpts: data.Options{High: 1, Samples: 2 * int(tc.dims[0]), Spec: data.Spec{Shapes: map[string][]int64{"x": tc.dims}}}}
			difftest.Check(t, before, after, opts)
		})
	}
}

func TestUpgradeOpsetRefuses(t *testing.T) {
	for name, build := range map[string]func(b *cleanupModel, x *graph.Value) *graph.Value{
		"unknown op": oneNodeCase("topk", "TopK", clInt("k", 1)),
		"upsample nearest downsample": func(b *cleanupModel, x *graph.Value) *graph.Value {
			return b.node("up", "Upsample", x, b.f32("scales", []int64{2}, 1, 0.5)).Output(0)
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newCleanupModel(t, 9)
			x := b.input("x", graph.Float, 2, 4)
			pre := b.node("relu", "Relu", x)
			pre.SetAttr(clStr("dummy", "")) // not checked; makes the model distinct
			pre.Attrs = nil
			out := build(b, pre.Output(0))
			b.Graph.Outputs = append(b.Graph.Outputs, out)
			before := testgraph.Marshal(t, b.Model)
			_, err := UpgradeOpset(b.Model, 13)
			if err == nil {
				t.Fatal("upgrade accepted a node it cannot convert")
			}
			if !strings.Contains(err.Error(), "node \"") {
				t.Fatalf("error does not name the node: %v", err)
			}
			if string(before) != string(testgraph.Marshal(t, b.Model)) {
				t.Fatal("a refused upgrade changed the model")
			}
		})
	}
}

func TestUpgradeOpsetSubgraph(t *testing.T) {
	b := newCleanupModel(t, 9)
	b.Model.IRVersion = 4
	x := b.input("x", graph.Float, 2, 3)
	cond := b.input("c", graph.Bool)
	ifn := b.ifNode("if", cond, func(sg *graph.Graph, br string) *graph.Value {
		n := b.op(sg, br+"_clip", "Clip", []*graph.Value{x}, br+"_out")
		n.SetAttr(&graph.Attr{Name: "max", Type: graph.AttrFloat, Float: 0.5})
		if br == "else_branch" {
			n.SetAttr(&graph.Attr{Name: "min", Type: graph.AttrFloat, Float: 0.25})
		}
		return n.Output(0)
	})
	ifn.Output(0).Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
	b.Graph.Outputs = append(b.Graph.Outputs, ifn.Output(0))
	if _, err := UpgradeOpset(b.Model, 13); err != nil {
		t.Fatal(err)
	}
	for _, sg := range ifn.Subgraphs() {
		if c := sg.Nodes[0]; len(c.Attrs) != 0 || len(c.Inputs()) != 3 {
			t.Fatalf("%s: attrs %d inputs %d", c, len(c.Attrs), len(c.Inputs()))
		}
	}
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
}

// maxDiff runs before and after in ORT on random data and returns the
// largest |a-b| and whether every element is within atol+rtol|a|.
func maxDiff(t *testing.T, before, after []byte, dims []int64, atol, rtol float64) (float64, bool) {
	mb, err := graph.Parse(before, "")
	if err != nil {
		t.Fatal(err)
	}
	ma, err := graph.Parse(after, "")
	if err != nil {
		t.Fatal(err)
	}
	sess := func(m *graph.Model, b []byte) *ort.Session {
		ins, outs := ort.Interface(m)
		s, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, ort.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sb, sa := sess(mb, before), sess(ma, after)
	defer sb.Close()
	defer sa.Close()
	src, err := data.Open("random", data.GraphInputs(mb.Graph), data.Options{High: 1, Samples: 4, Spec: data.Spec{Shapes: map[string][]int64{"x": dims}}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	worst, ok := 0.0, true
	for {
		bt, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want, err := sb.Run(bt.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sa.Run(bt.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w, _ := want[i].Float32s()
			g, _ := got[i].Float32s()
			if len(w) != len(g) {
				t.Fatalf("output %d: %d elements became %d", i, len(w), len(g))
			}
			for j := range w {
				d := math.Abs(float64(w[j]) - float64(g[j]))
				worst = max(worst, d)
				if d > atol+rtol*math.Abs(float64(w[j])) {
					ok = false
				}
			}
		}
	}
	return worst, ok
}

func TestUpgradeOpsetRealModels(t *testing.T) {
	dir := testenv.Data(t, "ocr-models")
	ortenv.Require(t)
	for _, tc := range []struct {
		file string
		from int64
		dims []int64
	}{
		{"ch_ppocr_mobile_v2.0_cls_infer.onnx", 9, []int64{1, 3, 48, 192}},
		{"ch_PP-OCRv4_rec_infer.onnx", 9, []int64{1, 3, 48, 320}},
		{"ch_PP-OCRv4_det_infer.onnx", 11, []int64{1, 3, 64, 64}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			before, m := testgraph.ReadModel(t, dir+"/"+tc.file)
			if got := m.OpsetVersion(""); got != tc.from {
				t.Fatalf("opset %d, want %d", got, tc.from)
			}
			changed, err := UpgradeOpset(m, 13)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Verify(); err != nil {
				t.Fatal(err)
			}
			if m.OpsetVersion("") != 13 || m.IRVersion < 7 {
				t.Fatalf("opset %d, IR version %d after upgrade", m.OpsetVersion(""), m.IRVersion)
			}
			after := testgraph.Marshal(t, m)
			worst, ok := maxDiff(t, before, after, tc.dims, 1e-5, 1e-4)
			ops := map[string]int{}
			m.Graph.Walk(func(g *graph.Graph) {
				for _, n := range g.Nodes {
					if n.OpType == "Softmax" || n.OpType == "Flatten" || n.OpType == "Clip" || n.OpType == "Squeeze" || n.OpType == "Slice" {
						ops[n.OpType]++
					}
				}
			})
			t.Logf("%s: opset %d -> 13, %d nodes changed, ops %v, max |diff| %.3g", tc.file, tc.from, changed, ops, worst)
			if !ok {
				t.Fatalf("outputs differ beyond atol 1e-5 rtol 1e-4 (max %g)", worst)
			}
			difftest.Check(t, before, after, difftest.Options{DataOpts: data.Options{High: 1, Samples: 4, Spec: data.Spec{Shapes: map[string][]int64{"x": tc.dims}}}})
		})
	}
}

// TestUpgradeOpsetPass runs upgrade-opset from the table, as --passes
// upgrade-opset does: the model moves to opset 13 with its Clip rewritten,
// and a second round finds nothing to do.
func TestUpgradeOpsetPass(t *testing.T) {
	b := newCleanupModel(t, 9)
	n := b.node("clip", "Clip", b.input("x", graph.Float, 2, 3))
	n.SetAttr(&graph.Attr{Name: "max", Type: graph.AttrFloat, Float: 0.5})
	b.Graph.Outputs = append(b.Graph.Outputs, n.Output(0))
	pipeline, err := Select(0, []string{"upgrade-opset"}, nil)
	if err != nil || len(pipeline) != 1 {
		t.Fatalf("select: %v %v", pipeline, err)
	}
	rep, err := Run(b.Model, pipeline, Options{VerifyEach: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Model.OpsetVersion("") != DefaultUpgradeOpset || rep.Passes[0].Stats.Rewritten == 0 || rep.Rounds != 2 {
		t.Fatalf("opset %d, report %+v, %d rounds", b.Model.OpsetVersion(""), rep.Passes[0], rep.Rounds)
	}
}
