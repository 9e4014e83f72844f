package prune

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/testgraph"
)

// weightModel is a hand-built model with one of every kind of weight the
// pruning methods meet, each named after its node:
//
//	conv    Conv          W[128, 8, 3, 3]   prunable, 2:4 along axis 1 (8)
//	dw      Conv group 128 W[128, 1, 3, 3]  depthwise: skipped
//	tiny    Conv          W[4, 128, 1, 1]   512 elements: skipped
//	convT   ConvTranspose W[4, 64, 2, 2]    prunable, 2:4 along axis 0 (4)
//	gemm    Gemm          B[64, 48]         prunable, 2:4 along axis 0
//	gemmT   Gemm transB=1 B[40, 48]         prunable, 2:4 along axis 1
//	mm      MatMul        B[40, 30]         prunable, 2:4 along axis 0
//	odd     MatMul        B[30, 36]         prunable, reduction 30: no 2:4
//	shared1, shared2 MatMul B[36, 36], one Constant node read by both
type weightModel struct {
	*testgraph.Builder
	rng     *rand.Rand
	weights map[string]*graph.Value // by node name
}

// layerScale scales each layer's weights differently, so that one global
// threshold prunes them to different levels.
var layerScale = map[string]float32{"conv": 0.05, "dw": 1, "tiny": 1, "convT": 0.5, "gemm": 1, "gemmT": 2, "mm": 0.2, "odd": 1, "shared1": 1}

func newWeightModel(t testing.TB) *weightModel {
	w := &weightModel{Builder: testgraph.New(t, "prune", 17), rng: rand.New(rand.NewPCG(7, 24)),
		weights: map[string]*graph.Value{}}
	g := w.Graph
	x := w.value("x")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 8, 5, 5))
	g.Inputs = append(g.Inputs, x)

	c1 := w.node("conv", "Conv", x, w.init("conv", 128, 8, 3, 3))
	w.ints(c1, "pads", 1, 1, 1, 1)
	dw := w.node("dw", "Conv", c1.Output(0), w.init("dw", 128, 1, 3, 3))
	w.ints(dw, "pads", 1, 1, 1, 1)
	dw.SetAttr(&graph.Attr{Name: "group", Type: graph.AttrInt, Int: 128})
	tiny := w.node("tiny", "Conv", dw.Output(0), w.init("tiny", 4, 128, 1, 1))
	ct := w.node("convT", "ConvTranspose", tiny.Output(0), w.init("convT", 4, 64, 2, 2))
	w.ints(ct, "strides", 2, 2)
	pool := w.node("pool", "GlobalAveragePool", ct.Output(0))
	flat := w.node("flat", "Flatten", pool.Output(0))
	gemm := w.node("gemm", "Gemm", flat.Output(0), w.init("gemm", 64, 48))
	gemmT := w.node("gemmT", "Gemm", gemm.Output(0), w.init("gemmT", 40, 48))
	gemmT.SetAttr(&graph.Attr{Name: "transB", Type: graph.AttrInt, Int: 1})
	mm := w.node("mm", "MatMul", gemmT.Output(0), w.init("mm", 40, 30))
	odd := w.node("odd", "MatMul", mm.Output(0), w.init("odd", 30, 36))

	shared := w.value("shared_w")
	k, err := w.Graph.AddNode("Constant", nil, []*graph.Value{shared})
	if err != nil {
		t.Fatal(err)
	}
	k.Name = "shared_const"
	k.SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: w.tensor("shared_w", w.random("shared1", 36*36), 36, 36)})
	w.weights["shared1"], w.weights["shared2"] = shared, shared
	s1 := w.node("shared1", "MatMul", odd.Output(0), shared)
	s2 := w.node("shared2", "MatMul", s1.Output(0), shared)
	y := s2.Output(0)
	y.Type = graph.TensorType(graph.Float, nil)
	g.Outputs = append(g.Outputs, y)
	if err := w.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	return w
}

// value adds a value named name, or name with a suffix when taken.
func (w *weightModel) value(name string) *graph.Value {
	w.T.Helper()
	return w.Value(w.Graph.UniqueName(name))
}

// random returns n distinct-magnitude values in (-s, s), s the layer's
// scale, none zero.
func (w *weightModel) random(layer string, n int64) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := float32(0.001 + 0.999*w.rng.Float64())
		if w.rng.IntN(2) == 0 {
			v = -v
		}
		out[i] = v * layerScale[layer]
	}
	return out
}

func (w *weightModel) tensor(name string, vals []float32, dims ...int64) *graph.Tensor {
	w.T.Helper()
	t, err := graph.NewFloat32Tensor(name, dims, vals)
	if err != nil {
		w.T.Fatal(err)
	}
	return t
}

// init adds the weight initializer of layer, name layer+"_w".
func (w *weightModel) init(layer string, dims ...int64) *graph.Value {
	w.T.Helper()
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := w.Floats(w.Graph.UniqueName(layer+"_w"), dims, w.random(layer, n)...)
	w.weights[layer] = v
	return v
}

// node adds a node called name with one fresh output.
func (w *weightModel) node(name, op string, ins ...*graph.Value) *graph.Node {
	w.T.Helper()
	return w.NodeTo(name, op, w.value(name+"_out"), ins...)
}

func (w *weightModel) ints(n *graph.Node, name string, v ...int64) {
	n.SetAttr(&graph.Attr{Name: name, Type: graph.AttrInts, Ints: v})
}

// vals returns the current values of layer's weight.
func (w *weightModel) vals(layer string) []float32 {
	w.T.Helper()
	vs, err := w.weights[layer].ConstantTensor().Float32s()
	if err != nil {
		w.T.Fatal(err)
	}
	return vs
}

// snapshot returns every weight's values by layer.
func (w *weightModel) snapshot() map[string][]float32 {
	s := map[string][]float32{}
	for name := range w.weights {
		s[name] = w.vals(name)
	}
	return s
}

// layerOf finds the report line of node.
func layerOf(t testing.TB, layers []schema.PruneLayer, node string) schema.PruneLayer {
	t.Helper()
	i := slices.IndexFunc(layers, func(l schema.PruneLayer) bool { return l.Node == node })
	if i < 0 {
		t.Fatalf("no report line for %q in %+v", node, layers)
	}
	return layers[i]
}

// prunable are the layers of weightModel that magnitude pruning changes
// (shared2 shares shared1's weight, reported once under shared1).
var prunable = []string{"conv", "convT", "gemm", "gemmT", "mm", "odd", "shared1"}

func TestFindWeights(t *testing.T) {
	w := newWeightModel(t)
	ws := findWeights(w.Model)
	var names []string
	for _, x := range ws {
		names = append(names, x.node.Name)
	}
	want := []string{"conv", "dw", "tiny", "convT", "gemm", "gemmT", "mm", "odd", "shared1"}
	if !slices.Equal(names, want) {
		t.Fatalf("weights of %v, want %v", names, want)
	}
	if s := ws[len(ws)-1]; len(s.nodes) != 2 || s.nodes[1].Name != "shared2" {
		t.Errorf("the shared weight is read by %d nodes, want shared1 and shared2", len(s.nodes))
	}
	skips := map[string]string{}
	for _, x := range ws {
		skips[x.node.Name] = commonSkip(x, Options{Exclude: []string{"gemmT", "mm_w"}})
	}
	for name, want := range map[string]string{
		"conv": "", "dw": "depthwise Conv \"dw\"", "tiny": "512 elements, fewer than 1024",
		"gemmT": "excluded (node \"gemmT\")", "mm": "excluded (weight \"mm_w\")", "shared1": "",
	} {
		if skips[name] != want {
			t.Errorf("%s: skip %q, want %q", name, skips[name], want)
		}
	}
	if p := totalParams(w.Model); p != 9216+1152+512+1024+3072+1920+1200+1080+1296 {
		t.Errorf("totalParams = %d", p)
	}
}

func TestFindWeightsLeavesOtherUsesAlone(t *testing.T) {
	w := newWeightModel(t)
	// The gemm weight is also added to something: pruning it would change
	// more than the Gemm.
	extra, err := w.Graph.AddNode("Identity", []*graph.Value{w.weights["gemm"]}, []*graph.Value{w.value("copy")})
	if err != nil {
		t.Fatal(err)
	}
	extra.Name = "copy"
	extra.Output(0).Type = graph.TensorType(graph.Float, nil)
	w.Graph.Outputs = append(w.Graph.Outputs, extra.Output(0))
	before := w.vals("gemm")
	rep, err := Magnitude(w.Model, 0.5, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l := layerOf(t, rep.Layers, "gemm"); l.Skipped == "" || !slices.Equal(w.vals("gemm"), before) {
		t.Errorf("a weight also read by Identity was pruned: %+v", l)
	}
}

// zeroCount counts zeros.
func zeroCount(vals []float32) int {
	n := 0
	for _, v := range vals {
		if v == 0 {
			n++
		}
	}
	return n
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }
