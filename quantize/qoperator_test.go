package quantize

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/testgraph"
)

// qopNet: x[4,3,8,8] -> conv1 (bias) -> relu1 -> conv2 (bias) -> clip2
// [0, 6] -> conv3 (bias, stride 2) -> flatten -> matmul1 -> matmul2 -> z.
// Quantized for ort, conv1..3 and matmul1 are QDQ groups with their
// output quantized (after relu1, after clip2, directly, directly); matmul2
// computes the float graph output.
func qopNet(t testing.TB) *builder {
	b := newBuilder(t, 13)
	x := b.Input("x", 4, 3, 8, 8)
	c1 := b.paddedConv("conv1", x, b.weight("W1", 0.5, 8, 3, 3, 3), b.weight("b1", 0.3, 8))
	r1 := b.Node("relu1", "Relu", c1.Output(0))
	c2 := b.paddedConv("conv2", r1.Output(0), b.weight("W2", 0.3, 8, 8, 3, 3), b.weight("b2", 0.2, 8))
	cl := b.Node("clip2", "Clip", c2.Output(0), b.Floats("clip_min", nil, 0), b.Floats("clip_max", nil, 6))
	c3 := b.paddedConv("conv3", cl.Output(0), b.weight("W3", 0.3, 4, 8, 3, 3), b.weight("b3", 0.2, 4))
	c3.SetAttr(ints("strides", 2, 2))
	fl := b.Node("flatten", "Flatten", c3.Output(0))
	m1 := b.Node("matmul1", "MatMul", fl.Output(0), b.weight("M1", 0.1, 64, 16))
	m2 := b.Node("matmul2", "MatMul", m1.Output(0), b.weight("M2", 0.3, 16, 5))
	b.Output(m2.Output(0), 4, 5)
	return b
}

// quantizedNames are qopNet's Q outputs that ToQOperator's operators
// compute instead.
var quantizedNames = []string{"relu1_out_quantized", "clip2_out_quantized", "conv3_out_quantized", "matmul1_out_quantized"}

// quantizeReduceRange quantizes m for ort with reduce-range at these
// activation ranges.
func quantizeReduceRange(t testing.TB, m *graph.Model, ranges map[string][2]float64) {
	t.Helper()
	if _, err := Apply(m, ranges, Options{ReduceRange: boolp(true)}); err != nil {
		t.Fatal(err)
	}
}

// rewriteQOperator runs ToQOperator on m, which must still verify after.
func rewriteQOperator(t testing.TB, m *graph.Model) *QOperatorReport {
	t.Helper()
	rep, err := ToQOperator(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestToQOperatorRewritesQopNet(t *testing.T) {
	b := qopNet(t)
	before := testgraph.Marshal(t, b.Model)
	ranges := measure(t, before, "random", data.Options{Samples: 256, Seed: 3}, activationNames(b.Model))
	quantizeReduceRange(t, b.Model, ranges)
	qdq := testgraph.Marshal(t, b.Model)
	rep := rewriteQOperator(t, b.Model)
	g := b.Graph
	if rep.QLinearConv != 3 || rep.QLinearMatMul != 1 || len(rep.Rewritten) != 4 || len(rep.KeptQDQ) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if k := rep.KeptQDQ[0]; k.Op != "MatMul" || !strings.Contains(k.Detail, "graph output") {
		t.Errorf("kept %+v, want matmul2 for its float graph output", k)
	}
	for _, op := range []string{"Conv", "Relu", "Clip"} {
		if c := countOps(g, op); c != 0 {
			t.Errorf("%d %s left", c, op)
		}
	}
	// Left: x's Q; flatten's DQ and Q; matmul2's two DQs (activation and
	// weight). Every other Q/DQ was absorbed, and the float clip bounds
	// went with the Clip.
	if q, dq := countOps(g, "QuantizeLinear"), countOps(g, "DequantizeLinear"); q != 2 || dq != 3 {
		t.Errorf("%d Q and %d DQ left, want 2 and 3", q, dq)
	}
	for _, name := range []string{"clip_min", "clip_max", "conv1_out", "relu1_out", "relu1_out_dequantized"} {
		if g.Value(name) != nil {
			t.Errorf("%q was kept", name)
		}
	}
	for _, name := range quantizedNames {
		if pr := v(t, g, name).Producer(); pr == nil || !strings.HasPrefix(pr.OpType, "QLinear") {
			t.Errorf("%q is computed by %v", name, pr)
		}
	}
	if n := node(t, g, "conv3"); n.OpType != "QLinearConv" || len(n.Inputs()) != 9 || len(n.AttrInts("strides")) != 2 {
		t.Errorf("conv3 became %s with %d inputs and attributes %v", n.OpType, len(n.Inputs()), n.Attrs)
	}
	qop := testgraph.Marshal(t, b.Model)

	// In ORT the quantized operators compute what the QDQ groups do to
	// within one quantization step, at level disable (float ops between
	// Q/DQ) and all (ORT fuses the QDQ groups itself).
	x := randomInput(t, "x", []int64{4, 3, 8, 8}, 7)
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		want := runExposed(t, qdq, level, x, quantizedNames)
		got := runExposed(t, qop, level, x, quantizedNames)
		for i, name := range append([]string{"matmul2_out"}, quantizedNames...) {
			w, gv := tensorValues(t, want[i]), tensorValues(t, got[i])
			worst, differ := 0.0, 0
			for j := range w {
				d := math.Abs(w[j] - gv[j])
				worst = max(worst, d)
				if d != 0 {
					differ++
				}
			}
			step := 1.0 // the integer tensors: one step is 1
			if i == 0 {
				// z = DQ(matmul1 q) x DQ(M2): one step of matmul1's output
				// moves an element of z by at most its scale times the
				// largest column sum of |M2|.
				step = outputStepBound(t, g)
			}
			t.Logf("level %v %s: max difference %g (one step %g), %d of %d elements differ", level, name, worst, step, differ, len(w))
			if worst > step {
				t.Errorf("level %v %s: QOperator and QDQ differ by %g, more than one step (%g)", level, name, worst, step)
			}
		}
	}
}

// outputStepBound is how far one step of matmul1's quantized output can
// move qopNet's float output z.
func outputStepBound(t *testing.T, g *graph.Graph) float64 {
	mm := node(t, g, "matmul2")
	scale := f32s(t, dqOf(t, mm.Input(0)).Input(1))[0]
	wdq := dqOf(t, mm.Input(1))
	w, ws := int8s(t, wdq.Input(0)), f32s(t, wdq.Input(1))
	cols := len(ws)
	worst := 0.0
	for c := range cols {
		sum := 0.0
		for k := c; k < len(w); k += cols {
			sum += math.Abs(float64(w[k]) * float64(ws[c]))
		}
		worst = max(worst, sum)
	}
	return float64(scale) * worst
}

func randomInput(t *testing.T, name string, dims []int64, seed int64) *graph.Tensor {
	t.Helper()
	b := newBuilder(t, 13)
	b.rng.Seed(seed)
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(b.rng.Float64())
	}
	x, err := graph.NewFloat32Tensor(name, dims, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// runExposed runs model at level on x with names exposed as outputs after
// the model's own.
func runExposed(t *testing.T, model []byte, level ort.Level, x *graph.Tensor, names []string) []*graph.Tensor {
	t.Helper()
	_, s, _ := exposedSession(t, model, names, ort.Options{Level: level})
	defer s.Close()
	res, err := s.Run([]*graph.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tensorValues reads a float32 or uint8 tensor as float64s.
func tensorValues(t *testing.T, x *graph.Tensor) []float64 {
	t.Helper()
	switch x.DType {
	case graph.Float:
		f, err := x.Float32s()
		return float64s(t, f, err)
	case graph.Uint8:
		b, err := x.Bytes()
		return float64s(t, b, err)
	}
	t.Fatalf("%s: unexpected %s", x.Name, x.DType)
	return nil
}

// float64s widens vals, read with error err, to float64s.
func float64s[T float32 | byte](t *testing.T, vals []T, err error) []float64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = float64(v)
	}
	return out
}

// TestToQOperatorKeepsInexactGroups: a Relu or Clip the output range does
// not make a no-op, an output also read in float, a Gemm and a float bias
// keep their groups QDQ, each with its reason, and change nothing.
func TestToQOperatorKeepsInexactGroups(t *testing.T) {
	// qopNet with ranges that make relu1 and clip2 matter: relu1's output
	// range reaches below 0 (zero point > 0), clip2's goes past 6.
	ranges := map[string][2]float64{
		"x": {0, 1}, "conv1_out": {-3, 3}, "relu1_out": {-1, 3}, "conv2_out": {-4, 8}, "clip2_out": {0, 10},
		"conv3_out": {-3, 3}, "flatten_out": {-3, 3}, "matmul1_out": {-2, 2}, "matmul2_out": {-2, 2},
	}
	b := qopNet(t)
	quantizeReduceRange(t, b.Model, ranges)
	rep := rewriteQOperator(t, b.Model)
	kept := map[string]string{}
	for _, k := range rep.KeptQDQ {
		kept[k.Node] = k.Detail
	}
	for name, want := range map[string]string{
		"conv1":   "above the output range's low end (zero point 64)",
		"conv2":   "clips at 6, inside the output range",
		"matmul2": "graph output",
	} {
		if got := kept[node(t, b.Graph, name).String()]; !strings.Contains(got, want) {
			t.Errorf("%s: kept for %q, want %q", name, got, want)
		}
	}
	if rep.QLinearConv != 1 || rep.QLinearMatMul != 1 || countOps(b.Graph, "Relu") != 1 || countOps(b.Graph, "Clip") != 1 {
		t.Errorf("report %+v; %d Relu, %d Clip left", rep, countOps(b.Graph, "Relu"), countOps(b.Graph, "Clip"))
	}
}

// TestToQOperatorKeepsGemm: convNet's Gemm has its output quantized for
// the MatMul after it, but ONNX has no quantized Gemm.
func TestToQOperatorKeepsGemm(t *testing.T) {
	b := convNet(t)
	quantizeReduceRange(t, b.Model, convNetRanges)
	rep := rewriteQOperator(t, b.Model)
	if rep.QLinearConv != 2 || rep.QLinearMatMul != 0 || len(rep.KeptQDQ) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if k := rep.KeptQDQ[0]; k.Op != "Gemm" || !strings.Contains(k.Detail, "QGemm is com.microsoft") {
		t.Errorf("kept %+v", k)
	}
	if node(t, b.Graph, "gemm").OpType != "Gemm" || countOps(b.Graph, "QLinearConv") != 2 {
		t.Error("the Gemm group was changed")
	}
}

// TestToQOperatorNothingToRewrite: a float model, and a QDQ model whose
// only group is a Gemm, come out byte for byte as they went in.
func TestToQOperatorNothingToRewrite(t *testing.T) {
	float := qopNet(t)
	gemm := newBuilder(t, 13)
	x := gemm.Input("x", 2, 6)
	gm := gemm.Node("gemm", "Gemm", x, gemm.weight("B", 0.5, 6, 3), gemm.weight("C", 0.2, 3))
	gemm.Output(gm.Output(0), 2, 3)
	if _, err := Apply(gemm.Model, map[string][2]float64{"x": {-1, 3}, "gemm_out": {-2, 2}}, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*builder{"float": float, "gemm": gemm} {
		before := testgraph.Marshal(t, b.Model)
		rep, err := ToQOperator(b.Model)
		if err != nil {
			t.Fatal(err)
		}
		if rep.QLinearConv+rep.QLinearMatMul != 0 || len(rep.Rewritten) != 0 {
			t.Errorf("%s: report %+v", name, rep)
		}
		if !bytes.Equal(before, testgraph.Marshal(t, b.Model)) {
			t.Errorf("%s: the model changed", name)
		}
	}
}

func TestApplyFormat(t *testing.T) {
	b := qopNet(t)
	rep, err := Apply(b.Model, map[string][2]float64{
		"x": {0, 1}, "relu1_out": {0, 3}, "clip2_out": {0, 6}, "conv3_out": {-3, 3}, "flatten_out": {-3, 3},
		"matmul1_out": {-2, 2}, "matmul2_out": {-2, 2}, "conv1_out": {-3, 3}, "conv2_out": {-4, 8},
	}, Options{Format: FormatQOperator, ReduceRange: boolp(true)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if rep.Format != FormatQOperator || rep.QOperator == nil || rep.QOperator.QLinearConv != 3 || countOps(b.Graph, "QLinearConv") != 3 {
		t.Errorf("report %+v, qoperator %+v", rep, rep.QOperator)
	}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Format: "qlinear"}, `unknown format "qlinear"`},
		{Options{Format: FormatQOperator, Target: TargetTensorRT}, `format "qoperator" is for target "ort"`},
	} {
		if _, err := Apply(qopNet(t).Model, nil, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opts, err, c.want)
		}
	}
}

// TestMNISTQOperator quantizes the MNIST CNN in both formats (reduce-range
// chosen for this CPU) and scores both on the 2004 held-out digits at ORT
// level disable and all: their accuracy must agree within 0.1 points.
func TestMNISTQOperator(t *testing.T) {
	fp32, ranges, test, labels := mnistSetup(t)
	models := map[Format][]byte{}
	for _, f := range []Format{FormatQDQ, FormatQOperator} {
		m, err := graph.LoadFile(fp32)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Apply(m, ranges, Options{Format: f})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Verify(); err != nil {
			t.Fatal(err)
		}
		if f == FormatQOperator {
			q := rep.QOperator
			if q == nil || q.QLinearConv != 3 || len(q.KeptQDQ) != 1 || q.KeptQDQ[0].Op != "Gemm" || countOps(m.Graph, "Conv") != 0 {
				t.Fatalf("qoperator report %+v", q)
			}
			t.Logf("kept QDQ: %s: %s", q.KeptQDQ[0].Node, q.KeptQDQ[0].Detail)
		}
		models[f] = testgraph.Marshal(t, m)
		m.Close()
	}
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		acc := map[Format]float64{}
		for f, b := range models {
			res, err := compare.Models(compare.Options{ModelA: fp32, ModelB: string(f), BInMemory: graph.Serialized{Bytes: b}, Data: test,
				DataOpts: data.Options{Batch: 100}, Labels: labels, Session: ort.Options{Level: level, Provider: "cpu"},
				Atol: map[string]float64{"": 1}})
			if err != nil {
				t.Fatal(err)
			}
			acc[f] = res.Accuracy.B
		}
		t.Logf("level %v: FP32 98.70%%, QDQ %.2f%%, QOperator %.2f%%", level, acc[FormatQDQ], acc[FormatQOperator])
		if d := math.Abs(acc[FormatQDQ] - acc[FormatQOperator]); d > 0.1 {
			t.Errorf("level %v: QDQ %.2f%% and QOperator %.2f%% differ by %.2f points", level, acc[FormatQDQ], acc[FormatQOperator], d)
		}
	}
}

// handQDQ is one hand-written QDQ Conv group: x -> Q -> DQ, int8 weight ->
// DQ, int32 bias -> DQ, Conv [-> Relu] -> Q -> DQ -> y.
type handQDQ struct {
	xType, yType graph.DataType // int8 or uint8 activations
	xZero, yZero byte
	weightZero   int8
	biasScale    float32 // multiplies the correct bias scale
	relu         bool
}

func (h handQDQ) build(t *testing.T) *builder {
	b := newBuilder(t, 13)
	x := b.Input("x", 2, 2, 5, 5)
	node := func(name, op string, ins ...*graph.Value) *graph.Value { return b.Node(name, op, ins...).Output(0) }
	xs, ys, ws := float32(1.0/255), float32(0.05), []float32{0.01, 0.02, 0.015}
	xScale, xZero := b.Floats("x_scale", nil, xs), b.Init("x_zp", h.xType, nil, []byte{h.xZero})
	xdq := node("xdq", "DequantizeLinear", node("xq", "QuantizeLinear", x, xScale, xZero), xScale, xZero)
	w := make([]byte, 3*2*3*3)
	// Full-range weights where ORT's integer kernels take them; ±63 on
	// x86 without VNNI, whose U8S8 kernels saturate with full-range
	// weights (QLinearConv would then differ from the QDQ float form).
	wmax := 127
	if saturatingCPU() {
		wmax = 63
	}
	for i := range w {
		w[i] = byte(int8(b.rng.Intn(2*wmax+1) - wmax))
	}
	wdq := b.Node("wdq", "DequantizeLinear", b.Init("w", graph.Int8, []int64{3, 2, 3, 3}, w),
		b.Floats("w_scale", []int64{3}, ws...), b.Init("w_zp", graph.Int8, []int64{3}, []byte{byte(h.weightZero), 0, 0}))
	wdq.SetAttr(intAttr("axis", 0))
	bias, bScale := make([]byte, 12), make([]float32, 3)
	for c := range 3 {
		bias[4*c] = byte(10 * (c + 1))
		bScale[c] = float32(float64(xs)*float64(ws[c])) * h.biasScale
	}
	bdq := b.Node("bdq", "DequantizeLinear", b.Init("b", graph.Int32, []int64{3}, bias),
		b.Floats("b_scale", []int64{3}, bScale...), b.Init("b_zp", graph.Int32, []int64{3}, make([]byte, 12)))
	bdq.SetAttr(intAttr("axis", 0))
	conv := b.paddedConv("conv", xdq, wdq.Output(0), bdq.Output(0))
	y := conv.Output(0)
	if h.relu {
		y = node("relu", "Relu", y)
	}
	yScale, yZero := b.Floats("y_scale", nil, ys), b.Init("y_zp", h.yType, nil, []byte{h.yZero})
	out := node("ydq", "DequantizeLinear", node("yq", "QuantizeLinear", y, yScale, yZero), yScale, yZero)
	b.Output(out, 2, 3, 5, 5)
	return b
}

// TestToQOperatorHandBuilt: the conditions on a QDQ Conv group, one at a
// time; the groups rewritten must match their QDQ form in ORT.
func TestToQOperatorHandBuilt(t *testing.T) {
	for _, c := range []struct {
		name string
		h    handQDQ
		kept string // "" when rewritten
	}{
		{"uint8", handQDQ{xType: graph.Uint8, yType: graph.Uint8, yZero: 100, biasScale: 1}, ""},
		{"uint8 relu zero point 0", handQDQ{xType: graph.Uint8, yType: graph.Uint8, biasScale: 1, relu: true}, ""},
		{"int8 relu zero point -128", handQDQ{xType: graph.Int8, yType: graph.Int8, yZero: 0x80, biasScale: 1, relu: true}, ""},
		{"int8 relu zero point 0", handQDQ{xType: graph.Int8, yType: graph.Int8, biasScale: 1, relu: true}, "above the output range's low end"},
		{"mixed types", handQDQ{xType: graph.Int8, yType: graph.Uint8, biasScale: 1}, "input quantized to int8, output to uint8"},
		{"weight zero point", handQDQ{xType: graph.Uint8, yType: graph.Uint8, weightZero: 3, biasScale: 1}, "zero points are not all 0"},
		{"bias scale", handQDQ{xType: graph.Uint8, yType: graph.Uint8, biasScale: 1.01}, "not input scale x weight scale"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.h.build(t)
			qdq := testgraph.Marshal(t, b.Model)
			rep := rewriteQOperator(t, b.Model)
			qop := testgraph.Marshal(t, b.Model)
			if c.kept != "" {
				if len(rep.KeptQDQ) != 1 || !strings.Contains(rep.KeptQDQ[0].Detail, c.kept) || !bytes.Equal(qdq, qop) {
					t.Errorf("report %+v, model changed %v; want kept for %q", rep, !bytes.Equal(qdq, qop), c.kept)
				}
				return
			}
			if rep.QLinearConv != 1 || countOps(b.Graph, "Conv")+countOps(b.Graph, "Relu") != 0 || len(b.Graph.Initializers) != 8 { // the bias scale and zero point went with its DQ
				t.Fatalf("report %+v; %d initializers left", rep, len(b.Graph.Initializers))
			}
			x := randomInput(t, "x", []int64{2, 2, 5, 5}, 11)
			for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
				want, got := runExposed(t, qdq, level, x, nil), runExposed(t, qop, level, x, nil)
				w, g := tensorValues(t, want[0]), tensorValues(t, got[0])
				for i := range w {
					if math.Abs(w[i]-g[i]) > 0.05*1.0001 { // one step of y
						t.Fatalf("level %v element %d: QDQ %g, QOperator %g", level, i, w[i], g[i])
					}
				}
			}
		})
	}
}
