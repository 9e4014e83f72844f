package passes

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
)

// layerNormSpelling says how a test writes the decomposed LayerNorm.
type layerNormSpelling struct {
	mulSquare     bool    // Mul(d, d) instead of Pow(d, 2)
	constNodes    bool    // constants in Constant nodes
	scalarRank    int     // rank of eps and the exponent: 0 ([]) or 1 ([1])
	axes          []int64 // default [-1]
	gamma, beta   bool
	gammaLeading1 bool // gamma and beta with a leading 1 ([1, H])
	swapAffine    bool // Mul(gamma, y), Add(beta, .)
	eps           float32
}

// layerNorm writes the pattern over x (whose trailing dims are norm) and
// returns its last node.
func (f *fusionFixture) layerNorm(x *graph.Value, norm []int64, s layerNormSpelling) *graph.Node {
	opset := f.Model.OpsetVersion("")
	scalar := func(name string, v float32) *graph.Value {
		dims := []int64{1}
		if s.scalarRank == 0 {
			dims = nil
		}
		if s.constNodes {
			return f.constant(name, dims, []float32{v})
		}
		return f.init(name, dims, []float32{v})
	}
	if s.axes == nil {
		s.axes = []int64{-1}
	}
	if s.eps == 0 {
		s.eps = 1e-5
	}
	mean := func(in *graph.Value) *graph.Value {
		if opset >= 18 {
			t, err := graph.NewInt64Tensor(f.Graph.UniqueName("axes"), []int64{int64(len(s.axes))}, s.axes)
			if err != nil {
				f.T.Fatal(err)
			}
			ax, err := f.Graph.AddInitializer(t)
			if err != nil {
				f.T.Fatal(err)
			}
			return f.op("ReduceMean", in, ax)
		}
		return f.attrInts(f.node("ReduceMean", []*graph.Value{in}), "axes", s.axes...).Output(0)
	}
	d := f.op("Sub", x, mean(x))
	var sq *graph.Value
	if s.mulSquare {
		sq = f.op("Mul", d, d)
	} else {
		sq = f.op("Pow", d, scalar("two", 2))
	}
	last := f.node("Div", []*graph.Value{d, f.op("Sqrt", f.op("Add", mean(sq), scalar("eps", s.eps)))})
	pdims := norm
	if s.gammaLeading1 {
		pdims = append([]int64{1}, norm...)
	}
	n := int64(1)
	for _, d := range norm {
		n *= d
	}
	affine := func(op, name string, lo, hi float32) {
		c := f.init(name, pdims, f.random(n, lo, hi))
		ins := []*graph.Value{last.Output(0), c}
		if s.swapAffine {
			ins[0], ins[1] = ins[1], ins[0]
		}
		last = f.node(op, ins)
	}
	if s.gamma {
		affine("Mul", "gamma", 0.5, 1.5)
	}
	if s.beta {
		affine("Add", "beta", -0.5, 0.5)
	}
	return last
}

func TestFuseLayerNorm(t *testing.T) {
	spellings := []layerNormSpelling{
		{gamma: true, beta: true},
		{gamma: true, beta: true, mulSquare: true, swapAffine: true},
		{gamma: true, beta: true, constNodes: true, scalarRank: 1},
		{gamma: true, beta: true, gammaLeading1: true, eps: 1e-12},
		{gamma: true},
		{},
		{gamma: true, beta: true, axes: []int64{-2, -1}},
		{gamma: true, beta: true, axes: []int64{2, 1}},
	}
	for _, opset := range []int64{13, 17, 18} {
		for _, s := range spellings {
			t.Run(fmt.Sprintf("opset %d %+v", opset, s), func(t *testing.T) {
				f := newFusionFixture(t, opset)
				x := f.op("Relu", f.input("x", 2, 5, 6))
				norm := []int64{6}
				if len(s.axes) == 2 {
					norm = []int64{5, 6}
				}
				last := f.layerNorm(x, norm, s)
				y := last.Output(0)
				f.output(f.op("Neg", y))
				removed := 7
				if s.gamma {
					removed++
				}
				if s.beta {
					removed++
				}
				ctx := Context{ORTContrib: true}
				f.fusesInORT(fuseLayerNorm, ctx, Stats{Removed: removed, Added: 1}, -3, 3)
				ln := y.Producer()
				if ln.OpType != "LayerNormalization" || ln.Domain != "" || ln.Name != last.Name {
					t.Fatalf("%s produces %q", ln, y.Name)
				}
				if a := ln.AttrInt("axis", 0); a != -int64(len(norm)) {
					t.Errorf("axis %d, want %d", a, -len(norm))
				}
				if want := len(ln.Inputs()); want != 3 && s.beta || want != 2 && !s.beta {
					t.Errorf("%d inputs, beta %v", want, s.beta)
				}
				if g, _, _ := floatConst(ln.Input(1)); g == nil || fmt.Sprint(g.Dims) != fmt.Sprint(norm) {
					t.Errorf("gamma %v, want dims %v", g, norm)
				}
				if ops := f.ops(); ops["ReduceMean"]+ops["Sqrt"]+ops["Div"]+ops["Pow"]+ops["Sub"] != 0 {
					t.Errorf("pattern ops left: %v", ops)
				}
			})
		}
	}
}

// The pass is opt-in (its kernel is less exact on inputs with a large
// mean, TestFuseLayerNormLargeMean): without --ort-contrib it leaves the
// pattern at every opset, ONNX's LayerNormalization (17) included.
func TestFuseLayerNormNeedsORTContrib(t *testing.T) {
	for _, opset := range []int64{16, 17} {
		f := newFusionFixture(t, opset)
		f.output(f.layerNorm(f.input("x", 1, 4, 8), []int64{8}, layerNormSpelling{gamma: true, beta: true}).Output(0))
		f.refuses(fuseLayerNorm, Context{})
	}
}

// The input of the pattern may be read elsewhere too (the residual).
func TestFuseLayerNormSharedInput(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.op("Add", f.input("x", 2, 3, 8), f.weight("r", 8))
	f.output(f.layerNorm(x, []int64{8}, layerNormSpelling{gamma: true, beta: true}).Output(0))
	f.output(f.op("Neg", x))
	f.fusesInORT(fuseLayerNorm, Context{ORTContrib: true}, Stats{Removed: 9, Added: 1}, -3, 3)
}

// The affine part stops where its result is read elsewhere: the Div or Mul
// then ends the fused pattern and the rest stays.
func TestFuseLayerNormPartialAffine(t *testing.T) {
	f := newFusionFixture(t, 17)
	last := f.layerNorm(f.input("x", 2, 3, 8), []int64{8}, layerNormSpelling{gamma: true, beta: true})
	mul := last.Input(0).Producer()
	f.output(last.Output(0))
	f.output(f.op("Neg", mul.Output(0)))
	f.fusesInORT(fuseLayerNorm, Context{ORTContrib: true}, Stats{Removed: 8, Added: 1}, -3, 3)
	if last.Graph() == nil || last.Input(0).Producer().OpType != "LayerNormalization" {
		t.Errorf("the Add of beta should read the fused node")
	}
}

func TestFuseLayerNormRefuses(t *testing.T) {
	ln := func(f *fusionFixture, s layerNormSpelling) *graph.Node {
		return f.layerNorm(f.input("x", 2, 3, 8), []int64{8}, s)
	}
	producer := func(v *graph.Value, op string) *graph.Node {
		for p := v.Producer(); p != nil; p = p.Input(0).Producer() {
			if p.OpType == op {
				return p
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name  string
		opset int64
		build func(f *fusionFixture) *graph.Node
	}{
		{"mean over a leading axis", 17, func(f *fusionFixture) *graph.Node {
			return ln(f, layerNormSpelling{gamma: true, axes: []int64{-2}})
		}},
		{"mean over axes 0 and 2", 17, func(f *fusionFixture) *graph.Node {
			return ln(f, layerNormSpelling{axes: []int64{0, 2}})
		}},
		{"positive axis, rank unknown", 17, func(f *fusionFixture) *graph.Node {
			x := f.value("x")
			x.Type = graph.TensorType(graph.Float, nil)
			f.Graph.Inputs = append(f.Graph.Inputs, x)
			return f.layerNorm(x, []int64{8}, layerNormSpelling{gamma: true, axes: []int64{2}})
		}},
		{"no gamma, last dim unknown", 17, func(f *fusionFixture) *graph.Node {
			x := f.value("x")
			x.Type = graph.TensorType(graph.Float, graph.Shape{graph.Dim{Kind: graph.DimStatic, Value: 2}, graph.Dim{Kind: graph.DimSymbolic, Param: "h"}})
			f.Graph.Inputs = append(f.Graph.Inputs, x)
			return f.layerNorm(x, []int64{8}, layerNormSpelling{})
		}},
		{"keepdims 0", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			f.attrInt(producer(n.Output(0), "Sub").Input(1).Producer(), "keepdims", 0)
			return n
		}},
		{"squares with Pow 3", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			producer(n.Input(1), "Pow").SetInput(1, f.init("three", nil, []float32{3}))
			return n
		}},
		{"divides another value", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			n.SetInput(0, f.input("other", 2, 3, 8))
			return n
		}},
		{"variance of another value", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			producer(n.Input(1), "Pow").SetInput(0, f.input("other", 2, 3, 8))
			return n
		}},
		{"centres with another mean", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			sub := producer(n.Output(0), "Sub")
			sub.SetInput(1, f.attrInts(f.node("ReduceMean", []*graph.Value{f.input("other", 2, 3, 8)}), "axes", -1).Output(0))
			return n
		}},
		{"variance read elsewhere", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			f.output(producer(n.Input(1), "Sqrt").Input(0).Producer().Input(0))
			return n
		}},
		{"centred value is a graph output", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{gamma: true, beta: true})
			f.output(producer(n.Output(0), "Sub").Output(0))
			return n
		}},
		{"eps is an input", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			producer(n.Input(1), "Add").SetInput(1, f.input("eps"))
			return n
		}},
		{"eps negative", 17, func(f *fusionFixture) *graph.Node {
			return ln(f, layerNormSpelling{eps: -1e-3})
		}},
		{"eps of rank 4 over x of rank 3", 17, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			producer(n.Input(1), "Add").SetInput(1, f.init("eps4", []int64{1, 1, 1, 1}, []float32{1e-5}))
			return n
		}},
		{"ReduceMean axes from an input, opset 18", 18, func(f *fusionFixture) *graph.Node {
			n := ln(f, layerNormSpelling{})
			producer(n.Output(0), "Sub").Input(1).Producer().SetInput(1, f.Graph.Inputs[0])
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, tc.opset)
			last := tc.build(f)
			f.output(last.Output(0))
			if err := f.Graph.TopoSort(); err != nil {
				t.Fatal(err)
			}
			f.refuses(fuseLayerNorm, Context{ORTContrib: true})
		})
	}
}

// A gamma that is not exactly the normalized shape stays a Mul of its own
// after the fused node (gamma [3, 8] also scales the normalized rows
// differently; gamma [1] broadcasts).
func TestFuseLayerNormLeavesOtherScales(t *testing.T) {
	for _, dims := range [][]int64{{3, 8}, {1}, {1, 1, 1, 8}} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			f := newFusionFixture(t, 17)
			div := f.layerNorm(f.input("x", 2, 3, 8), []int64{8}, layerNormSpelling{})
			mul := f.node("Mul", []*graph.Value{div.Output(0), f.weight("g", dims...)})
			f.output(mul.Output(0))
			f.fusesInORT(fuseLayerNorm, Context{ORTContrib: true}, Stats{Removed: 7, Added: 1}, -3, 3)
			if mul.Graph() == nil || mul.Input(0).Producer().OpType != "LayerNormalization" {
				t.Errorf("the Mul should stay, reading the fused node")
			}
		})
	}
}

// ONNX Runtime's LayerNormalization kernel computes the variance in one
// pass (E[x²] − E[x]², float32); the written-out form in two. On inputs
// whose mean is large against their spread the two differ beyond 1e-4
// (measured at level disable: ~7e-3 at mean 100, spread ±1, 64 features).
// At ORT's levels basic and above ORT fuses the full pattern (gamma and
// beta) into the same kernel itself, so there the pass changes nothing
// even on such inputs; this pins both facts down (see docs/transformers.md).
func TestFuseLayerNormLargeMean(t *testing.T) {
	ortenv.Require(t)
	f := newFusionFixture(t, 17)
	x := f.op("Add", f.input("x", 4, 16, 64), f.init("offset", nil, []float32{100}))
	f.output(f.layerNorm(x, []int64{64}, layerNormSpelling{gamma: true, beta: true}).Output(0))
	before := f.Marshal()
	if st := f.run(fuseLayerNorm, Context{ORTContrib: true}); st.Added != 1 {
		t.Fatalf("stats %+v", st)
	}
	after := f.Marshal()
	opts := difftest.Options{Atol: 1e-5, Rtol: 1e-4, DataOpts: data.Options{Low: -1, High: 1, Samples: 8, Seed: 3}}
	if err := difftest.Compare(before, after, opts); err == nil {
		t.Errorf("ORT level disable: no difference; if ORT's kernel became two-pass, update docs/transformers.md")
	} else {
		t.Logf("ORT level disable (documented): %v", err)
	}
	for _, level := range []ort.Level{ort.LevelBasic, ort.LevelAll} {
		opts.Level = level
		if err := difftest.Compare(before, after, opts); err != nil {
			t.Errorf("ORT level %d: %v", level, err)
		}
	}
}
