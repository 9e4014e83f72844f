package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// bn adds a BatchNormalization over c channels of x, its parameters
// initializers or (inConstants) Constant nodes, with variances and
// scales away from 1 and means and shifts away from 0 so that a fold that
// picks the wrong channel shows.
func (f *fusionFixture) bn(x *graph.Value, c int64, inConstants bool) *graph.Node {
	param := f.init
	if inConstants {
		param = f.constant
	}
	dims := []int64{c}
	n := f.node("BatchNormalization", []*graph.Value{x,
		param("scale", dims, f.random(c, 0.5, 2)),
		param("bias", dims, f.random(c, -1, 1)),
		param("mean", dims, f.random(c, -1, 1)),
		param("var", dims, f.random(c, 0.1, 3)),
	})
	return f.attrFloat(n, "epsilon", 1e-3)
}

var foldedStats = Stats{Removed: 1, Rewritten: 1}

func TestFuseConvBN(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(f *fusionFixture) *graph.Value // returns the op's output, which a BN reads
		c     int64
	}{
		{"conv", func(f *fusionFixture) *graph.Value {
			return f.op("Conv", f.input("x", 2, 3, 6, 6), f.weight("w", 4, 3, 3, 3))
		}, 4},
		{"conv with bias", func(f *fusionFixture) *graph.Value {
			n := f.node("Conv", []*graph.Value{f.input("x", 2, 3, 6, 6), f.weight("w", 4, 3, 3, 3), f.weight("b", 4)})
			return f.attrInts(n, "pads", 1, 1, 1, 1).Output(0)
		}, 4},
		{"conv, weight and bias in Constant nodes", func(f *fusionFixture) *graph.Value {
			w := f.constant("w", []int64{4, 3, 2, 2}, f.random(48, -1, 1))
			return f.op("Conv", f.input("x", 2, 3, 5, 5), w, f.constant("b", []int64{4}, f.random(4, -1, 1)))
		}, 4},
		{"grouped conv", func(f *fusionFixture) *graph.Value {
			n := f.node("Conv", []*graph.Value{f.input("x", 1, 4, 5, 5), f.weight("w", 6, 2, 3, 3), f.weight("b", 6)})
			return f.attrInt(n, "group", 2).Output(0)
		}, 6},
		{"depthwise conv", func(f *fusionFixture) *graph.Value {
			n := f.node("Conv", []*graph.Value{f.input("x", 1, 4, 5, 5), f.weight("w", 4, 1, 3, 3)})
			return f.attrInt(n, "group", 4).Output(0)
		}, 4},
		{"conv 1-D", func(f *fusionFixture) *graph.Value {
			return f.op("Conv", f.input("x", 1, 3, 7), f.weight("w", 5, 3, 2))
		}, 5},
		{"conv transpose", func(f *fusionFixture) *graph.Value {
			n := f.node("ConvTranspose", []*graph.Value{f.input("x", 1, 3, 4, 4), f.weight("w", 3, 5, 2, 2)})
			return f.attrInts(n, "strides", 2, 2).Output(0)
		}, 5},
		{"grouped conv transpose", func(f *fusionFixture) *graph.Value {
			n := f.node("ConvTranspose", []*graph.Value{f.input("x", 1, 4, 4, 4), f.weight("w", 4, 3, 3, 3), f.weight("b", 6)})
			return f.attrInt(n, "group", 2).Output(0)
		}, 6},
		{"conv transpose, 3 groups", func(f *fusionFixture) *graph.Value {
			n := f.node("ConvTranspose", []*graph.Value{f.input("x", 1, 6, 3, 3), f.weight("w", 6, 2, 2, 2)})
			return f.attrInt(n, "group", 3).Output(0)
		}, 6},
		{"gemm", func(f *fusionFixture) *graph.Value {
			return f.op("Gemm", f.input("x", 2, 5), f.weight("w", 5, 3))
		}, 3},
		{"gemm transB, alpha, beta, C [N]", func(f *fusionFixture) *graph.Value {
			n := f.node("Gemm", []*graph.Value{f.input("x", 2, 5), f.weight("w", 3, 5), f.weight("c", 3)})
			return f.attrFloat(f.attrFloat(f.attrInt(n, "transB", 1), "alpha", 0.5), "beta", 2).Output(0)
		}, 3},
		{"gemm transA, beta, C [M, 1]", func(f *fusionFixture) *graph.Value {
			n := f.node("Gemm", []*graph.Value{f.input("x", 5, 2), f.weight("w", 5, 3), f.weight("c", 2, 1)})
			return f.attrFloat(f.attrInt(n, "transA", 1), "beta", -1.5).Output(0)
		}, 3},
		{"gemm transB, C [M, N]", func(f *fusionFixture) *graph.Value {
			n := f.node("Gemm", []*graph.Value{f.input("x", 2, 5), f.weight("w", 3, 5), f.weight("c", 2, 3)})
			return f.attrFloat(f.attrInt(n, "transB", 1), "alpha", 3).Output(0)
		}, 3},
		{"gemm, scalar C", func(f *fusionFixture) *graph.Value {
			return f.op("Gemm", f.input("x", 2, 5), f.weight("w", 5, 3), f.init("c", nil, []float32{0.7}))
		}, 3},
	} {
		for _, constants := range []bool{false, true} {
			name := tc.name
			if constants {
				name += ", BN params in Constant nodes"
			}
			t.Run(name, func(t *testing.T) {
				f := newFusionFixture(t, 13)
				y := f.bn(tc.build(f), tc.c, constants).Output(0)
				f.output(y)
				f.fuses(fuseConvBN, Context{}, foldedStats, -1, 1)
				if f.ops()["BatchNormalization"] != 0 {
					t.Errorf("a BatchNormalization is left")
				}
				if f.Graph.Outputs[0] != y || y.Name != "BatchNormalization_out" || y.Producer() == nil {
					t.Errorf("graph output is %q, want the BN's output kept", f.Graph.Outputs[0].Name)
				}
			})
		}
	}
}

func TestFuseConvBNMatMulBecomesGemm(t *testing.T) {
	f := newFusionFixture(t, 13)
	mm := f.node("MatMul", []*graph.Value{f.input("x", 4, 5), f.weight("w", 5, 3)})
	mm.Name = "fc"
	y := f.op("Relu", f.bn(mm.Output(0), 3, true).Output(0))
	f.output(y)
	f.fuses(fuseConvBN, Context{}, Stats{Removed: 2, Added: 1}, -1, 1)
	ops := f.ops()
	if ops["Gemm"] != 1 || ops["MatMul"] != 0 || ops["BatchNormalization"] != 0 {
		t.Errorf("ops after: %v", ops)
	}
	if g := y.Producer().Input(0).Producer(); g.OpType != "Gemm" || g.Name != "fc" {
		t.Errorf("the Relu reads %s, want Gemm \"fc\"", g)
	}
}

// A weight two convs share stays for the one not foldedStats; the foldedStats conv
// gets a copy.
func TestFuseConvBNSharedWeight(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 1, 3, 4, 4)
	w := f.weight("w", 4, 3, 1, 1)
	a := f.op("Conv", x, w)
	b := f.op("Conv", x, w)
	f.output(f.bn(a, 4, false).Output(0))
	f.output(f.op("Relu", b))
	f.output(f.op("Neg", b))
	f.fuses(fuseConvBN, Context{}, foldedStats, -1, 1)
	if len(w.Uses()) != 1 || w.Uses()[0].Node != b.Producer() {
		t.Errorf("the shared weight has %d readers, want the unfolded conv", len(w.Uses()))
	}
	if _, err := runDeadCode(&Context{Model: f.Model}); err != nil {
		t.Fatal(err)
	}
	if f.Graph.Value("w") == nil {
		t.Errorf("dead-code elimination removed the weight the other conv reads")
	}
}

func TestFuseConvBNRefuses(t *testing.T) {
	half := func(f *fusionFixture, name string, dims ...int64) *graph.Value {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		tn, err := graph.NewTensor(name, graph.Float16, dims, make([]byte, 2*n))
		if err != nil {
			t.Fatal(err)
		}
		v, err := f.Graph.AddInitializer(tn)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	conv := func(f *fusionFixture) *graph.Value {
		return f.op("Conv", f.input("x", 1, 3, 4, 4), f.weight("w", 4, 3, 3, 3))
	}
	for _, tc := range []struct {
		name  string
		opset int64
		build func(f *fusionFixture)
	}{
		{"conv output has two consumers", 13, func(f *fusionFixture) {
			y := conv(f)
			f.output(f.bn(y, 4, false).Output(0))
			f.output(f.op("Relu", y))
		}},
		{"conv output is a graph output", 13, func(f *fusionFixture) {
			y := conv(f)
			f.output(f.bn(y, 4, false).Output(0))
			f.output(y)
		}},
		{"BN mean not constant", 13, func(f *fusionFixture) {
			n := f.bn(conv(f), 4, false)
			n.SetInput(3, f.input("mean", 4))
			f.output(n.Output(0))
		}},
		{"BN scale is a graph input with an initializer", 13, func(f *fusionFixture) {
			n := f.bn(conv(f), 4, false)
			f.Graph.Inputs = append(f.Graph.Inputs, n.Input(1))
			f.output(n.Output(0))
		}},
		{"BN with training-mode outputs", 13, func(f *fusionFixture) {
			n := f.bn(conv(f), 4, false)
			for i := 1; i <= 2; i++ {
				if err := n.SetOutput(i, f.value("stat")); err != nil {
					t.Fatal(err)
				}
			}
			f.output(n.Output(0))
		}},
		{"BN training_mode 1", 15, func(f *fusionFixture) {
			f.output(f.attrInt(f.bn(conv(f), 4, false), "training_mode", 1).Output(0))
		}},
		{"BN spatial 0", 7, func(f *fusionFixture) {
			f.output(f.attrInt(f.bn(conv(f), 4, false), "spatial", 0).Output(0))
		}},
		{"BN params of the wrong length", 13, func(f *fusionFixture) {
			f.output(f.bn(conv(f), 3, false).Output(0))
		}},
		{"conv weight not constant", 13, func(f *fusionFixture) {
			y := f.op("Conv", f.input("x", 1, 3, 4, 4), f.input("w", 4, 3, 3, 3))
			f.output(f.bn(y, 4, false).Output(0))
		}},
		{"float16 conv weight", 13, func(f *fusionFixture) {
			y := f.op("Conv", f.input("x", 1, 3, 4, 4), half(f, "w", 4, 3, 3, 3))
			f.output(f.bn(y, 4, false).Output(0))
		}},
		{"conv bias not constant", 13, func(f *fusionFixture) {
			y := f.op("Conv", f.input("x", 1, 3, 4, 4), f.weight("w", 4, 3, 3, 3), f.input("b", 4))
			f.output(f.bn(y, 4, false).Output(0))
		}},
		{"conv transpose, group does not divide W", 13, func(f *fusionFixture) {
			n := f.node("ConvTranspose", []*graph.Value{f.input("x", 1, 3, 4, 4), f.weight("w", 3, 2, 2, 2)})
			f.output(f.bn(f.attrInt(n, "group", 2).Output(0), 4, false).Output(0))
		}},
		{"MatMul with a 3-D input", 13, func(f *fusionFixture) {
			y := f.op("MatMul", f.input("x", 2, 3, 5), f.weight("w", 5, 3))
			f.output(f.bn(y, 3, false).Output(0))
		}},
		{"MatMul with an input of unknown rank", 13, func(f *fusionFixture) {
			x := f.value("x")
			f.Graph.Inputs = append(f.Graph.Inputs, x)
			f.output(f.bn(f.op("MatMul", x, f.weight("w", 5, 3)), 3, false).Output(0))
		}},
		{"Gemm C not constant", 13, func(f *fusionFixture) {
			y := f.op("Gemm", f.input("x", 2, 5), f.weight("w", 5, 3), f.input("c", 3))
			f.output(f.bn(y, 3, false).Output(0))
		}},
		{"BN after Relu", 13, func(f *fusionFixture) {
			f.output(f.bn(f.op("Relu", conv(f)), 4, false).Output(0))
		}},
		{"zero variance and epsilon", 13, func(f *fusionFixture) {
			n := f.attrFloat(f.bn(conv(f), 4, false), "epsilon", 0)
			n.SetInput(4, f.init("var0", []int64{4}, []float32{1, 0, 1, 1}))
			f.output(n.Output(0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, tc.opset)
			tc.build(f)
			f.refuses(fuseConvBN, Context{})
		})
	}
}
