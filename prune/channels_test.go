package prune

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// builder makes small float32 models whose doomed channels have tiny
// weights, so that a correct pruning computes (nearly) what the original
// did and a wrong slice shows.
type builder struct {
	*testgraph.Builder
	rnd *rand.Rand
}

// exact prunes the small test graphs channel by channel, not in multiples
// of 8.
var exact = Options{ChannelMultiple: 1}

func newBuilder(t *testing.T, input []int64) (*builder, *graph.Value) {
	b := &builder{Builder: testgraph.New(t, "g", 13), rnd: rand.New(rand.NewSource(1))}
	return b, b.Input("x", input...)
}

func (b *builder) model() *graph.Model { return b.Model }

// init adds a float32 initializer with random values; the elements whose
// index along axis is in tiny are scaled down to nearly nothing.
func (b *builder) init(name string, dims []int64, axis int, tiny []int, scale float32) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	vals := make([]float32, n)
	outer, inner := strides(dims, axis)
	for i := range vals {
		vals[i] = (b.rnd.Float32()*2 - 1) * scale
		if len(dims) > 0 {
			c := (i / inner) % int(dims[axis])
			_ = outer
			for _, z := range tiny {
				if c == z {
					vals[i] *= 1e-7
				}
			}
		}
	}
	return b.Floats(b.Graph.UniqueName(name), dims, vals...)
}

func (b *builder) node(name, op string, ins []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	out := b.Value(b.Graph.UniqueName(name + "_out"))
	n := b.NodeTo(name, op, out, ins...)
	for _, a := range attrs {
		n.SetAttr(a)
	}
	return out
}

func intAttr(name string, v int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInt, Int: v}
}

// conv adds a k×k Conv (pads keep the size) from cin to cout channels
// whose output channels in tiny are (nearly) zero.
func (b *builder) conv(name string, x *graph.Value, cin, cout, k int64, tiny []int) *graph.Value {
	w := b.init(name+"_W", []int64{cout, cin, k, k}, 0, tiny, 0.5)
	bias := b.init(name+"_B", []int64{cout}, 0, tiny, 0.1)
	p := (k - 1) / 2
	return b.node(name, "Conv", []*graph.Value{x, w, bias},
		&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{p, p, p, p}})
}

func (b *builder) output(v *graph.Value) {
	b.Graph.Outputs = append(b.Graph.Outputs, v)
}

// prune runs Channels on a copy of the model and checks the result
// against the original in ORT within atol; it returns the report and the
// pruned model.
func pruneAndCompare(t *testing.T, m *graph.Model, ratio float64, atol float64) (*schema.PruneReport, *graph.Model) {
	t.Helper()
	before := testgraph.Marshal(t, m)
	pm, err := graph.Parse(before, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, after := verifiedPrune(t, pm, func(m *graph.Model) (*schema.PruneReport, error) { return Channels(m, ratio, exact) })
	ortenv.Require(t)
	if err := difftest.Compare(before, after, difftest.Options{Atol: atol, Rtol: 1e-3}); err != nil {
		t.Fatalf("pruned model: %v\nreport: %s", err, layers(rep))
	}
	return rep, pm
}

// verifiedPrune runs prune on m and returns its report and the pruned
// model's bytes, failing t unless prune succeeds and the pruned model
// passes Verify: the tail of every prune helper of these tests.
func verifiedPrune(t testing.TB, m *graph.Model, prune func(*graph.Model) (*schema.PruneReport, error)) (*schema.PruneReport, []byte) {
	t.Helper()
	rep, err := prune(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("pruned model fails Verify: %v", err)
	}
	return rep, testgraph.Marshal(t, m)
}

func layers(r *schema.PruneReport) string {
	var sb strings.Builder
	for _, l := range r.Layers {
		fmt.Fprintf(&sb, "\n  %s %s params %d removed %d skipped %q", l.Op, l.Node, l.Params, l.Removed, l.Skipped)
	}
	return sb.String()
}

func layer(t *testing.T, r *schema.PruneReport, node string) schema.PruneLayer {
	t.Helper()
	for _, l := range r.Layers {
		if l.Node == node {
			return l
		}
	}
	t.Fatalf("no layer %q in the report:%s", node, layers(r))
	return schema.PruneLayer{}
}

func weightDims(t *testing.T, m *graph.Model, node string) []int64 {
	t.Helper()
	for _, n := range m.Graph.Nodes {
		if n.Name == node {
			return n.Input(1).ConstantTensor().Dims
		}
	}
	t.Fatalf("no node %q", node)
	return nil
}

func wantDims(t *testing.T, m *graph.Model, node string, want ...int64) {
	t.Helper()
	if got := weightDims(t, m, node); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s weight is %v, want %v", node, got, want)
	}
}

func wantRemoved(t *testing.T, r *schema.PruneReport, node string, n int64) {
	t.Helper()
	if l := layer(t, r, node); l.Removed != n {
		t.Errorf("%s: removed %d channels, want %d (skipped %q)", node, l.Removed, n, l.Skipped)
	}
}

func TestChannelsConvReluConv(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	c1 := b.conv("c1", x, 3, 8, 3, []int{1, 4, 6, 7})
	r := b.node("r", "Relu", []*graph.Value{c1})
	b.output(b.conv("c2", r, 8, 4, 3, nil))
	m := b.model()
	rep, pm := pruneAndCompare(t, m, 0.5, 1e-4)
	wantRemoved(t, rep, "c1", 4)
	wantDims(t, pm, "c1", 4, 3, 3, 3)
	wantDims(t, pm, "c2", 4, 4, 3, 3)
	if l := layer(t, rep, "c2"); l.Removed != 0 || !strings.Contains(l.Skipped, "graph output") {
		t.Errorf("c2 feeds the graph output: removed %d, skipped %q", l.Removed, l.Skipped)
	}
	if rep.ParamsAfter >= rep.ParamsBefore {
		t.Errorf("params %d -> %d", rep.ParamsBefore, rep.ParamsAfter)
	}
	// 8 - 4 channels: W 4*3*9 + B 4 fewer, and c2's W 4*4*9 fewer.
	if d := rep.ParamsBefore - rep.ParamsAfter; d != 4*27+4+4*4*9 {
		t.Errorf("removed %d params, want %d", d, 4*27+4+4*4*9)
	}
}

func TestChannelsRatioZeroChangesNothing(t *testing.T) {
	b, x := newBuilder(t, []int64{1, 3, 8, 8})
	c1 := b.conv("c1", x, 3, 8, 3, nil)
	r := b.node("r", "Relu", []*graph.Value{c1})
	b.output(b.conv("c2", r, 8, 4, 3, nil))
	m := b.model()
	before := testgraph.Marshal(t, m)
	rep, err := Channels(m, 0, exact)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, testgraph.Marshal(t, m)) {
		t.Error("ratio 0 changed the model")
	}
	if rep.ParamsBefore != rep.ParamsAfter {
		t.Errorf("params %d -> %d", rep.ParamsBefore, rep.ParamsAfter)
	}
	// A per-layer ratio of 0 for the only prunable layer: no change either.
	rep, err = Channels(m, 0.5, Options{PerLayer: map[string]float64{"c1": 0}, ChannelMultiple: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, testgraph.Marshal(t, m)) {
		t.Errorf("per-layer ratio 0 changed the model:%s", layers(rep))
	}
}

func TestChannelsBatchNorm(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{0, 5}
	c1 := b.conv("c1", x, 3, 8, 3, tiny)
	scale := b.init("bn_s", []int64{8}, 0, nil, 1)
	bias := b.init("bn_b", []int64{8}, 0, tiny, 0.1)
	mean := b.init("bn_m", []int64{8}, 0, tiny, 0.1)
	vr := b.init("bn_v", []int64{8}, 0, nil, 0.5)
	// variances must be positive
	vals, _ := vr.Const.Float32s()
	for i := range vals {
		vals[i] = 0.5 + vals[i]*vals[i]
	}
	nt, _ := graph.NewFloat32Tensor(vr.Name, []int64{8}, vals)
	vr.Const = nt
	bn := b.node("bn", "BatchNormalization", []*graph.Value{c1, scale, bias, mean, vr})
	r := b.node("r", "Relu", []*graph.Value{bn})
	b.output(b.conv("c2", r, 8, 4, 3, nil))
	rep, pm := pruneAndCompare(t, b.model(), 0.25, 1e-4)
	wantRemoved(t, rep, "c1", 2)
	wantDims(t, pm, "c2", 4, 6, 3, 3)
}

func TestChannelsDepthwise(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{2, 3, 6}
	c1 := b.conv("c1", x, 3, 8, 1, tiny)
	dw := b.node("dw", "Conv", []*graph.Value{c1, b.init("dw_W", []int64{8, 1, 3, 3}, 0, nil, 0.5), b.init("dw_B", []int64{8}, 0, tiny, 0.1)},
		intAttr("group", 8), &graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
	r := b.node("r", "Clip", []*graph.Value{dw})
	b.output(b.conv("c2", r, 8, 4, 1, nil))
	rep, pm := pruneAndCompare(t, b.model(), 0.4, 1e-4)
	wantRemoved(t, rep, "c1", 3)
	wantDims(t, pm, "dw", 5, 1, 3, 3)
	wantDims(t, pm, "c2", 4, 5, 1, 1)
	for _, n := range pm.Graph.Nodes {
		if n.Name == "dw" && n.AttrInt("group", 0) != 5 {
			t.Errorf("depthwise group is %d, want 5", n.AttrInt("group", 0))
		}
	}
}

func TestChannelsConstantAdd(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{0, 1, 2, 3}
	c1 := b.conv("c1", x, 3, 8, 3, tiny)
	add := b.node("add", "Add", []*graph.Value{c1, b.init("k", []int64{8, 1, 1}, 0, tiny, 1)})
	mul := b.node("mul", "Mul", []*graph.Value{b.init("s", []int64{1, 8, 1, 1}, 1, nil, 1), add})
	half := b.node("half", "Mul", []*graph.Value{mul, b.init("h", []int64{1}, 0, nil, 1)})
	r := b.node("r", "Sigmoid", []*graph.Value{half})
	// Sigmoid(0) is 0.5, not 0: subtract it again so the doomed channels
	// read as zero.
	sub := b.node("sub", "Sub", []*graph.Value{r, b.init("c", []int64{}, 0, nil, 0)})
	b.output(b.conv("c2", sub, 8, 2, 3, nil))
	m := b.model()
	// The constant c must be 0.5.
	c := m.Graph.Value(sub.Producer().Input(1).Name)
	c.Const, _ = graph.NewFloat32Tensor(c.Name, nil, []float32{0.5})
	rep, pm := pruneAndCompare(t, m, 0.5, 1e-4)
	wantRemoved(t, rep, "c1", 4)
	wantDims(t, pm, "c2", 2, 4, 3, 3)
}

func TestChannelsFlattenGemm(t *testing.T) {
	for _, transB := range []int64{0, 1} {
		t.Run(fmt.Sprint("transB", transB), func(t *testing.T) {
			b, x := newBuilder(t, []int64{2, 3, 4, 4})
			tiny := []int{1, 2, 5}
			c1 := b.conv("c1", x, 3, 6, 3, tiny)
			p := b.node("pool", "MaxPool", []*graph.Value{c1},
				&graph.Attr{Name: "kernel_shape", Type: graph.AttrInts, Ints: []int64{2, 2}},
				&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{2, 2}})
			f := b.node("flat", "Flatten", []*graph.Value{b.node("r", "Relu", []*graph.Value{p})})
			dims := []int64{24, 5}
			if transB == 1 {
				dims = []int64{5, 24}
			}
			gm := b.node("fc", "Gemm", []*graph.Value{f, b.init("fc_W", dims, 0, nil, 0.3), b.init("fc_B", []int64{5}, 0, nil, 0.1)},
				intAttr("transB", transB))
			b.output(gm)
			rep, pm := pruneAndCompare(t, b.model(), 0.5, 1e-4)
			wantRemoved(t, rep, "c1", 3)
			want := []int64{12, 5}
			if transB == 1 {
				want = []int64{5, 12}
			}
			wantDims(t, pm, "fc", want...)
		})
	}
}

func TestChannelsGlobalPoolGemm(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{3, 4}
	c1 := b.conv("c1", x, 3, 8, 3, tiny)
	gp := b.node("gap", "GlobalAveragePool", []*graph.Value{b.node("r", "Relu", []*graph.Value{c1})})
	f := b.node("flat", "Flatten", []*graph.Value{gp})
	fc1 := b.node("fc1", "Gemm", []*graph.Value{f, b.init("fc1_W", []int64{6, 8}, 0, []int{0, 2, 3}, 0.3), b.init("fc1_B", []int64{6}, 0, []int{0, 2, 3}, 0.1)},
		intAttr("transB", 1))
	h := b.node("r2", "Relu", []*graph.Value{fc1})
	b.output(b.node("fc2", "Gemm", []*graph.Value{h, b.init("fc2_W", []int64{6, 3}, 0, nil, 0.3)}))
	rep, pm := pruneAndCompare(t, b.model(), 0.25, 1e-4)
	wantRemoved(t, rep, "c1", 2)
	wantRemoved(t, rep, "fc1", 1)
	wantDims(t, pm, "fc1", 5, 6)
	wantDims(t, pm, "fc2", 5, 3)
}

// runShapes runs the model in ORT on random input and returns the output
// dims.
func runShapes(t *testing.T, m *graph.Model) [][]int64 {
	t.Helper()
	ortenv.Require(t)
	ins, outs := ort.Interface(m)
	s, err := ort.NewSession(ort.Source{Bytes: testgraph.Marshal(t, m), Inputs: ins, Outputs: outs}, ort.DefaultOptions())
	if err != nil {
		t.Fatalf("ORT refuses the pruned model: %v", err)
	}
	defer s.Close()
	var feeds []*graph.Tensor
	for _, in := range ins {
		n := int64(1)
		for _, d := range in.Shape {
			n *= d
		}
		tn, _ := graph.NewFloat32Tensor(in.Name, in.Shape, make([]float32, n))
		feeds = append(feeds, tn)
	}
	res, err := s.Run(feeds)
	if err != nil {
		t.Fatalf("ORT cannot run the pruned model: %v", err)
	}
	var dims [][]int64
	for _, r := range res {
		dims = append(dims, r.Dims)
	}
	return dims
}

func TestChannelsResidualAdd(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{0, 3, 4, 7}
	a := b.conv("a", x, 3, 8, 3, tiny)
	ra := b.node("ra", "Relu", []*graph.Value{a})
	bb := b.conv("b", ra, 8, 8, 3, tiny)
	sum := b.node("res", "Add", []*graph.Value{ra, bb})
	b.output(b.conv("c", b.node("rs", "Relu", []*graph.Value{sum}), 8, 4, 3, nil))
	rep, pm := pruneAndCompare(t, b.model(), 0.5, 1e-4)
	// a and b are coupled: pruned together with the same channels.
	wantRemoved(t, rep, "a", 4)
	wantRemoved(t, rep, "b", 4)
	wantDims(t, pm, "b", 4, 4, 3, 3)
	wantDims(t, pm, "c", 4, 4, 3, 3)
	if got := runShapes(t, pm); fmt.Sprint(got) != "[[2 4 8 8]]" {
		t.Errorf("outputs %v", got)
	}
}

func TestChannelsConcatLeftAlone(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	a := b.conv("a", x, 3, 8, 3, nil)
	bb := b.conv("b", x, 3, 8, 3, nil)
	cat := b.node("cat", "Concat", []*graph.Value{a, bb}, intAttr("axis", 1))
	b.output(b.conv("c", cat, 16, 4, 3, nil))
	m := b.model()
	before := testgraph.Marshal(t, m)
	rep, pm := pruneAndCompare(t, m, 0.5, 1e-6)
	for _, n := range []string{"a", "b"} {
		if l := layer(t, rep, n); l.Removed != 0 || !strings.Contains(l.Skipped, "Concat") {
			t.Errorf("%s: removed %d, skipped %q", n, l.Removed, l.Skipped)
		}
	}
	if !bytes.Equal(before, testgraph.Marshal(t, pm)) {
		t.Error("nothing prunable, yet the model changed")
	}
	if got := runShapes(t, pm); fmt.Sprint(got) != "[[2 4 8 8]]" {
		t.Errorf("outputs %v", got)
	}
}

func TestChannelsSqueezeExcite(t *testing.T) {
	b, x := newBuilder(t, []int64{2, 3, 8, 8})
	tiny := []int{1, 2, 5, 6}
	c0 := b.conv("c0", x, 3, 8, 3, tiny)
	r0 := b.node("r0", "Relu", []*graph.Value{c0})
	gp := b.node("gap", "GlobalAveragePool", []*graph.Value{r0})
	s1 := b.node("s1r", "Relu", []*graph.Value{b.conv("s1", gp, 8, 4, 1, []int{0, 3})})
	gate := b.node("hs", "HardSigmoid", []*graph.Value{b.conv("s2", s1, 4, 8, 1, tiny)})
	se := b.node("se", "Mul", []*graph.Value{r0, gate})
	// HardSwish written out: y * HardSigmoid(y).
	hsw := b.node("hsw", "Mul", []*graph.Value{se, b.node("hs2", "HardSigmoid", []*graph.Value{se})})
	b.output(b.conv("c3", hsw, 8, 4, 3, nil))
	rep, pm := pruneAndCompare(t, b.model(), 0.5, 1e-4)
	wantRemoved(t, rep, "c0", 4)
	wantRemoved(t, rep, "s2", 4)
	wantRemoved(t, rep, "s1", 2)
	wantDims(t, pm, "s1", 2, 4, 1, 1)
	wantDims(t, pm, "s2", 4, 2, 1, 1)
	wantDims(t, pm, "c3", 4, 4, 3, 3)
}

func TestChannelsGraphOutputLeftAlone(t *testing.T) {
	b, x := newBuilder(t, []int64{1, 3, 8, 8})
	c1 := b.conv("c1", x, 3, 8, 3, nil)
	r := b.node("r", "Relu", []*graph.Value{c1})
	b.output(r)
	b.output(b.conv("c2", r, 8, 4, 3, nil))
	wantLeftAlone(t, b.model(), "c1", "graph output")
}

func TestChannelsReshapeLeftAlone(t *testing.T) {
	b, x := newBuilder(t, []int64{1, 3, 4, 4})
	c1 := b.conv("c1", x, 3, 8, 3, nil)
	shape, _ := graph.NewInt64Tensor("shape", []int64{2}, []int64{1, -1})
	sv, _ := b.Graph.AddInitializer(shape)
	rs := b.node("rs", "Reshape", []*graph.Value{c1, sv})
	b.output(b.node("fc", "Gemm", []*graph.Value{rs, b.init("fc_W", []int64{128, 2}, 0, nil, 0.3)}))
	wantLeftAlone(t, b.model(), "c1", "Reshape")
}

// wantLeftAlone prunes m at 0.5 and wants node left alone for a reason
// that mentions why, and the model unchanged.
func wantLeftAlone(t *testing.T, m *graph.Model, node, why string) {
	t.Helper()
	before := testgraph.Marshal(t, m)
	rep, err := Channels(m, 0.5, exact)
	if err != nil {
		t.Fatal(err)
	}
	if l := layer(t, rep, node); l.Removed != 0 || !strings.Contains(l.Skipped, why) {
		t.Errorf("%s: removed %d, skipped %q", node, l.Removed, l.Skipped)
	}
	if !bytes.Equal(before, testgraph.Marshal(t, m)) {
		t.Error("the model changed")
	}
}

func TestRemovedChannels(t *testing.T) {
	for _, c := range []struct {
		c       int64
		ratio   float64
		want8   int64
		wantOne int64
	}{
		{16, 0.25, 0, 4}, {16, 0.5, 8, 8}, {72, 0.25, 16, 18}, {8, 0.5, 0, 4}, {4, 0.9, 3, 3},
		{1, 0.5, 0, 0}, {96, 0, 0, 0}, {120, 0.1, 8, 12}, {20, 0.25, 4, 5},
	} {
		got8 := removedChannels(c.c, c.ratio, 8)
		gotOne := removedChannels(c.c, c.ratio, 1)
		if got8 != c.want8 || gotOne != c.wantOne {
			t.Errorf("removedChannels(%d, %g) = %d in multiples of 8, %d exactly; want %d, %d", c.c, c.ratio, got8, gotOne, c.want8, c.wantOne)
		}
	}
}
