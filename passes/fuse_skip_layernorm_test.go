package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// skipLayerNorm writes LayerNormalization(Add(x, MatMul(x, w)), gamma,
// beta) over x [.., .., 8] and returns the Add and the LN.
func (f *fusionFixture) skipLayerNorm(x *graph.Value, swap, beta bool) (add, ln *graph.Node) {
	r := f.op("MatMul", x, f.weight("w", 8, 8))
	ins := []*graph.Value{x, r}
	if swap {
		ins[0], ins[1] = r, x
	}
	add = f.node("Add", ins)
	lnIns := []*graph.Value{add.Output(0), f.init("gamma", []int64{8}, f.random(8, 0.5, 1.5))}
	if beta {
		lnIns = append(lnIns, f.weight("beta", 8))
	}
	ln = f.attrFloat(f.node("LayerNormalization", lnIns), "epsilon", 1e-6)
	return add, ln
}

func TestFuseSkipLayerNorm(t *testing.T) {
	for _, tc := range []struct {
		name             string
		swap, beta       bool
		sumRead, sumOut  bool // the sum read by another node, returned
		symbolic         bool // x [batch, 5, 8]
		gammaAfterTheAdd bool // gamma from a Constant node between the Add and the LN
	}{
		{name: "post-norm", beta: true},
		{name: "no beta, operands swapped", swap: true},
		{name: "pre-norm: the sum feeds the next residual", beta: true, sumRead: true},
		{name: "the sum is a graph output", beta: true, sumOut: true},
		{name: "symbolic batch", beta: true, symbolic: true, sumRead: true},
		{name: "gamma from a Constant node after the Add", beta: true, gammaAfterTheAdd: true, sumRead: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, 17)
			x := f.input("x", 2, 5, 8)
			if tc.symbolic {
				x.Type = graph.TensorType(graph.Float, graph.Shape{{Kind: graph.DimSymbolic, Param: "batch"}, {Kind: graph.DimStatic, Value: 5}, {Kind: graph.DimStatic, Value: 8}})
			}
			add, ln := f.skipLayerNorm(x, tc.swap, tc.beta)
			if tc.gammaAfterTheAdd {
				ln.SetInput(1, f.constant("gamma_c", []int64{8}, f.random(8, 0.5, 1.5)))
				if err := f.Graph.TopoSort(); err != nil { // the Constant node is last: move the LN after it
					t.Fatal(err)
				}
			}
			y := ln.Output(0)
			f.output(f.op("Neg", y))
			sum := add.Output(0)
			if tc.sumRead {
				f.output(f.op("Add", sum, f.op("Relu", y)))
			}
			if tc.sumOut {
				f.output(sum)
			}
			f.fusesInORT(fuseSkipLayerNorm, Context{ORTContrib: true}, Stats{Removed: 2, Added: 1}, -2, 2)
			n := y.Producer()
			if n.OpType != "SkipLayerNormalization" || n.Domain != msDomain || n.Name != ln.Name || f.Model.OpsetVersion(msDomain) != 1 {
				t.Fatalf("%s (domain %q) produces %q; opsets %v", n, n.Domain, y.Name, f.Model.Opsets)
			}
			if n.AttrFloat("epsilon", 0) != 1e-6 || len(n.Inputs()) != 3+btoi(tc.beta) {
				t.Errorf("epsilon %g, %d inputs", n.AttrFloat("epsilon", 0), len(n.Inputs()))
			}
			if want := tc.sumRead || tc.sumOut; want != (n.Output(3) == sum) || want && sum.Producer() != n {
				t.Errorf("outputs %v; the sum %q is produced by %s", n.Outputs(), sum.Name, sum.Producer())
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestFuseSkipLayerNormRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctx    Context
		mutate func(f *fusionFixture, x *graph.Value, add, ln *graph.Node)
	}{
		{"not for ONNX Runtime alone", Context{}, nil},
		{"the Add broadcasts a vector", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			add.SetInput(1, f.weight("v", 8))
		}},
		{"the Add broadcasts over the batch", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			add.SetInput(1, f.weight("v", 1, 5, 8))
		}},
		{"symbolic dims of different names", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			o := f.input("o", 2, 5, 8)
			o.Type = graph.TensorType(graph.Float, graph.Shape{{Kind: graph.DimSymbolic, Param: "n"}, {Kind: graph.DimStatic, Value: 5}, {Kind: graph.DimStatic, Value: 8}})
			x.Type = graph.TensorType(graph.Float, graph.Shape{{Kind: graph.DimSymbolic, Param: "batch"}, {Kind: graph.DimStatic, Value: 5}, {Kind: graph.DimStatic, Value: 8}})
			add.SetInput(1, o)
		}},
		{"normalizes the last two axes", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			f.attrInt(ln, "axis", 1)
			ln.SetInput(1, f.weight("g2", 5, 8))
			ln.SetInput(2, nil)
			ln.TruncateInputs(2)
		}},
		{"the LN's mean output is used", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			mean := f.value("mean")
			if err := ln.SetOutput(1, mean); err != nil {
				panic(err)
			}
			f.output(mean)
		}},
		{"gamma is an input", Context{ORTContrib: true}, func(f *fusionFixture, x *graph.Value, add, ln *graph.Node) {
			ln.SetInput(1, f.input("g", 8))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, 17)
			x := f.input("x", 2, 5, 8)
			add, ln := f.skipLayerNorm(x, false, true)
			f.output(ln.Output(0))
			if tc.mutate != nil {
				tc.mutate(f, x, add, ln)
			}
			f.refuses(fuseSkipLayerNorm, tc.ctx)
		})
	}
}
