package ort_test

import (
	"math"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// evalNode builds a node of op reading one value per input (nil: omitted)
// and writing outs outputs (a negative count omits the first), and
// evaluates it at opset 17.
func evalNode(t *testing.T, op string, inputs []*graph.Tensor, outs int, attrs ...*graph.Attr) ([]*graph.Tensor, error) {
	t.Helper()
	g := graph.NewGraph("g")
	ins := make([]*graph.Value, len(inputs))
	for i, in := range inputs {
		if in != nil {
			ins[i], _ = g.NewValue(g.UniqueName("in"))
		}
	}
	os := make([]*graph.Value, max(outs, -outs))
	for i := range os {
		if i > 0 || outs > 0 {
			os[i], _ = g.NewValue(g.UniqueName("out"))
		}
	}
	n, err := g.AddNode(op, ins, os)
	if err != nil {
		t.Fatal(err)
	}
	n.Attrs = attrs
	e := &ort.NodeEvaluator{}
	return e.EvalNode(n, inputs, []graph.OpsetImport{{Version: 17}})
}

func TestNodeEvaluator(t *testing.T) {
	ortenv.Require(t)
	x := testgraph.Float32Tensor(t, []int64{2, 2}, 0, 1, 2, -3)

	out, err := evalNode(t, "Sin", []*graph.Tensor{x}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out[0].Float32s()
	for i, v := range []float64{0, 1, 2, -3} {
		if math.Abs(float64(got[i])-math.Sin(v)) > 1e-6 {
			t.Errorf("Sin(%g) = %g", v, got[i])
		}
	}
	if !slices.Equal(out[0].Dims, []int64{2, 2}) || out[0].DType != graph.Float {
		t.Errorf("Sin gave %s%v", out[0].DType, out[0].Dims)
	}

	// A rank-0 output, which the binding can only return preallocated.
	out, err = evalNode(t, "ReduceSum", []*graph.Tensor{x}, 1, &graph.Attr{Name: "keepdims", Type: graph.AttrInt})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := out[0].Float32s(); len(out[0].Dims) != 0 || got[0] != 0 {
		t.Errorf("ReduceSum to a scalar gave %v%v", out[0].Dims, got)
	}

	// float16, which the binding has no Go type for.
	out, err = evalNode(t, "Cast", []*graph.Tensor{x}, 1, &graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float16)})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := out[0].Float32s(); out[0].DType != graph.Float16 || !slices.Equal(got, []float32{0, 1, 2, -3}) {
		t.Errorf("Cast to float16 gave %s %v", out[0].DType, got)
	}

	// Two outputs; an omitted output before a present one is refused
	// (ORT crashes on it), and an omitted optional input is fine.
	out, err = evalNode(t, "Split", []*graph.Tensor{x}, 2, &graph.Attr{Name: "axis", Type: graph.AttrInt, Int: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := out[1].Float32s(); !slices.Equal(got, []float32{1, -3}) {
		t.Errorf("Split's second output is %v", got)
	}
	if _, err := evalNode(t, "Split", []*graph.Tensor{x}, -2, &graph.Attr{Name: "axis", Type: graph.AttrInt, Int: 1}); err == nil {
		t.Error("Split with its first output omitted evaluated")
	}
	hi := testgraph.Float32Tensor(t, nil, 1.5)
	out, err = evalNode(t, "Clip", []*graph.Tensor{x, nil, hi}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := out[0].Float32s(); !slices.Equal(got, []float32{0, 1, 1.5, -3}) {
		t.Errorf("Clip(x, max=1.5) = %v", got)
	}

	if _, err := evalNode(t, "NoSuchOp", []*graph.Tensor{x}, 1); err == nil {
		t.Error("an unknown operator evaluated without error")
	}
}
