package passes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"optc/data"
	"optc/graph"
	"optc/internal/difftest"
	"optc/internal/ortenv"
	"optc/internal/testenv"
	"optc/ort"
	"optc/passes"
)

// builder assembles small test graphs.
type builder struct {
	t *testing.T
	g *graph.Graph
	n int // values named so far
}

func newBuilder(t *testing.T) *builder { return &builder{t: t, g: graph.NewGraph("g")} }

// name returns a fresh value name (g.UniqueName would make building long
// chains quadratic).
func (b *builder) name(prefix string) string {
	b.n++
	return fmt.Sprintf("%s_%s%d", b.g.Name, prefix, b.n)
}

func (b *builder) model() *graph.Model {
	m := &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: b.g}
	if err := m.Verify(); err != nil {
		b.t.Fatal(err)
	}
	return m
}

func (b *builder) input(name string, dt graph.DataType, dims ...int64) *graph.Value {
	v, err := b.g.NewValue(name)
	if err != nil {
		b.t.Fatal(err)
	}
	v.Type = graph.TensorType(dt, graph.StaticShape(dims...))
	b.g.Inputs = append(b.g.Inputs, v)
	return v
}

func (b *builder) output(v *graph.Value, dt graph.DataType) {
	v.Type = graph.TensorType(dt, nil)
	b.g.Outputs = append(b.g.Outputs, v)
}

func (b *builder) init(t *graph.Tensor, err error) *graph.Value {
	if err != nil {
		b.t.Fatal(err)
	}
	t.Name = b.name("c")
	v, err := b.g.AddInitializer(t)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *builder) ints(dims []int64, vals ...int64) *graph.Value {
	return b.init(graph.NewInt64Tensor("", dims, vals))
}

func (b *builder) floats(dims []int64, vals ...float32) *graph.Value {
	return b.init(graph.NewFloat32Tensor("", dims, vals))
}

// node adds op over ins with one output and the given attributes.
func (b *builder) node(op string, ins []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	out, err := b.g.NewValue(b.name(op))
	if err != nil {
		b.t.Fatal(err)
	}
	n, err := b.g.AddNode(op, ins, []*graph.Value{out})
	if err != nil {
		b.t.Fatal(err)
	}
	n.Name, n.Attrs = out.Name, attrs
	return out
}

func intAttr(name string, v int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInt, Int: v}
}

func marshal(t *testing.T, m *graph.Model) []byte {
	t.Helper()
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fold runs fold-constants and eliminate-dead-code, verifying after each,
// and returns fold-constants' stats.
func fold(t *testing.T, m *graph.Model, opts passes.Options) passes.Stats {
	t.Helper()
	pipeline, err := passes.Select(0, []string{"fold-constants", "eliminate-dead-code"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.VerifyEach = true
	rep, err := passes.Run(m, pipeline, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Passes[0].Stats
}

func ops(g *graph.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.OpType)
	}
	return out
}

func TestFoldShapeChain(t *testing.T) {
	b := newBuilder(t)
	x := b.input("x", graph.Float, 1, 2, 12)
	wv := make([]float32, 24)
	for i := range wv {
		wv[i] = float32(i) / 7
	}
	w := b.floats([]int64{2, 3, 4}, wv...)
	shape := b.node("Shape", []*graph.Value{w})
	d0 := b.node("Gather", []*graph.Value{shape, b.ints(nil, 0)}, intAttr("axis", 0))
	u := b.node("Unsqueeze", []*graph.Value{d0, b.ints([]int64{1}, 0)})
	target := b.node("Concat", []*graph.Value{u, b.ints([]int64{1}, -1)}, intAttr("axis", 0))
	w2 := b.node("Reshape", []*graph.Value{w, target})
	y := b.node("Add", []*graph.Value{x, w2})
	b.output(y, graph.Float)
	m := b.model()
	before := marshal(t, m)

	st := fold(t, m, passes.Options{})
	if st.Removed != 5 {
		t.Errorf("folded %d nodes, want 5", st.Removed)
	}
	if got := ops(m.Graph); !slices.Equal(got, []string{"Add"}) {
		t.Fatalf("nodes left: %v", got)
	}
	c := m.Graph.Value(w2.Name)
	if c == nil || c.Const == nil || !slices.Equal(c.Const.Dims, []int64{2, 12}) {
		t.Fatalf("the reshaped weight is not an initializer of shape [2 12]: %+v", c)
	}
	if len(m.Graph.Initializers) != 1 {
		t.Errorf("initializers left: %d, want 1", len(m.Graph.Initializers))
	}
	difftest.Check(t, before, marshal(t, m), difftest.Options{})
}

func TestFoldRefusesLargeOutputs(t *testing.T) {
	for _, c := range []struct {
		name  string
		dims  []int64
		limit int64
		fold  bool
	}{
		{"over the limit", []int64{1024, 1024}, 0, false},
		{"growing too much", []int64{256, 256}, 0, false},
		{"small", []int64{64, 64}, 0, true},
		{"small, over a tight limit", []int64{64, 64}, 1000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBuilder(t)
			x := b.input("x", graph.Float, append([]int64{1}, c.dims...)...)
			big := b.node("ConstantOfShape", []*graph.Value{b.ints([]int64{2}, c.dims...)})
			y := b.node("Add", []*graph.Value{x, big})
			b.output(y, graph.Float)
			m := b.model()
			before := marshal(t, m)
			st := fold(t, m, passes.Options{FoldSizeLimit: c.limit})
			if got := st.Removed == 1; got != c.fold {
				t.Fatalf("folded: %v, want %v (nodes %v)", got, c.fold, ops(m.Graph))
			}
			if c.fold {
				difftest.Check(t, before, marshal(t, m), difftest.Options{})
			}
		})
	}
}

func TestFoldLeavesVariablesAlone(t *testing.T) {
	b := newBuilder(t)
	x := b.input("x", graph.Float, 3)
	// An initializer that is also a graph input may be overridden by the
	// caller: not a constant.
	d := b.input("d", graph.Float, 3)
	dt, _ := graph.NewFloat32Tensor("d", []int64{3}, []float32{1, 2, 3})
	d.Const = dt
	b.g.Initializers = append(b.g.Initializers, d)
	c := b.floats([]int64{3}, 4, 5, 6)
	y := b.node("Mul", []*graph.Value{b.node("Add", []*graph.Value{x, c}), b.node("Neg", []*graph.Value{d})})
	r := b.node("RandomUniformLike", []*graph.Value{c})
	b.output(y, graph.Float)
	b.output(r, graph.Float)
	m := b.model()
	if st := fold(t, m, passes.Options{}); st.Removed != 0 {
		t.Errorf("folded %d nodes; nodes left: %v", st.Removed, ops(m.Graph))
	}
	if len(m.Graph.Nodes) != 4 {
		t.Errorf("nodes: %v", ops(m.Graph))
	}
}

// sinModel computes x + Sin(c): Sin has no Go kernel.
func sinModel(t *testing.T) *graph.Model {
	b := newBuilder(t)
	x := b.input("x", graph.Float, 1, 3)
	s := b.node("Sin", []*graph.Value{b.floats([]int64{3}, 0, 1, 2)})
	b.output(b.node("Add", []*graph.Value{x, s}), graph.Float)
	return b.model()
}

func TestFoldWithoutEvaluator(t *testing.T) {
	m := sinModel(t)
	if st := fold(t, m, passes.Options{}); st.Removed != 0 {
		t.Errorf("folded Sin without an evaluator: %v", ops(m.Graph))
	}
}

func TestFoldWithEvaluator(t *testing.T) {
	ortenv.Require(t)
	var _ passes.Evaluator = &ort.NodeEvaluator{}
	m := sinModel(t)
	before := marshal(t, m)
	if st := fold(t, m, passes.Options{Eval: &ort.NodeEvaluator{}}); st.Removed != 1 {
		t.Fatalf("Sin not folded: %v", ops(m.Graph))
	}
	difftest.Check(t, before, marshal(t, m), difftest.Options{})
}

// A folded graph output stays an output, now an initializer; what reads
// a Constant node folds (the Constant itself is left to other passes, here
// dead code); nodes inside a branch fold into the branch.
func TestFoldOutputsConstantsAndSubgraphs(t *testing.T) {
	b := newBuilder(t)
	cond := b.input("cond", graph.Bool)
	x := b.input("x", graph.Float, 1, 2)
	k, _ := graph.NewFloat32Tensor("", []int64{2}, []float32{2, 3})
	kv, _ := b.g.NewValue("k")
	kn, _ := b.g.AddNode("Constant", nil, []*graph.Value{kv})
	kn.Attrs = []*graph.Attr{{Name: "value", Type: graph.AttrTensor, Tensor: k}}
	sq := b.node("Mul", []*graph.Value{kv, kv})
	b.output(sq, graph.Float)

	branch := func(name string, op string) *graph.Graph {
		g := graph.NewGraph(name)
		g.Parent = b.g
		sb := &builder{t: t, g: g}
		out := sb.node(op, []*graph.Value{kv, sb.floats([]int64{2}, 1, 1)})
		sb.output(out, graph.Float)
		return g
	}
	then, els := branch("then", "Add"), branch("else", "Sub")
	iv, _ := b.g.NewValue("if_out")
	ifn, err := b.g.AddNode("If", []*graph.Value{cond}, []*graph.Value{iv})
	if err != nil {
		t.Fatal(err)
	}
	ifn.SetAttr(&graph.Attr{Name: "then_branch", Type: graph.AttrGraph, Graph: then})
	ifn.SetAttr(&graph.Attr{Name: "else_branch", Type: graph.AttrGraph, Graph: els})
	then.Owner, els.Owner = ifn, ifn
	b.output(b.node("Add", []*graph.Value{x, iv}), graph.Float)
	m := b.model()
	before := marshal(t, m)

	if st := fold(t, m, passes.Options{}); st.Removed != 3 {
		t.Errorf("folded %d nodes, want 3 (Mul, and Add and Sub in the branches)", st.Removed)
	}
	if got := ops(m.Graph); !slices.Equal(got, []string{"If", "Add"}) {
		t.Errorf("nodes left: %v", got)
	}
	if !m.Graph.IsOutput(sq) || sq.Const == nil {
		t.Errorf("output %q is no longer an output or not an initializer", sq.Name)
	}
	for _, g := range []*graph.Graph{then, els} {
		if len(g.Nodes) != 0 || len(g.Initializers) != 1 || !g.IsOutput(g.Initializers[0]) {
			t.Errorf("branch %s: nodes %v, initializers %d", g.Name, ops(g), len(g.Initializers))
		}
	}
	difftest.Check(t, before, marshal(t, m), difftest.Options{})
}

// A long chain folds in one run, in time linear in its length.
func TestFoldLongChain(t *testing.T) {
	b := newBuilder(t)
	x := b.input("x", graph.Float, 2)
	v := b.floats([]int64{2}, 1, 2)
	const n = 20000
	for range n {
		v = b.node("Neg", []*graph.Value{v})
	}
	b.output(b.node("Add", []*graph.Value{x, v}), graph.Float)
	m := b.model()
	pipeline, _ := passes.Select(0, []string{"fold-constants"}, nil)
	rep, err := passes.Run(m, pipeline, passes.Options{MaxRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Passes[0].Stats.Removed; got != n {
		t.Errorf("folded %d of %d", got, n)
	}
	t.Logf("%d nodes folded in %v", n, rep.Passes[0].Time)
}

// opCounts counts the nodes of each op type in the main graph.
func opCounts(g *graph.Graph) map[string]int {
	c := map[string]int{}
	for _, n := range g.Nodes {
		c[n.OpType]++
	}
	return c
}

// TestFoldRealModels folds MNIST and PaddleOCR (with ONNX Runtime as the
// evaluator), removes what became dead, and checks the result in ORT
// against the original.
func TestFoldRealModels(t *testing.T) {
	ortenv.Require(t)
	for _, c := range []struct {
		name, path string
		shapes     map[string][]int64
	}{
		{"mnist", testenv.Model("mnist_cnn.onnx"), nil},
		{"ocr-det", "ocr-models/ch_PP-OCRv4_det_infer.onnx", map[string][]int64{"x": {1, 3, 64, 64}}},
		{"ocr-rec", "ocr-models/ch_PP-OCRv4_rec_infer.onnx", map[string][]int64{"x": {1, 3, 48, 160}}},
		{"ocr-cls", "ocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx", map[string][]int64{"x": {1, 3, 48, 192}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if c.shapes != nil {
				path = testenv.Data(t, c.path)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := graph.Parse(before, "")
			if err != nil {
				t.Fatal(err)
			}
			nodes, ops0 := len(m.Graph.Nodes), opCounts(m.Graph)
			pipeline, _ := passes.Select(0, []string{"fold-constants", "eliminate-dead-code"}, nil)
			rep, err := passes.Run(m, pipeline, passes.Options{VerifyEach: true, Eval: &ort.NodeEvaluator{}})
			if err != nil {
				t.Fatal(err)
			}
			var gone []string
			for op, n := range ops0 {
				if d := n - opCounts(m.Graph)[op]; d > 0 {
					gone = append(gone, fmt.Sprintf("%s %d", op, d))
				}
			}
			slices.Sort(gone)
			t.Logf("%d nodes -> %d: fold-constants folded %d, eliminate-dead-code removed %d (%s)",
				nodes, len(m.Graph.Nodes), rep.Passes[0].Stats.Removed, rep.Passes[1].Stats.Removed, strings.Join(gone, ", "))
			difftest.Check(t, before, marshal(t, m), difftest.Options{DataOpts: data.Options{Shapes: c.shapes}})
		})
	}
}

// countingEval counts the evaluator's calls and successes.
type countingEval struct {
	ort.NodeEvaluator
	calls, ok int
	errs      []string
}

func (e *countingEval) EvalNode(n *graph.Node, in []*graph.Tensor, opsets []graph.OpsetImport) ([]*graph.Tensor, error) {
	e.calls++
	out, err := e.NodeEvaluator.EvalNode(n, in, opsets)
	if err == nil {
		e.ok++
	} else {
		e.errs = append(e.errs, err.Error())
	}
	return out, err
}

// TestFoldConformance folds every model of the ONNX backend test data
// (ONNX Runtime as the evaluator), removes dead code, verifies, and runs
// each model that changed against its original on test_data_set_0 in ORT.
func TestFoldConformance(t *testing.T) {
	r := foldBackendModels(t, nil)
	if r.counts["matched"] < 15 {
		t.Errorf("only %d changed models matched", r.counts["matched"])
	}
}

// TestFoldConformanceConstantInputs first makes what every backend test
// model reads from its inputs constant (initializers holding
// test_data_set_0; the inputs stay, unread), so that most models fold
// completely, every operator going through the Go kernels or ONNX
// Runtime; the folded outputs must equal what ORT computes running the
// original on the same data.
func TestFoldConformanceConstantInputs(t *testing.T) {
	r := foldBackendModels(t, readInputsAsConstants)
	if r.counts["folded completely"] < 800 {
		t.Errorf("only %d models folded completely", r.counts["folded completely"])
	}
}

type backendRun struct {
	counts map[string]int
	folded int // nodes
}

// foldBackendModels runs fold-constants and eliminate-dead-code over every
// backend test model (after prepare, when given) and checks each changed
// model against its original in ORT on test_data_set_0. Models whose
// original does not run in ORT, or runs differently twice (random
// operators), are counted; every other changed model must agree.
func foldBackendModels(t *testing.T, prepare func(m *graph.Model, set string) error) backendRun {
	ortenv.Require(t)
	if testing.Short() {
		t.Skip("runs every backend test model")
	}
	root := testenv.Data(t, "onnx-testdata")
	models, err := filepath.Glob(filepath.Join(root, "*", "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	ev := &countingEval{}
	pipeline, _ := passes.Select(0, []string{"fold-constants", "eliminate-dead-code"}, nil)
	r := backendRun{counts: map[string]int{}}
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		set := filepath.Join(filepath.Dir(p), "test_data_set_0")
		before, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := graph.Parse(before, "")
		if err == nil {
			err = m.Verify()
		}
		if err != nil {
			r.counts["not loadable"]++
			continue
		}
		if prepare != nil {
			if err := prepare(m, set); err != nil {
				r.counts["no data"]++
				continue
			}
		}
		rep, err := passes.Run(m, pipeline, passes.Options{VerifyEach: true, Eval: ev})
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if prepare == nil && rep.Passes[0].Stats.Removed+rep.Passes[1].Stats.Removed == 0 {
			r.counts["unchanged"]++
			continue
		}
		r.folded += rep.Passes[0].Stats.Removed
		opts := difftest.Options{Data: set}
		if err := difftest.Compare(before, before, opts); err != nil {
			r.counts["original does not run or is random"]++
			continue
		}
		if err := difftest.Compare(before, marshal(t, m), opts); err != nil {
			r.counts["mismatched"]++
			t.Errorf("%s: %v", rel, err)
			continue
		}
		r.counts["matched"]++
		if !slices.ContainsFunc(m.Graph.Outputs, func(v *graph.Value) bool { return v.Const == nil }) {
			r.counts["folded completely"]++
		} else if prepare != nil {
			t.Logf("not folded completely: %s: %v", rel, ops(m.Graph))
		}
	}
	t.Logf("%d models: %d unchanged, %d not loadable, %d without usable data, %d whose original does not run in ORT or is random; %d changed and matched (%d folded completely), %d mismatched; %d nodes folded, the evaluator asked %d times (%d evaluated)",
		len(models), r.counts["unchanged"], r.counts["not loadable"], r.counts["no data"], r.counts["original does not run or is random"],
		r.counts["matched"], r.counts["folded completely"], r.counts["mismatched"], r.folded, ev.calls, ev.ok)
	for _, e := range ev.errs {
		t.Log("evaluator: " + e)
	}
	return r
}

// readInputsAsConstants makes every reader of m's inputs read an
// initializer holding the data set's tensor instead.
func readInputsAsConstants(m *graph.Model, set string) error {
	ins := data.GraphInputs(m.Graph)
	src, err := data.Open(set, ins, data.Options{})
	if err != nil {
		return err
	}
	defer src.Close()
	b, err := src.Next()
	if err != nil {
		return err
	}
	g := m.Graph
	for i, in := range ins {
		t := b.Tensors[i]
		t.Name = g.UniqueName(in.Name + "_data")
		c, err := g.AddInitializer(t)
		if err != nil {
			return err
		}
		g.ReplaceAllUses(g.Value(in.Name), c)
	}
	return m.Verify()
}
