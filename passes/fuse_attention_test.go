package passes

import (
	"bytes"
	"math"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// fuse-attention on the export it was written for, the zoo's bert_tiny
// (torch 1.13 nn.TransformerEncoderLayer, key-padding mask), after the
// rest of the -O2 ORT-only pipeline: what it fuses, that a second run
// changes nothing, that two runs write the same bytes, and that each
// refusal condition leaves the model byte for byte. ORT checks of the
// fused zoo models (levels disable and all, all-ones and padded masks)
// are in TestTransformerFusionsOnModels.

// pipelineInput is the zoo model rel through -O2 --ort-contrib without
// fuse-attention: the graph the pass sees in the pipeline.
func pipelineInput(t *testing.T, rel string) []byte {
	t.Helper()
	_, m := testgraph.ReadModel(t, testenv.Data(t, rel))
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

// The trained LM's attention is batch-first with a causal mask sliced to
// the ids' length: refused (see the pass comment), byte for byte. The
// zoo's lm_tiny is that LM's module at CI size (scripts/lm/train.py's LM,
// made by `make zoo-models`, which `make test` runs); lm/lm.onnx itself
// comes only from `make lm`.
func TestFuseAttentionLeavesTheLM(t *testing.T) {
	in := pipelineInput(t, "zoo/lm_tiny/dynamic.onnx")
	if st, after := runAttention(t, in, true); st.Changed() || !bytes.Equal(in, after) {
		t.Errorf("changed the LM: %+v", st)
	}
}

// attentionInput is bert_tiny static through -O2 --ort-contrib without
// fuse-attention: the graph the pass sees in the pipeline.
func attentionInput(t *testing.T) []byte {
	t.Helper()
	return pipelineInput(t, "zoo/bert_tiny/static.onnx")
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

// attentionGraph is a hand-built graph in the layout of torch's
// nn.MultiheadAttention export: x [S, B, 8] (and a memory [L, B, 8] for
// cross-attention) projected by MatMuls, heads split by Reshape/Transpose
// into [B·H, S, d], scaled, optionally masked, Softmax, ·V, merged back.
type attentionGraph struct {
	heads, seq, kvSeq, batch int64
	cross, symbolic          bool
	scaleOnScores            bool // Mul on the scores instead of Div on Q
	mask, maskFirst, maskMul bool // key-padding mask; as the Add's first operand; times 1.0
	notASplit                bool // Reshape to [B·H... with dim 0 changed: not a head split
	softmaxAxis              int64
	fill                     float32
	floatMask                bool  // an additive float mask [S, L] instead (refused)
	maskLen                  int64 // the mask's length when not L (1: broadcast over the keys)
}

func (a attentionGraph) build(f *fusionFixture) {
	const D = 8
	d := D / a.heads
	x := f.input("x", a.seq, a.batch, D)
	if a.symbolic {
		x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("seq"), graph.SymbolicDim("batch"), graph.StaticDim(D)})
	}
	kv, L := x, a.seq
	if a.cross {
		kv, L = f.input("memory", a.kvSeq, a.batch, D), a.kvSeq
	}
	split := func(v *graph.Value, s int64, perm ...int64) *graph.Value {
		shape := []int64{s, a.batch * a.heads, d}
		if a.symbolic {
			shape = []int64{0, -1, d}
		}
		if a.notASplit {
			shape = []int64{s * a.heads, a.batch, d}
		}
		r := f.op("Reshape", v, f.Int64s(f.Graph.UniqueName("shape"), []int64{3}, shape...))
		return f.attrInts(f.node("Transpose", []*graph.Value{r}), "perm", perm...).Output(0)
	}
	q := split(f.op("MatMul", x, f.weight("wq", D, D)), a.seq, 1, 0, 2)
	k := split(f.op("MatMul", kv, f.weight("wk", D, D)), L, 1, 2, 0)
	v := split(f.op("MatMul", kv, f.weight("wv", D, D)), L, 1, 0, 2)
	scale := float32(math.Sqrt(float64(d)))
	if !a.scaleOnScores {
		q = f.op("Div", q, f.init("sqrt_d", nil, []float32{scale}))
	}
	s := f.op("MatMul", q, k)
	if a.scaleOnScores {
		s = f.op("Mul", s, f.init("inv_sqrt_d", nil, []float32{1 / scale}))
	}
	if a.mask {
		L := L
		if a.maskLen > 0 {
			L = a.maskLen
		}
		m := f.input("m", a.batch, L)
		e := f.op("Less", m, f.init("cut", nil, []float32{-0.5}))
		r1 := f.op("Reshape", e, f.Int64s(f.Graph.UniqueName("shape"), []int64{4}, a.batch, 1, 1, L))
		ex := f.op("Expand", r1, f.Int64s(f.Graph.UniqueName("shape"), []int64{4}, 1, a.heads, 1, 1))
		r3 := f.op("Reshape", ex, f.Int64s(f.Graph.UniqueName("shape"), []int64{3}, a.batch*a.heads, 1, L))
		fill := a.fill
		if fill == 0 {
			fill = float32(math.Inf(-1))
		}
		w := f.op("Where", r3, f.init("fill", nil, []float32{fill}), f.init("zeros", []int64{a.batch * a.heads, 1, L}, make([]float32, a.batch*a.heads*L)))
		if a.maskMul {
			w = f.op("Mul", w, f.init("one", nil, []float32{1}))
		}
		if a.maskFirst {
			s = f.op("Add", w, s)
		} else {
			s = f.op("Add", s, w)
		}
	}
	if a.floatMask {
		s = f.op("Add", s, f.weight("bias", a.seq, L))
	}
	sm := f.node("Softmax", []*graph.Value{s})
	if a.softmaxAxis != 0 {
		f.attrInt(sm, "axis", a.softmaxAxis)
	}
	o := f.op("MatMul", sm.Output(0), v)
	o = f.attrInts(f.node("Transpose", []*graph.Value{o}), "perm", 1, 0, 2).Output(0)
	f.output(f.op("Reshape", o, f.Int64s(f.Graph.UniqueName("shape"), []int64{3}, 0, -1, D)))
}

// buildAttentionCase builds the hand-built attention graph that the
// fusion's cases and refusals start from (two heads, 5 queries over 7
// keys, batch 2) with edit applied, at opset 17.
func buildAttentionCase(t *testing.T, edit func(*attentionGraph)) (*fusionFixture, attentionGraph) {
	t.Helper()
	a := attentionGraph{heads: 2, seq: 5, kvSeq: 7, batch: 2}
	edit(&a)
	f := newFusionFixture(t, 17)
	a.build(f)
	return f, a
}

func TestFuseAttentionHandBuilt(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*attentionGraph)
		want Stats
	}{
		{"self-attention, Q divided by sqrt(d)", func(a *attentionGraph) {}, Stats{Removed: 5, Added: 6}},
		{"scores times 1/sqrt(d)", func(a *attentionGraph) { a.scaleOnScores = true }, Stats{Removed: 5, Added: 6}},
		{"four heads", func(a *attentionGraph) { a.heads = 4 }, Stats{Removed: 5, Added: 6}},
		{"cross-attention, key-padding mask", func(a *attentionGraph) { a.cross, a.mask = true, true }, Stats{Removed: 6, Added: 8}},
		{"mask first, times 1", func(a *attentionGraph) { a.mask, a.maskFirst, a.maskMul = true, true, true }, Stats{Removed: 6, Added: 8}},
		{"mask of -10000", func(a *attentionGraph) { a.mask, a.fill = true, -10000 }, Stats{Removed: 6, Added: 8}},
		{"symbolic seq and batch", func(a *attentionGraph) { a.symbolic = true }, Stats{Removed: 5, Added: 6}},
		{"mask of length 1 over 7 keys", func(a *attentionGraph) { a.cross, a.mask, a.maskLen = true, true, 1 }, Stats{Removed: 6, Added: 11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, a := buildAttentionCase(t, tc.edit)
			if a.symbolic {
				f.fusesSymbolic(tc.want, map[string][]int64{"x": {5, 3, 8}})
			} else {
				f.fusesInORT(fuseAttention, Context{ORTContrib: true}, tc.want, -2, 2)
			}
			if f.ops()["MultiHeadAttention"] != 1 || f.Model.OpsetVersion(msDomain) != 1 {
				t.Errorf("ops %v, opsets %v", f.ops(), f.Model.Opsets)
			}
		})
	}
}

func TestFuseAttentionHandBuiltRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*attentionGraph)
		ctx  Context
	}{
		{"one head", func(a *attentionGraph) { a.heads = 1 }, Context{ORTContrib: true}},
		{"Reshape is not a head split", func(a *attentionGraph) { a.notASplit = true }, Context{ORTContrib: true}},
		{"Softmax over axis 1", func(a *attentionGraph) { a.softmaxAxis = 1 }, Context{ORTContrib: true}},
		{"mask fill positive", func(a *attentionGraph) { a.mask, a.fill = true, 1 }, Context{ORTContrib: true}},
		{"float mask over queries and keys", func(a *attentionGraph) { a.floatMask = true }, Context{ORTContrib: true}},
		{"without ORTContrib", func(a *attentionGraph) { a.mask = true }, Context{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := buildAttentionCase(t, tc.edit)
			f.refuses(fuseAttention, tc.ctx)
		})
	}
}

// fusesSymbolic is fusesInORT for graphs whose inputs have symbolic dims:
// the ORT runs feed the given shapes.
func (f *fusionFixture) fusesSymbolic(want Stats, shapes map[string][]int64) {
	f.T.Helper()
	ortenv.Require(f.T)
	before := f.Marshal()
	if st := f.run(fuseAttention, Context{ORTContrib: true}); st != want {
		f.T.Fatalf("stats %+v, want %+v", st, want)
	}
	after := f.Marshal()
	if st := f.run(fuseAttention, Context{ORTContrib: true}); st.Changed() {
		f.T.Errorf("a second run changed %+v", st)
	}
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		opts := difftest.Options{Level: level, DataOpts: data.Options{Spec: data.Spec{Shapes: shapes}, Low: -2, High: 2, Samples: 3, Seed: 7}}
		if err := difftest.Compare(before, after, opts); err != nil {
			f.T.Fatalf("ORT level %d: %v", level, err)
		}
	}
}
