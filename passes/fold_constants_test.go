package passes

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/conformance"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// boolInput declares a scalar bool graph input: an If's condition.
func (f *fusionFixture) boolInput(name string) *graph.Value {
	v := f.value(name)
	v.Type = graph.TensorType(graph.Bool, graph.Shape{})
	f.Graph.Inputs = append(f.Graph.Inputs, v)
	return v
}

// ints adds an int64 initializer.
func (f *fusionFixture) ints(name string, dims []int64, vals ...int64) *graph.Value {
	f.T.Helper()
	return f.Int64s(f.Graph.UniqueName(name), dims, vals...)
}

func TestFoldShapeChain(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 2, 12)
	w := f.weight("w", 2, 3, 4)
	shape := f.op("Shape", w)
	d0 := f.attrInt(f.node("Gather", []*graph.Value{shape, f.ints("i", nil, 0)}), "axis", 0).Output(0)
	u := f.op("Unsqueeze", d0, f.ints("axes", []int64{1}, 0))
	target := f.attrInt(f.node("Concat", []*graph.Value{u, f.ints("rest", []int64{1}, -1)}), "axis", 0).Output(0)
	w2 := f.op("Reshape", w, target)
	f.output(f.op("Add", x, w2))

	f.fuses(foldConstants, Context{}, Stats{Removed: 5}, 0, 1)
	f.run(deadCode, Context{})
	if ops := f.ops(); len(ops) != 1 || ops["Add"] != 1 {
		t.Errorf("nodes left: %v, want one Add", ops)
	}
	if w2.Const == nil || !slices.Equal(w2.Const.Dims, []int64{2, 12}) || len(f.Graph.Initializers) != 1 {
		t.Errorf("the reshaped weight is not the only initializer, of shape [2 12]: %v, %d initializers", w2.Const, len(f.Graph.Initializers))
	}
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
			f := newFusionFixture(t, 17)
			x := f.input("x", append([]int64{1}, c.dims...)...)
			f.output(f.op("Add", x, f.op("ConstantOfShape", f.ints("shape", []int64{2}, c.dims...))))
			ctx := Context{FoldSizeLimit: c.limit}
			if c.fold {
				f.fuses(foldConstants, ctx, Stats{Removed: 1}, 0, 1)
			} else {
				f.refuses(foldConstants, ctx)
			}
		})
	}
}

func TestFoldLeavesVariablesAlone(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 3)
	// An initializer that is also a graph input may be overridden by the
	// caller: not a constant.
	d := f.input("d", 3)
	d.Const = f.tensor(d.Name, []int64{3}, []float32{1, 2, 3})
	f.Graph.Initializers = append(f.Graph.Initializers, d)
	c := f.init("c", []int64{3}, []float32{4, 5, 6})
	f.output(f.op("Mul", f.op("Add", x, c), f.op("Neg", d)))
	f.output(f.op("RandomUniformLike", c))
	f.refuses(foldConstants, Context{})
}

// sinFixture computes x + Sin(c): Sin has no Go kernel.
func sinFixture(t *testing.T) *fusionFixture {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 3)
	f.output(f.op("Add", x, f.op("Sin", f.init("c", []int64{3}, []float32{0, 1, 2}))))
	return f
}

func TestFoldWithoutEvaluator(t *testing.T) {
	sinFixture(t).refuses(foldConstants, Context{})
}

func TestFoldWithEvaluator(t *testing.T) {
	ortenv.Require(t)
	var _ Evaluator = &ort.NodeEvaluator{}
	sinFixture(t).fuses(foldConstants, Context{Eval: &ort.NodeEvaluator{}}, Stats{Removed: 1}, 0, 1)
}

// A folded graph output stays an output, now an initializer; what reads a
// Constant node folds (the Constant itself is left to other passes, here
// dead code); nodes inside a branch fold into the branch.
func TestFoldOutputsConstantsAndSubgraphs(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 2)
	cond := f.boolInput("cond")
	k := f.constant("k", []int64{2}, []float32{2, 3})
	sq := f.op("Mul", k, k)
	f.output(sq)

	ifn := f.node("If", []*graph.Value{cond})
	var branches []*graph.Graph
	for _, b := range []struct{ attr, op string }{{"then_branch", "Add"}, {"else_branch", "Sub"}} {
		g := graph.NewGraph(b.attr)
		g.Parent, g.Owner = f.Graph, ifn
		one, err := g.AddInitializer(f.tensor(f.Graph.UniqueName("one"), []int64{2}, []float32{1, 1}))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := g.NewValue(f.Graph.UniqueName(b.op))
		if _, err := g.AddNode(b.op, []*graph.Value{k, one}, []*graph.Value{out}); err != nil {
			t.Fatal(err)
		}
		out.Type = graph.TensorType(graph.Float, nil)
		g.Outputs = []*graph.Value{out}
		ifn.SetAttr(&graph.Attr{Name: b.attr, Type: graph.AttrGraph, Graph: g})
		branches = append(branches, g)
	}
	f.output(f.op("Add", x, ifn.Output(0)))

	f.fuses(foldConstants, Context{}, Stats{Removed: 3}, 0, 1)
	f.run(deadCode, Context{})
	if ops := f.ops(); len(ops) != 2 || ops["If"] != 1 || ops["Add"] != 1 {
		t.Errorf("nodes left: %v, want If and Add", ops)
	}
	if !f.Graph.IsOutput(sq) || sq.Const == nil {
		t.Errorf("output %q is no longer an output, or not an initializer", sq.Name)
	}
	for _, g := range branches {
		if len(g.Nodes) != 0 || len(g.Initializers) != 1 || !g.IsOutput(g.Initializers[0]) {
			t.Errorf("branch %s: %d nodes and %d initializers left, want the output alone", g.Name, len(g.Nodes), len(g.Initializers))
		}
	}
}

// Two If branches that fold the same outer weight (a Transpose of it) get
// one shared copy in the main graph, not one each: the file does not grow.
func TestFoldInBranchesSharesOuterConstants(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 2)
	cond := f.boolInput("cond")
	w := f.init("w", []int64{2, 2}, []float32{1, 2, 3, 4})
	ifn := f.node("If", []*graph.Value{cond})
	var branches []*graph.Graph
	for _, b := range []struct{ attr, op string }{{"then_branch", "Relu"}, {"else_branch", "Sigmoid"}} {
		g := graph.NewGraph(b.attr)
		g.Parent, g.Owner = f.Graph, ifn
		wt, _ := g.NewValue(f.Graph.UniqueName("wt"))
		if _, err := g.AddNode("Transpose", []*graph.Value{w}, []*graph.Value{wt}); err != nil {
			t.Fatal(err)
		}
		mm, _ := g.NewValue(f.Graph.UniqueName("mm"))
		if _, err := g.AddNode("MatMul", []*graph.Value{x, wt}, []*graph.Value{mm}); err != nil {
			t.Fatal(err)
		}
		out, _ := g.NewValue(f.Graph.UniqueName(b.op))
		if _, err := g.AddNode(b.op, []*graph.Value{mm}, []*graph.Value{out}); err != nil {
			t.Fatal(err)
		}
		out.Type = graph.TensorType(graph.Float, nil)
		g.Outputs = []*graph.Value{out}
		ifn.SetAttr(&graph.Attr{Name: b.attr, Type: graph.AttrGraph, Graph: g})
		branches = append(branches, g)
	}
	f.output(ifn.Output(0))

	f.run(foldConstants, Context{})
	f.run(deadCode, Context{})
	f.run(dedupInitializers, Context{})
	for _, g := range branches {
		if len(g.Initializers) != 0 || len(g.Nodes) != 2 {
			t.Errorf("branch %s: %d initializers, %d nodes; want the folded weight outside and MatMul + activation", g.Name, len(g.Initializers), len(g.Nodes))
		}
	}
	if n := len(f.Graph.Initializers); n != 1 {
		t.Errorf("main graph holds %d initializers, want the one transposed weight", n)
	}
}

// A long chain folds in one run, in time linear in its length.
func TestFoldLongChain(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 2)
	v := f.init("c", []int64{2}, []float32{1, 2})
	const n = 20000
	for i := range n {
		next, err := f.Graph.NewValue(fmt.Sprint("neg", i)) // UniqueName would make building quadratic
		if err != nil {
			t.Fatal(err)
		}
		f.node("Neg", []*graph.Value{v}, next)
		v = next
	}
	f.output(f.op("Add", x, v))
	rep, err := Run(f.Model, []*Pass{foldConstants}, Options{MaxRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Passes[0].Stats.Removed; got != n {
		t.Errorf("folded %d of %d", got, n)
	}
	t.Logf("%d nodes folded in %v", n, rep.Passes[0].Time)
}

// TestFoldRealModels folds MNIST and PaddleOCR, removes what became dead,
// and checks the result in ORT against the original. Their folds (Casts
// of Constants in PaddleOCR) need no evaluator.
func TestFoldRealModels(t *testing.T) {
	ortenv.Require(t)
	for _, c := range []struct {
		name, path string
		shape      []int64
	}{
		{"mnist", "", nil},
		{"cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", []int64{1, 3, 48, 192}},
		{"det", "ch_PP-OCRv4_det_infer.onnx", []int64{1, 3, 64, 64}},
		{"rec", "ch_PP-OCRv4_rec_infer.onnx", []int64{1, 3, 48, 160}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, opts := testenv.Model("mnist_cnn.onnx"), difftest.Options{}
			if c.path != "" {
				path = testenv.Data(t, filepath.Join("ocr-models", c.path))
				opts.DataOpts = data.Options{Spec: data.Spec{Shapes: map[string][]int64{"x": c.shape}}}
			}
			fm := runFusions(t, path, []*Pass{foldConstants, deadCode}, false)
			t.Logf("%d nodes -> %d", fm.opsBefore["(nodes)"], len(fm.m.Graph.Nodes))
			difftest.Check(t, fm.before, fm.after, opts)
		})
	}
}

// countingEval counts the evaluator's calls and keeps its errors.
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
	counts := foldBackendModels(t, nil)
	if counts[conformance.Match] < 15 {
		t.Errorf("only %d changed models matched", counts[conformance.Match])
	}
}

// TestFoldConformanceConstantInputs first makes what every backend test
// model reads from its inputs constant (initializers holding
// test_data_set_0; the inputs stay, unread), so that most models fold
// completely, every operator going through the Go kernels or ONNX
// Runtime; the folded outputs must equal what ORT computes running the
// original on the same data.
func TestFoldConformanceConstantInputs(t *testing.T) {
	counts := foldBackendModels(t, readInputsAsConstants)
	if counts["folded completely"] < 800 {
		t.Errorf("only %d models folded completely", counts["folded completely"])
	}
}

// foldBackendModels runs fold-constants and eliminate-dead-code over every
// backend test model (after prepare, when given) and checks each changed
// model against its original in ORT on test_data_set_0. Models that
// cannot be checked through the binding, draw random numbers, or do not
// run in ORT are counted; every other changed model must agree.
func foldBackendModels(t *testing.T, prepare func(m *graph.Model, set string) error) map[string]int {
	ortenv.Require(t)
	if testing.Short() {
		t.Skip("runs every backend test model")
	}
	root, models := conformance.Models(t)
	ev := &countingEval{}
	var tally conformance.Tally
	counts := map[string]int{}
	folded := 0
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		set := filepath.Join(filepath.Dir(p), "test_data_set_0")
		fm := &fusedModel{}
		m, err := graph.LoadFile(p)
		if err == nil {
			fm.before, err = graph.Marshal(m)
		}
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if outcome, detail := conformance.Screen(m); outcome != "" {
			tally.Add(t, rel, outcome, detail)
			continue
		}
		if prepare != nil {
			if err := prepare(m, set); err != nil {
				tally.Add(t, rel, conformance.Unsupported, err.Error())
				continue
			}
		}
		rep, err := Run(m, []*Pass{foldConstants, deadCode}, Options{VerifyEach: true, Eval: ev})
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if prepare == nil && !rep.Passes[0].Stats.Changed() && !rep.Passes[1].Stats.Changed() {
			counts["unchanged"]++
			continue
		}
		folded += rep.Passes[0].Stats.Removed
		if fm.after, err = graph.Marshal(m); err != nil {
			t.Fatal(err)
		}
		opts := difftest.Options{Data: set}
		if err := difftest.Compare(fm.before, fm.before, opts); err != nil {
			tally.Add(t, rel, conformance.CannotRun, err.Error())
			continue
		}
		if err := difftest.Compare(fm.before, fm.after, opts); err != nil {
			tally.Add(t, rel, conformance.Mismatch, err.Error())
			continue
		}
		tally.Add(t, rel, conformance.Match, "")
		if !slices.ContainsFunc(m.Graph.Outputs, func(v *graph.Value) bool { return v.Const == nil }) {
			counts["folded completely"]++
		}
	}
	tally.Report(t, len(models))
	counts[conformance.Match] = tally.Count(conformance.Match)
	t.Logf("%d unchanged; %d of the matched folded completely; %d nodes folded; the evaluator asked %d times, %d evaluated",
		counts["unchanged"], counts["folded completely"], folded, ev.calls, ev.ok)
	if testing.Verbose() {
		for _, e := range ev.errs {
			t.Log("evaluator: " + e)
		}
	}
	return counts
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

// A layout-only op of a constant folds whatever its size: a 4 MiB weight
// behind a Transpose (a linear layer as exported, x @ W^T) becomes the
// constant a MatMul reads, so that quantization can take it; a
// computation of the same size (Neg) stays over the limit.
func TestFoldLayoutOnlyWhateverItsSize(t *testing.T) {
	const n = 1024 // 1024 x 1024 float32: 4 MiB, four times the default limit
	vals := make([]float32, n*n)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	for _, c := range []struct {
		op   string
		fold bool
	}{{"Transpose", true}, {"Neg", false}} {
		t.Run(c.op, func(t *testing.T) {
			f := newFusionFixture(t, 17)
			x := f.input("x", 1, n)
			w := f.init("w", []int64{n, n}, vals)
			f.output(f.op("MatMul", x, f.op(c.op, w)))
			if c.fold {
				f.fuses(foldConstants, Context{}, Stats{Removed: 1}, 0, 1)
			} else {
				f.refuses(foldConstants, Context{})
			}
		})
	}
}
