package quantize

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// dynamicGraph is a small Transformer-like block: a MatMul on a 3-D
// activation, a second MatMul sharing its weight, an activation product
// (attention's, not a weight layer), and Gemms with transB, alpha, beta
// and a bias, with and without.
func dynamicGraph(t *testing.T) *graph.Model {
	b := newBuilder(t, 13)
	x := b.Input("x", 2, 5, 16)
	w := b.weight("w", 0.5, 16, 16)
	h := b.Node("proj", "MatMul", x, w).Output(0)
	h2 := b.Node("proj_again", "MatMul", h, w).Output(0)
	kt := b.Node("kt", "Transpose", h2).Output(0)
	kt.Producer().SetAttr(ints("perm", 0, 2, 1))
	att := b.Node("scores", "MatMul", h, kt).Output(0)
	flat := b.Node("flat", "Reshape", att, b.Int64s("shape", []int64{2}, 2, 25)).Output(0)
	g1 := b.Node("fc1", "Gemm", flat, b.weight("w1", 0.3, 12, 25), b.weight("c1", 0.1, 12))
	g1.SetAttr(intAttr("transB", 1))
	g1.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 0.5})
	g1.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: 2})
	r := b.Node("relu", "Relu", g1.Output(0)).Output(0)
	g2 := b.Node("fc2", "Gemm", r, b.weight("w2", 0.3, 12, 4))
	b.Output(g2.Output(0), 2, 4)
	b.Output(h2, 2, 5, 16)
	return b.Model
}

// dynamicCosines runs float and dynamic INT8 at level on random inputs
// and returns each output's cosine.
func dynamicCosines(t *testing.T, float, q []byte, level ort.Level) map[string]float64 {
	t.Helper()
	s := ort.DefaultOptions()
	s.Level = level
	r, err := compare.Models(compare.Options{ModelA: "float", ModelB: "dynamic",
		AInMemory: graph.Serialized{Bytes: float}, BInMemory: graph.Serialized{Bytes: q},
		Data: "random", DataOpts: data.Options{Samples: 16, Batch: 1, Low: -1, High: 1, Seed: 3},
		Atol: map[string]float64{"": 1e9}, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	cos := map[string]float64{}
	for _, o := range r.Outputs {
		cos[o.Name] = float64(o.Cosine)
	}
	return cos
}

func TestApplyDynamic(t *testing.T) {
	for _, contrib := range []bool{false, true} {
		for _, perChannel := range []bool{true, false} {
			t.Run(fmt.Sprintf("contrib %v per-column %v", contrib, perChannel), func(t *testing.T) {
				m := dynamicGraph(t)
				float := testgraph.Marshal(t, m)
				rep, err := ApplyDynamic(m, Options{ORTContrib: contrib, PerChannel: boolp(perChannel), ReduceRange: boolp(true)})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Verify(); err != nil {
					t.Fatal(err)
				}
				// proj, proj_again (one weight), fc1, fc2; scores is an
				// activation product and not listed.
				if len(rep.Quantized) != 4 || rep.Weights != 3 || len(rep.Skipped) != 0 {
					t.Fatalf("quantized %v, %d weights, skipped %v", rep.Quantized, rep.Weights, rep.Skipped)
				}
				ops := map[string]int{}
				for _, n := range m.Graph.Nodes {
					ops[n.OpType]++
				}
				if want := map[bool]string{false: "MatMulInteger", true: "DynamicQuantizeMatMul"}[contrib]; ops[want] != 4 || ops["MatMul"] != 1 || ops["Gemm"] != 0 {
					t.Fatalf("ops after: %v", ops)
				}
				for _, w := range []string{"w", "w1", "w2"} {
					if m.Graph.Value(w) != nil {
						t.Errorf("float weight %q is still in the model", w)
					}
				}
				q := testgraph.Marshal(t, m)
				ortenv.Require(t)
				for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
					cos := dynamicCosines(t, float, q, level)
					t.Logf("level %s: cosines %v", level, cos)
					for name, c := range cos {
						// 7-bit weights, 8-bit activations over two or three
						// layers: measured 0.9995 and up.
						if c < 0.998 {
							t.Errorf("level %s, output %s: cosine %.5f to float, want >= 0.998", level, name, c)
						}
					}
				}
				// What ORT makes of it at level all: every group one
				// DynamicQuantizeMatMul (its fusions' conditions are met).
				if fused := ortOps(t, q)["DynamicQuantizeMatMul"]; fused != 4 {
					t.Errorf("ORT at level all made %d DynamicQuantizeMatMul, want 4", fused)
				}
				// Deterministic: the same model and options give the same bytes.
				m2 := dynamicGraph(t)
				if _, err := ApplyDynamic(m2, Options{ORTContrib: contrib, PerChannel: boolp(perChannel), ReduceRange: boolp(true)}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(q, testgraph.Marshal(t, m2)) {
					t.Error("two runs wrote different bytes")
				}
			})
		}
	}
}

func TestApplyDynamicRefuses(t *testing.T) {
	m := dynamicGraph(t)
	if _, err := ApplyDynamic(m, Options{Target: TargetTensorRT}); err == nil {
		t.Error("tensorrt: no error")
	}
	if _, err := ApplyDynamic(m, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyDynamic(m, Options{}); err == nil {
		t.Error("quantizing twice: no error")
	}
	b := newBuilder(t, 10)
	x := b.Input("x", 2, 16)
	b.Output(b.Node("mm", "MatMul", x, b.weight("w", 1, 16, 4)).Output(0), 2, 4)
	if _, err := ApplyDynamic(b.Model, Options{}); err == nil {
		t.Error("opset 10: no error")
	}
	m = dynamicGraph(t)
	rep, err := ApplyDynamic(m, Options{Exclude: []string{"^fc"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Quantized) != 2 || len(rep.Skipped) != 2 {
		t.Errorf("exclude: quantized %v, skipped %v", rep.Quantized, rep.Skipped)
	}
}
