package passes

import (
	"bytes"
	"math"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/testgraph"
)

// What the tests of the cleanup passes share: a builder of small models
// and the two checks every case ends with.

// cleanupModel builds a small model node by node.
type cleanupModel struct{ *testgraph.Builder }

func newCleanupModel(t testing.TB, opset int64) *cleanupModel {
	return &cleanupModel{testgraph.New(t, "test", opset)}
}

// value returns a new value of g.
func (b *cleanupModel) value(g *graph.Graph, name string) *graph.Value {
	b.T.Helper()
	v, err := g.NewValue(name)
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// input adds a graph input with a static (or, for -1 dims, symbolic) shape.
func (b *cleanupModel) input(name string, dt graph.DataType, dims ...int64) *graph.Value {
	v := b.value(b.Graph, name)
	v.Type = graph.TensorType(dt, clShape(dims))
	b.Graph.Inputs = append(b.Graph.Inputs, v)
	return v
}

// output declares v a graph output of the given type.
func (b *cleanupModel) output(v *graph.Value, dt graph.DataType, dims ...int64) {
	v.Type = graph.TensorType(dt, clShape(dims))
	b.Graph.Outputs = append(b.Graph.Outputs, v)
}

func clShape(dims []int64) graph.Shape {
	s := make(graph.Shape, len(dims))
	for i, d := range dims {
		s[i] = graph.StaticDim(d)
		if d < 0 {
			s[i] = graph.SymbolicDim("d" + string(rune('a'+i)))
		}
	}
	return s
}

// op adds node name to g computing op over ins into new values named outs.
func (b *cleanupModel) op(g *graph.Graph, name, op string, ins []*graph.Value, outs ...string) *graph.Node {
	b.T.Helper()
	var ovs []*graph.Value
	for _, o := range outs {
		ovs = append(ovs, b.value(g, o))
	}
	n, err := g.AddNode(op, ins, ovs)
	if err != nil {
		b.T.Fatal(err)
	}
	n.Name = name
	return n
}

// node adds a main-graph node with one output called name+"_out".
func (b *cleanupModel) node(name, op string, ins ...*graph.Value) *graph.Node {
	return b.op(b.Graph, name, op, ins, name+"_out")
}

// f32 adds a float32 initializer.
func (b *cleanupModel) f32(name string, dims []int64, vals ...float32) *graph.Value {
	b.T.Helper()
	return b.Floats(name, dims, vals...)
}

// i64 adds a 1-D int64 initializer.
func (b *cleanupModel) i64(name string, vals ...int64) *graph.Value {
	b.T.Helper()
	return b.Int64s(name, []int64{int64(len(vals))}, vals...)
}

// constant adds a Constant node holding t; its output is name.
func (b *cleanupModel) constant(name string, t *graph.Tensor) *graph.Value {
	n := b.op(b.Graph, name+"_node", "Constant", nil, name)
	n.SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: t})
	return n.Output(0)
}

// subgraph attaches an empty subgraph to n as attribute attr.
func (b *cleanupModel) subgraph(n *graph.Node, attr string) *graph.Graph {
	sg := graph.NewGraph(attr)
	sg.Parent, sg.Owner = n.Graph(), n
	n.SetAttr(&graph.Attr{Name: attr, Type: graph.AttrGraph, Graph: sg})
	return sg
}

// ifNode adds If(cond) with output name; branch fills each branch and
// returns what it yields, declared float32[2,3].
func (b *cleanupModel) ifNode(name string, cond *graph.Value, branch func(sg *graph.Graph, br string) *graph.Value) *graph.Node {
	ifn := b.op(b.Graph, name, "If", []*graph.Value{cond}, name+"_out")
	for _, br := range []string{"then_branch", "else_branch"} {
		sg := b.subgraph(ifn, br)
		out := branch(sg, br)
		out.Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
		sg.Outputs = append(sg.Outputs, out)
	}
	return ifn
}

// wantAllUnchanged builds each case on a model with input x of the given
// dims and wants p to leave it alone.
func clAllUnchanged(t *testing.T, p *Pass, dims []int64, cases map[string]func(b *cleanupModel, x *graph.Value)) {
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := newCleanupModel(t, 13)
			build(b, b.input("x", graph.Float, dims...))
			clUnchanged(t, b.Model, p)
		})
	}
}

func clInts(name string, vals ...int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInts, Ints: vals}
}

func clInt(name string, v int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInt, Int: v}
}

func clStr(name, v string) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrString, String: []byte(v)}
}

// runCleanup verifies m, runs p once, verifies again and returns what p
// reported with the model before and after.
func clRun(t testing.TB, m *graph.Model, p *Pass) (st Stats, before, after []byte) {
	t.Helper()
	if err := m.Verify(); err != nil {
		t.Fatalf("test model is invalid: %v", err)
	}
	before = testgraph.Marshal(t, m)
	st, err := (&Context{Model: m, FoldSizeLimit: DefaultFoldSizeLimit}).runPass(p)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("%s broke the model: %v", p.Name, err)
	}
	return st, before, testgraph.Marshal(t, m)
}

// wantRewrite runs p on m, wants exactly the stats want, and has ONNX
// Runtime check that the outputs did not change.
func clRewrites(t testing.TB, m *graph.Model, p *Pass, want Stats) {
	t.Helper()
	st, before, after := clRun(t, m, p)
	if st != want {
		t.Fatalf("%s: stats %+v, want %+v", p.Name, st, want)
	}
	if bytes.Equal(before, after) {
		t.Fatalf("%s reported changes but the model is unchanged", p.Name)
	}
	difftest.Check(t, before, after, clDataOpts(m))
}

// clDataOpts fixes the symbolic dims of m's inputs at 2 and feeds two
// batches of random data.
func clDataOpts(m *graph.Model) difftest.Options {
	opts := difftest.Options{DataOpts: data.Options{Spec: data.Spec{Shapes: map[string][]int64{}}}}
	batch := 0
	for _, in := range m.Graph.Inputs {
		if in.Const != nil || in.Type == nil || in.Type.Shape == nil {
			continue
		}
		dims := in.Type.Shape.Dims()
		for i, d := range dims {
			if d < 0 {
				dims[i] = 2
			}
		}
		opts.DataOpts.Shapes[in.Name] = dims
		if len(dims) > 0 && batch == 0 {
			batch = int(dims[0])
		}
	}
	opts.DataOpts.Samples = 2 * max(batch, 1)
	return opts
}

// wantUnchanged runs p on m and wants no stats and an identical model.
func clUnchanged(t testing.TB, m *graph.Model, p *Pass) {
	t.Helper()
	st, before, after := clRun(t, m, p)
	if st != (Stats{}) {
		t.Fatalf("%s: stats %+v on a model it must leave alone", p.Name, st)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("%s changed a model it must leave alone", p.Name)
	}
}

// clWantOps fails unless g has exactly the given operator counts.
func clWantOps(t testing.TB, g *graph.Graph, want map[string]int) {
	t.Helper()
	got := testgraph.OpCounts(g)
	if len(got) != len(want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	for op, n := range want {
		if got[op] != n {
			t.Fatalf("ops %v, want %v", got, want)
		}
	}
}

// clWantOutputs fails unless the main graph's outputs are named names.
func clWantOutputs(t testing.TB, g *graph.Graph, names ...string) {
	t.Helper()
	if len(g.Outputs) != len(names) {
		t.Fatalf("%d outputs, want %d", len(g.Outputs), len(names))
	}
	for i, o := range g.Outputs {
		if o.Name != names[i] {
			t.Fatalf("output %d is %q, want %q", i, o.Name, names[i])
		}
	}
}

var clMaxInt64 = int64(math.MaxInt64)
