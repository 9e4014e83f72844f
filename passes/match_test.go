package passes

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// fusionFixture is testgraph's builder with what the fusion tests add:
// unique value names, random weights, Constant nodes, outputs of unknown
// shape. Its helpers are methods so that they cannot collide with other
// test files' helpers.
type fusionFixture struct {
	*testgraph.Builder
	rng *rand.Rand
}

func newFusionFixture(t testing.TB, opset int64) *fusionFixture {
	return &fusionFixture{Builder: testgraph.New(t, "fixture", opset), rng: rand.New(rand.NewPCG(1, uint64(opset)))}
}

// input declares a float32 graph input of static shape.
func (f *fusionFixture) input(name string, dims ...int64) *graph.Value {
	v := f.value(name)
	v.Type = graph.TensorType(graph.Float, graph.StaticShape(dims...))
	f.Graph.Inputs = append(f.Graph.Inputs, v)
	return v
}

func (f *fusionFixture) value(name string) *graph.Value {
	f.T.Helper()
	return f.Value(f.Graph.UniqueName(name))
}

// output makes v a graph output of type float32 (shape left unknown).
func (f *fusionFixture) output(v *graph.Value) {
	v.Type = graph.TensorType(graph.Float, nil)
	f.Graph.Outputs = append(f.Graph.Outputs, v)
}

// random returns n values uniform in [lo, hi).
func (f *fusionFixture) random(n int64, lo, hi float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = lo + (hi-lo)*f.rng.Float32()
	}
	return out
}

func (f *fusionFixture) tensor(name string, dims []int64, vals []float32) *graph.Tensor {
	f.T.Helper()
	t, err := graph.NewFloat32Tensor(name, dims, vals)
	if err != nil {
		f.T.Fatal(err)
	}
	return t
}

// init adds a float32 initializer.
func (f *fusionFixture) init(name string, dims []int64, vals []float32) *graph.Value {
	f.T.Helper()
	return f.Floats(f.Graph.UniqueName(name), dims, vals...)
}

// weight adds an initializer of random values in [-1, 1).
func (f *fusionFixture) weight(name string, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return f.init(name, dims, f.random(n, -1, 1))
}

// constant adds a Constant node holding vals (the PaddleOCR way).
func (f *fusionFixture) constant(name string, dims []int64, vals []float32) *graph.Value {
	out := f.value(name)
	n := f.node("Constant", nil, out)
	n.SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: f.tensor(out.Name, dims, vals)})
	return out
}

// node adds op reading ins and writing outs (a fresh value when none).
func (f *fusionFixture) node(op string, ins []*graph.Value, outs ...*graph.Value) *graph.Node {
	f.T.Helper()
	if len(outs) == 0 {
		outs = []*graph.Value{f.value(op + "_out")}
	}
	n, err := f.Graph.AddNode(op, ins, outs)
	if err != nil {
		f.T.Fatal(err)
	}
	n.Name = outs[0].Name + "_node"
	return n
}

// op is node returning its output.
func (f *fusionFixture) op(op string, ins ...*graph.Value) *graph.Value {
	return f.node(op, ins).Output(0)
}

func (f *fusionFixture) attrInt(n *graph.Node, name string, v int64) *graph.Node {
	n.SetAttr(&graph.Attr{Name: name, Type: graph.AttrInt, Int: v})
	return n
}

func (f *fusionFixture) attrFloat(n *graph.Node, name string, v float32) *graph.Node {
	n.SetAttr(&graph.Attr{Name: name, Type: graph.AttrFloat, Float: v})
	return n
}

func (f *fusionFixture) attrInts(n *graph.Node, name string, v ...int64) *graph.Node {
	n.SetAttr(&graph.Attr{Name: name, Type: graph.AttrInts, Ints: v})
	return n
}

func (f *fusionFixture) ops() map[string]int {
	return testgraph.OpCounts(f.Graph)
}

// run applies p to the fixture's model, checking Verify before and after.
func (f *fusionFixture) run(p *Pass, ctx Context) Stats {
	f.T.Helper()
	if err := f.Model.Verify(); err != nil {
		f.T.Fatalf("fixture invalid before %s: %v", p.Name, err)
	}
	ctx.Model = f.Model
	st, err := ctx.runPass(p)
	if err != nil {
		f.T.Fatalf("%s: %v", p.Name, err)
	}
	if err := f.Model.Verify(); err != nil {
		f.T.Fatalf("%s broke the model: %v", p.Name, err)
	}
	return st
}

// runTwice runs p, wants the stats want and a second run to change
// nothing, and returns the model before and after the first run: what
// fuses and fusesInORT then compare in ONNX Runtime.
func (f *fusionFixture) runTwice(p *Pass, ctx Context, want Stats) (before, after []byte) {
	f.T.Helper()
	before = f.Marshal()
	if st := f.run(p, ctx); st != want {
		f.T.Fatalf("%s: stats %+v, want %+v", p.Name, st, want)
	}
	after = f.Marshal()
	if st := f.run(p, ctx); st.Changed() {
		f.T.Errorf("%s: a second run changed %+v", p.Name, st)
	}
	return before, after
}

// fuses runs p, wants the stats want, checks that a second run changes
// nothing, and compares the models before and after in ONNX Runtime on
// random inputs in [lo, hi).
func (f *fusionFixture) fuses(p *Pass, ctx Context, want Stats, lo, hi float64) {
	f.T.Helper()
	before, after := f.runTwice(p, ctx, want)
	// Three batches of the (static) batch size.
	samples := 3 * int(f.Graph.Inputs[0].Type.Shape.Dims()[0])
	difftest.Check(f.T, before, after, difftest.Options{DataOpts: data.Options{Low: lo, High: hi, Samples: samples, Seed: 7}})
}

// fusesInORT is fuses with the differential test at ONNX Runtime's levels
// disable and all (ORT's own fusions at all must not hide a difference,
// nor choke on what the pass wrote): p must change the model by want, a
// second run nothing, and the outputs must agree within 1e-5 + 1e-4|a| on
// inputs in [lo, hi).
func (f *fusionFixture) fusesInORT(p *Pass, ctx Context, want Stats, lo, hi float64) {
	f.T.Helper()
	ortenv.Require(f.T)
	before, after := f.runTwice(p, ctx, want)
	samples := 3 * max(1, int(f.Graph.Inputs[0].Type.Shape.Dims()[0])) // a symbolic batch is 1
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		opts := difftest.Options{Level: level, DataOpts: data.Options{Low: lo, High: hi, Samples: samples, Seed: 7}}
		if err := difftest.Compare(before, after, opts); err != nil {
			f.T.Fatalf("ORT level %d: %v", level, err)
		}
	}
}

// refuses runs p and wants no stats and the model unchanged byte for byte.
func (f *fusionFixture) refuses(p *Pass, ctx Context) {
	f.T.Helper()
	before := f.Marshal()
	if st := f.run(p, ctx); st != (Stats{}) {
		f.T.Fatalf("%s changed the model: %+v", p.Name, st)
	}
	if !bytes.Equal(before, f.Marshal()) {
		f.T.Fatalf("%s reported no change but the model changed", p.Name)
	}
}

func TestOnlyReader(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 1, 4)
	a := f.op("Relu", x)
	b := f.op("Neg", a)
	if n := onlyReader(a); n == nil || n.OpType != "Neg" {
		t.Errorf("onlyReader(a) = %v, want the Neg", n)
	}
	if n := onlyReader(x); n == nil || n.OpType != "Relu" {
		t.Errorf("onlyReader(x) = %v, want the Relu", n)
	}
	f.output(b)
	if n := onlyReader(b); n != nil {
		t.Errorf("onlyReader of an unread output = %v", n)
	}
	f.op("Abs", a)
	if n := onlyReader(a); n != nil {
		t.Errorf("onlyReader of a value read twice = %v", n)
	}
	f.output(a)
	if !a.IsReturned() || x.IsReturned() {
		t.Errorf("IsReturned of a, x = %v, %v", a.IsReturned(), x.IsReturned())
	}
}

func TestOnlyReaderSeesSubgraphOutputs(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 1)
	a := f.op("Relu", x)
	f.output(f.op("Neg", a))
	// A branch that returns a as it is: a has one use, but two readers.
	cond := f.init("cond", nil, []float32{1})
	n := f.node("If", []*graph.Value{cond})
	branch := graph.NewGraph("then")
	branch.Parent, branch.Owner = f.Graph, n
	branch.Outputs = []*graph.Value{a}
	n.SetAttr(&graph.Attr{Name: "then_branch", Type: graph.AttrGraph, Graph: branch})
	if onlyReader(a) != nil {
		t.Errorf("onlyReader ignores a subgraph returning the value")
	}
}

func TestClipBounds(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name    string
		opset   int64
		build   func(f *fusionFixture, x *graph.Value) *graph.Node
		lo, hi  float64
		matched bool
	}{
		{"attrs", 9, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.attrFloat(f.attrFloat(f.node("Clip", []*graph.Value{x}), "min", 0), "max", 6)
		}, 0, 6, true},
		{"attrs default", 9, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.node("Clip", []*graph.Value{x})
		}, -inf, inf, true},
		{"inputs", 13, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.node("Clip", []*graph.Value{x, f.init("lo", nil, []float32{-1}), f.constant("hi", []int64{1}, []float32{2})})
		}, -1, 2, true},
		{"only max", 13, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.node("Clip", []*graph.Value{x, nil, f.init("hi", nil, []float32{2})})
		}, -inf, 2, true},
		{"input bound not constant", 13, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.node("Clip", []*graph.Value{x, f.input("lo"), nil})
		}, 0, 0, false},
		{"attrs at opset 13", 13, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.attrFloat(f.node("Clip", []*graph.Value{x}), "min", 0)
		}, 0, 0, false},
		{"inputs at opset 9", 9, func(f *fusionFixture, x *graph.Value) *graph.Node {
			return f.node("Clip", []*graph.Value{x, f.init("lo", nil, []float32{0})})
		}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, tc.opset)
			n := tc.build(f, f.input("x", 2))
			lo, hi, ok := clipBounds(n, tc.opset)
			if ok != tc.matched || ok && (lo != tc.lo || hi != tc.hi) {
				t.Errorf("clipBounds = %v, %v, %v; want %v, %v, %v", lo, hi, ok, tc.lo, tc.hi, tc.matched)
			}
		})
	}
}

func TestMinRank(t *testing.T) {
	f := newFusionFixture(t, 13)
	unknown := f.value("unknown")
	f.Graph.Inputs = append(f.Graph.Inputs, unknown)
	x := f.input("x", 1, 3, 8, 8)
	conv := f.op("Conv", unknown, f.weight("w", 4, 3, 1, 1))
	sum := f.op("Add", f.op("Relu", conv), f.init("c", []int64{1}, []float32{3}))
	flat := f.op("Flatten", unknown)
	for _, tc := range []struct {
		v    *graph.Value
		want int
	}{{x, 4}, {unknown, 0}, {conv, 3}, {sum, 3}, {flat, 2}, {f.op("Abs", unknown), 0}} {
		if got := (declaredTypes{}).minRank(tc.v, 8); got != tc.want {
			t.Errorf("minRank(%s) = %d, want %d", tc.v.Name, got, tc.want)
		}
	}
	if got := (declaredTypes{}).minRank(sum, 1); got != 1 {
		t.Errorf("minRank at depth 1 = %d, want 1 (only the constant seen)", got)
	}
}

func TestHandOverKeepsTheEndValue(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 2)
	mid := f.op("Relu", x)
	last := f.node("Neg", []*graph.Value{mid})
	y := last.Output(0)
	f.output(y)
	relu := mid.Producer()
	if err := handOver(relu, last); err != nil {
		t.Fatal(err)
	}
	if err := f.Graph.RemoveNodes([]*graph.Node{last}); err != nil {
		t.Fatal(err)
	}
	if err := f.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if relu.Output(0) != y || f.Graph.Outputs[0] != y || f.Graph.Value(mid.Name) != nil {
		t.Errorf("after handOver: relu writes %q, output %q, %q still defined: %v", relu.Output(0).Name, f.Graph.Outputs[0].Name, mid.Name, f.Graph.Value(mid.Name) != nil)
	}
}

func TestUniqueNodeName(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 2)
	f.node("Relu", []*graph.Value{x}).Name = "act"
	f.node("Relu", []*graph.Value{x}).Name = "act_1"
	if got := uniqueNodeName(f.Graph, "act"); got != "act_2" {
		t.Errorf("uniqueNodeName = %q, want act_2", got)
	}
	if got := uniqueNodeName(f.Graph, "free"); got != "free" {
		t.Errorf("uniqueNodeName = %q, want free", got)
	}
}

func TestFusionsRegisteredBeforeDeadCode(t *testing.T) {
	want := []string{"fuse-conv-bn", "fuse-hardswish", "fuse-conv-activation", "eliminate-dead-code"}
	at := map[string]int{}
	for i, p := range All() {
		at[p.Name] = i
	}
	for i, name := range want {
		p, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && at[want[i-1]] >= at[name] {
			t.Errorf("%s runs before %s", name, want[i-1])
		}
		if name != "eliminate-dead-code" && (p.Level != 2 || p.Doc == "") {
			t.Errorf("%s: level %d, doc %q", name, p.Level, p.Doc)
		}
	}
	o1, _ := Select(1, nil, nil)
	for _, p := range o1 {
		if p.Level > 1 {
			t.Errorf("-O1 runs %s", p.Name)
		}
	}
}
