package passes

import (
	"bytes"
	"os"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
)

// fuse-attention on the export it was written for, the zoo's bert_tiny
// (torch 1.13 nn.TransformerEncoderLayer, key-padding mask), after the
// rest of the -O2 ORT-only pipeline: what it fuses, that a second run
// changes nothing, that two runs write the same bytes, and that each
// refusal condition leaves the model byte for byte. ORT checks of the
// fused zoo models (levels disable and all, all-ones and padded masks)
// are in TestTransformerFusionsOnModels.

// attentionInput is bert_tiny static through -O2 --ort-contrib without
// fuse-attention: the graph the pass sees in the pipeline.
func attentionInput(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.Data(t, "zoo/bert_tiny/static.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := graph.Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := Select(2, nil, []string{fuseAttention.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(m, pipeline, Options{VerifyEach: true, ORTContrib: true, Eval: &ort.NodeEvaluator{}}); err != nil {
		t.Fatal(err)
	}
	out, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runAttention runs fuse-attention alone on b and returns its stats and
// the result's bytes.
func runAttention(t *testing.T, b []byte, ortContrib bool) (Stats, []byte) {
	t.Helper()
	m, err := graph.Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(m, []*Pass{fuseAttention}, Options{VerifyEach: true, ORTContrib: ortContrib, MaxRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	out, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Passes[0].Stats, out
}

func TestFuseAttention(t *testing.T) {
	in := attentionInput(t)
	st, once := runAttention(t, in, true)
	if st.Added == 0 {
		t.Fatalf("nothing fused in bert_tiny: %+v", st)
	}
	m, err := graph.Parse(once, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := countTransformerFusions(m.Graph).Attention; got != 2 {
		t.Errorf("%d MultiHeadAttention, want 2 (one per layer)", got)
	}
	for _, n := range m.Graph.Nodes {
		if n.OpType == "MultiHeadAttention" {
			if n.AttrInt("num_heads", 0) != 2 || len(n.Inputs()) != 5 || n.Input(4) == nil {
				t.Errorf("%s: want num_heads 2 and a key_padding_mask, got %d inputs, heads %d", n.Name, len(n.Inputs()), n.AttrInt("num_heads", 0))
			}
		}
	}
	if st2, twice := runAttention(t, once, true); st2.Changed() || !bytes.Equal(once, twice) {
		t.Errorf("a second run changed the model: %+v", st2)
	}
	if _, again := runAttention(t, in, true); !bytes.Equal(once, again) {
		t.Error("two runs on the same model wrote different bytes")
	}
}

func TestFuseAttentionRefusals(t *testing.T) {
	in := attentionInput(t)
	find := func(g *graph.Graph, op string, ok func(*graph.Node) bool) []*graph.Node {
		var ns []*graph.Node
		for _, n := range g.Nodes {
			if n.OpType == op && (ok == nil || ok(n)) {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			t.Fatalf("no %s in bert_tiny", op)
		}
		return ns
	}
	scalar := func(g *graph.Graph, dims []int64, vals ...float64) *graph.Value {
		v, err := addFloatInit(g, "test_const", dims, vals)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		mutate func(g *graph.Graph)
	}{
		{"mask fill value positive", func(g *graph.Graph) {
			for _, n := range find(g, "Where", nil) {
				n.SetInput(1, scalar(g, nil, 1))
			}
		}},
		{"Softmax over another axis", func(g *graph.Graph) {
			for _, n := range find(g, "Softmax", nil) {
				n.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: 1})
			}
		}},
		{"scale not a scalar", func(g *graph.Graph) {
			isScale := func(n *graph.Node) bool { c, _, ok := scalarConst(n.Input(1)); return ok && c > 5 && c < 6 }
			for _, n := range find(g, "Div", isScale) {
				vals := make([]float64, 32)
				for i := range vals {
					vals[i] = 5.656854
				}
				n.SetInput(1, scalar(g, []int64{32}, vals...))
			}
		}},
		{"mask expanded to other heads", func(g *graph.Graph) {
			for _, n := range find(g, "Expand", nil) {
				v, err := g.AddInitializer(mustInt64s(t, g, []int64{1, 4, 1, 1}))
				if err != nil {
					t.Fatal(err)
				}
				n.SetInput(1, v)
			}
		}},
		{"scores returned", func(g *graph.Graph) {
			for _, n := range find(g, "Softmax", nil) {
				g.Outputs = append(g.Outputs, n.Input(0))
			}
		}},
		{"probabilities read elsewhere", func(g *graph.Graph) {
			for _, n := range find(g, "Softmax", nil) {
				g.Outputs = append(g.Outputs, n.Output(0))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := graph.Parse(in, "")
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(m.Graph)
			before, err := graph.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if st, after := runAttention(t, before, true); st.Changed() || !bytes.Equal(before, after) {
				t.Errorf("changed the model: %+v", st)
			}
		})
	}
	t.Run("without ORTContrib", func(t *testing.T) {
		if st, after := runAttention(t, in, false); st.Changed() || !bytes.Equal(in, after) {
			t.Errorf("changed the model: %+v", st)
		}
	})
}

func mustInt64s(t *testing.T, g *graph.Graph, vals []int64) *graph.Tensor {
	t.Helper()
	x, err := graph.NewInt64Tensor(g.UniqueName("test_shape"), []int64{int64(len(vals))}, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
