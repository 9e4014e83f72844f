package quantize

import (
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// smoothModel is x [2, 4] * gamma + beta read by two MatMuls (the end of
// an unfused LayerNorm feeding q and k projections).
func smoothModel(t *testing.T) *builder {
	b := newBuilder(t, 13)
	x := b.Input("x", 2, 4)
	mul := b.Node("ln_mul", "Mul", x, b.Floats("gamma", []int64{4}, 1, 2, 0.5, 3))
	add := b.Node("ln_add", "Add", mul.Output(0), b.Floats("beta", []int64{4}, 0.1, -0.2, 0.3, 0))
	q := b.Node("q", "MatMul", add.Output(0), b.weight("wq", 1, 4, 3))
	k := b.Node("k", "MatMul", add.Output(0), b.weight("wk", 1, 4, 2))
	b.Output(q.Output(0), 2, 3)
	b.Output(k.Output(0), 2, 2)
	return b
}

// evalSmooth computes the two MatMul outputs of smoothModel (as rewritten)
// on x, from the constants the nodes read now.
func evalSmooth(t *testing.T, m *graph.Model, x []float32) [][]float64 {
	t.Helper()
	node := func(name string) *graph.Node {
		for _, n := range m.Graph.Nodes {
			if n.Name == name {
				return n
			}
		}
		t.Fatalf("no node %q", name)
		return nil
	}
	c := func(n *graph.Node, i int) ([]float32, []int64) {
		tt, v := floatConst(n.Input(i))
		if tt == nil {
			t.Fatalf("%s input %d is not a constant", n.Name, i)
		}
		return v, tt.Dims
	}
	g, _ := c(node("ln_mul"), 1)
	be, _ := c(node("ln_add"), 1)
	act := make([]float64, len(x))
	for i := range x {
		act[i] = float64(x[i])*float64(g[i%4]) + float64(be[i%4])
	}
	var outs [][]float64
	for _, name := range []string{"q", "k"} {
		w, d := c(node(name), 1)
		n := int(d[1])
		y := make([]float64, 2*n)
		for r := range 2 {
			for j := range n {
				for k := range 4 {
					y[r*n+j] += act[r*4+k] * float64(w[k*n+j])
				}
			}
		}
		outs = append(outs, y)
	}
	return outs
}

func TestSmoothKeepsTheFunction(t *testing.T) {
	b := smoothModel(t)
	groups := SmoothGroups(b.Model)
	if len(groups) != 1 || groups[0].Producer != "ln_add" || len(groups[0].Layers) != 2 || groups[0].Channels != 4 {
		t.Fatalf("groups = %+v, want one over ln_add with layers q and k and 4 channels", groups)
	}
	x := []float32{1, -8, 0.5, 40, -2, 6, 0.1, -30}
	before := evalSmooth(t, b.Model, x)
	// Channel 3 is the outlier: its scale must be the largest.
	s, err := SmoothScales(b.Model, groups[0], []float64{1, 16, 0.5, 120}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if s[i] >= s[3] {
			t.Errorf("scales %v: the outlier channel 3 should get the largest", s)
		}
	}
	if err := Smooth(b.Model, groups[0], s); err != nil {
		t.Fatal(err)
	}
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	after := evalSmooth(t, b.Model, x)
	for o := range before {
		for i := range before[o] {
			if d := math.Abs(before[o][i] - after[o][i]); d > 1e-4*math.Max(1, math.Abs(before[o][i])) {
				t.Errorf("output %d[%d]: %g before smoothing, %g after", o, i, before[o][i], after[o][i])
			}
		}
	}
	// The old constants are gone, nothing is left dangling.
	for _, name := range []string{"gamma", "beta", "wq", "wk"} {
		if b.Graph.Value(name) != nil {
			t.Errorf("initializer %q is still in the graph", name)
		}
	}
}

func TestSmoothGroupsNeedEveryReaderALayer(t *testing.T) {
	b := smoothModel(t)
	// A Relu also reads the activation: dividing it by s would change it.
	act := b.Graph.Value("ln_add_out")
	r := b.Node("side", "Relu", act)
	b.Output(r.Output(0), 2, 4)
	if g := SmoothGroups(b.Model); len(g) != 0 {
		t.Errorf("groups = %+v, want none: a Relu reads the activation too", g)
	}
}

func TestSmoothGroupsLayerNormalization(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.Input("x", 2, 4)
	ln := b.Node("ln", "LayerNormalization", x, b.Floats("scale", []int64{4}, 1, 1, 1, 1), b.Floats("bias", []int64{4}, 0, 0, 0, 0))
	fc := b.Node("fc", "Gemm", ln.Output(0), b.weight("w", 1, 3, 4))
	fc.SetAttr(intAttr("transB", 1))
	b.Output(fc.Output(0), 2, 3)
	g := SmoothGroups(b.Model)
	if len(g) != 1 || g[0].Producer != "ln" || g[0].Channels != 4 {
		t.Fatalf("groups = %+v, want one over ln with 4 channels", g)
	}
	_, w0 := floatConst(fc.Input(1))
	s := []float64{1, 2, 4, 8}
	if err := Smooth(b.Model, g[0], s); err != nil {
		t.Fatal(err)
	}
	// Gemm with transB: the weight is [N, K]; column k takes s_k.
	_, w := floatConst(fc.Input(1))
	for i := range w {
		if want := w0[i] * float32(s[i%4]); math.Abs(float64(w[i]-want)) > 1e-6 {
			t.Errorf("weight[%d] = %g, want %g", i, w[i], want)
		}
	}
	_, scale := floatConst(ln.Input(1))
	for k := range 4 {
		if math.Abs(float64(scale[k])-1/s[k]) > 1e-6 {
			t.Errorf("scale[%d] = %g, want %g", k, scale[k], 1/s[k])
		}
	}
}

func TestShiftBias(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.Input("x", 1, 2, 4, 4)
	conv := b.Node("conv", "Conv", x, b.weight("w", 1, 3, 2, 1, 1))
	b.Output(conv.Output(0), 1, 3, 4, 4)
	if ok, why := shiftBias(b.Graph, conv, []float32{1, 2}); ok || why == "" {
		t.Errorf("2 shifts for 3 channels: shifted %v (%q), want a refusal", ok, why)
	}
	if ok, why := shiftBias(b.Graph, conv, []float32{1, 2, 3}); !ok {
		t.Fatalf("shiftBias: %s", why)
	}
	_, bias := floatConst(conv.Input(2))
	if len(bias) != 3 || bias[0] != 1 || bias[2] != 3 {
		t.Errorf("bias = %v, want [1 2 3] (a Conv without one gets one)", bias)
	}
	if ok, _ := shiftBias(b.Graph, conv, []float32{1, 1, 1}); !ok {
		t.Fatal("second shift refused")
	}
	if _, bias = floatConst(conv.Input(2)); bias[0] != 2 || bias[2] != 4 {
		t.Errorf("bias = %v, want [2 3 4]", bias)
	}
	// A MatMul's bias is its Add's constant.
	mb := newBuilder(t, 13)
	in := mb.Input("x", 2, 4)
	mm := mb.Node("mm", "MatMul", in, mb.weight("w", 1, 4, 2))
	add := mb.Node("bias", "Add", mm.Output(0), mb.Floats("b", []int64{2}, 0.5, 0.5))
	mb.Output(add.Output(0), 2, 2)
	if ok, why := shiftBias(mb.Graph, mm, []float32{-0.5, 1}); !ok {
		t.Fatalf("MatMul + Add: %s", why)
	}
	if _, v := floatConst(add.Input(1)); v[0] != 0 || v[1] != 1.5 {
		t.Errorf("Add constant = %v, want [0 1.5]", v)
	}
}

// TestRoundedWeights: Options.Rounded replaces round-to-nearest with the
// caller's values on the same per-channel grid.
func TestRoundedWeights(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.Input("x", 1, 2)
	mm := b.Node("fc", "MatMul", x, b.Floats("w", []int64{2, 2}, 1.0, -0.5, 0.26, 0.5))
	b.Output(mm.Output(0), 1, 2)
	// qmax 127 (no reduce-range): column scales 1/127 and 0.5/127. The
	// caller rounds w[1][0] (0.26, nearest code 33) to code 32.
	off := false
	rounded := []float32{1.0, -0.5, 32.0 / 127, 0.5}
	ranges := map[string][2]float64{"x": {-1, 1}, "fc_out": {-2, 2}}
	if _, err := Apply(b.Model, ranges, Options{ReduceRange: &off, Rounded: map[string][]float32{"fc": rounded}}); err != nil {
		t.Fatal(err)
	}
	dq := mm.Input(1).Producer()
	if !isOp(dq, "DequantizeLinear") {
		t.Fatalf("weight read through %v", dq)
	}
	codes, err := dq.Input(0).ConstantTensor().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if got := []int8{int8(codes[0]), int8(codes[1]), int8(codes[2]), int8(codes[3])}; got[0] != 127 || got[1] != -127 || got[2] != 32 || got[3] != 127 {
		t.Errorf("codes %v, want [127 -127 32 127]", got)
	}
}

// TestEqualize: conv -> Relu -> conv with one channel's weights 100x the
// other's: equalized, the first conv's channel ranges meet, and the model
// computes the same (checked by evaluating both convs by hand on 1x1
// kernels).
func TestEqualize(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.Input("x", 1, 2, 1, 1)
	c1 := b.Node("c1", "Conv", x, b.Floats("w1", []int64{2, 2, 1, 1}, 100, 50, 1, -1), b.Floats("b1", []int64{2}, 10, 0.5))
	r := b.Node("r", "Relu", c1.Output(0))
	c2 := b.Node("c2", "Conv", r.Output(0), b.Floats("w2", []int64{1, 2, 1, 1}, 0.01, 2))
	b.Output(c2.Output(0), 1, 1, 1, 1)
	eval := func(in [2]float64) float64 {
		_, w1 := floatConst(c1.Input(1))
		_, b1 := floatConst(c1.Input(2))
		_, w2 := floatConst(c2.Input(1))
		var y float64
		for c := range 2 {
			h := float64(w1[2*c])*in[0] + float64(w1[2*c+1])*in[1] + float64(b1[c])
			y += float64(w2[c]) * math.Max(h, 0)
		}
		return y
	}
	ins := [][2]float64{{1, 2}, {-0.5, 3}, {0.2, -0.1}}
	var before []float64
	for _, in := range ins {
		before = append(before, eval(in))
	}
	pairs, err := Equalize(b.Model, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || pairs[0].Activation != "r" || pairs[0].SpreadBefore < 50 || pairs[0].SpreadAfter > 1.01*math.Sqrt(pairs[0].SpreadBefore)+1e-9 {
		t.Fatalf("pairs %+v: want c1 -> r -> c2, the spread of c1's channel ranges shrunk", pairs)
	}
	for i, in := range ins {
		if got := eval(in); math.Abs(got-before[i]) > 1e-4*math.Max(1, math.Abs(before[i])) {
			t.Errorf("input %v: %g before, %g after", in, before[i], got)
		}
	}
	// A Clip (Relu6) between stops it: x/s clipped at 6 is not x clipped at 6, over s.
	b2 := newBuilder(t, 13)
	x2 := b2.Input("x", 1, 2, 1, 1)
	d1 := b2.Node("d1", "Conv", x2, b2.Floats("w1", []int64{2, 2, 1, 1}, 100, 50, 1, -1))
	cl := b2.Node("clip", "Clip", d1.Output(0), b2.Floats("lo", nil, 0), b2.Floats("hi", nil, 6))
	d2 := b2.Node("d2", "Conv", cl.Output(0), b2.Floats("w2", []int64{1, 2, 1, 1}, 0.01, 2))
	b2.Output(d2.Output(0), 1, 1, 1, 1)
	if pairs, _ := Equalize(b2.Model, 1); len(pairs) != 0 {
		t.Errorf("equalized across a Clip: %+v", pairs)
	}
}
