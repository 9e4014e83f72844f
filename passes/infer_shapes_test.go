package passes_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// shapesGraph is testgraph's builder with the two helpers the
// infer-shapes tests use.
type shapesGraph struct{ *testgraph.Builder }

func newShapesGraph(t *testing.T) *shapesGraph { return &shapesGraph{testgraph.New(t, "shapes", 17)} }

// value adds a value called name of type typ (nil: none declared).
func (s *shapesGraph) value(name string, typ *graph.Type) *graph.Value {
	v := s.Value(name)
	v.Type = typ
	return v
}

// node adds op from ins into out, named after out, with attrs.
func (s *shapesGraph) node(op string, out *graph.Value, attrs []*graph.Attr, ins ...*graph.Value) *graph.Value {
	s.NodeTo(out.Name, op, out, ins...).Attrs = attrs
	return out
}

func sym(dims ...any) graph.Shape {
	s := graph.Shape{}
	for _, d := range dims {
		switch d := d.(type) {
		case int:
			s = append(s, graph.StaticDim(int64(d)))
		case string:
			if d == "?" {
				s = append(s, graph.Dim{})
			} else {
				s = append(s, graph.SymbolicDim(d))
			}
		}
	}
	return s
}

func runInferShapes(t *testing.T, m *graph.Model) passes.Stats {
	t.Helper()
	p, err := passes.Lookup("infer-shapes")
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Run(&passes.Context{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("the pass broke the model: %v", err)
	}
	return st
}

func TestInferShapesAnnotates(t *testing.T) {
	s := newShapesGraph(t)
	x := s.value("x", graph.TensorType(graph.Float, sym("N", 3, 8, 8)))
	s.Graph.Inputs = []*graph.Value{x}
	w, err := graph.NewFloat32Tensor("w", []int64{4, 3, 3, 3}, make([]float32, 108))
	if err != nil {
		t.Fatal(err)
	}
	wv, err := s.Graph.AddInitializer(w)
	if err != nil {
		t.Fatal(err)
	}
	pads := &graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}}
	conv := s.node("Conv", s.value("conv", nil), []*graph.Attr{pads}, x, wv)
	// Declared with less than inference knows (a symbol where it has a
	// number): refined in place.
	relu := s.node("Relu", s.value("relu", graph.TensorType(graph.Float, sym("?", "?", "H", "?"))), nil, conv)
	// Declared with more (a number for N): kept.
	pinned := s.node("Relu", s.value("pinned", graph.TensorType(graph.Float, sym(2, 4, 8, 8))), nil, relu)
	// Contradicting the inference: kept.
	wrong := s.node("Sigmoid", s.value("wrong", graph.TensorType(graph.Float, sym("N", 5, 8, 8))), nil, relu)
	// Unknown to inference: left without a type.
	custom := s.node("MyOp", s.value("custom", nil), nil, relu)
	y := s.node("Flatten", s.value("y", graph.TensorType(graph.Float, sym("N", "?"))), nil, wrong)
	s.Graph.Outputs = []*graph.Value{y, pinned, custom}
	s.Graph.ValueInfo = []*graph.Value{relu, pinned, wrong}

	st := runInferShapes(t, s.Model)
	if st.Rewritten != 3 || st.Removed+st.Added != 0 {
		t.Errorf("stats %+v: want conv, relu and y annotated", st)
	}
	for _, c := range []struct {
		v    *graph.Value
		want string
	}{
		{conv, "float32[N,4,8,8]"},
		{relu, "float32[N,4,8,8]"},
		{pinned, "float32[2,4,8,8]"},
		{wrong, "float32[N,5,8,8]"},
		{custom, "?"},
		{y, "float32[N,320]"},
	} {
		if got := c.v.Type.String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.v.Name, got, c.want)
		}
	}
	if got := names(s.Graph.ValueInfo); !slices.Equal(got, []string{"relu", "pinned", "wrong", "conv"}) {
		t.Errorf("value_info %v", got)
	}
	if st := runInferShapes(t, s.Model); st.Changed() {
		t.Errorf("second run changed %+v", st)
	}

	// The annotations survive saving.
	b, err := graph.Marshal(s.Model)
	if err != nil {
		t.Fatal(err)
	}
	r, err := graph.Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Graph.Value("conv").Type.String(); got != "float32[N,4,8,8]" {
		t.Errorf("reloaded conv: %s", got)
	}
	if st := runInferShapes(t, r); st.Changed() {
		t.Errorf("run on the reloaded model changed %+v", st)
	}
}

func names(vs []*graph.Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestInferShapesInPipeline(t *testing.T) {
	ps, err := passes.Select(1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps[len(ps)-1].Name != "infer-shapes" {
		t.Errorf("infer-shapes is not last in -O1: %v", ps)
	}
	m := testgraph.LoadFile(t, testenv.Model("mnist_cnn.onnx"))
	rep, err := passes.Run(m, ps, passes.Options{VerifyEach: true})
	if err != nil {
		t.Fatal(err)
	}
	var pr *passes.PassReport
	for _, p := range rep.Passes {
		if p.Name == "infer-shapes" {
			pr = p
		}
	}
	// 11 node outputs, of which the graph output was declared in full.
	if rep.Rounds != 2 || pr.Stats.Rewritten != 10 {
		t.Errorf("%d rounds, infer-shapes %+v", rep.Rounds, pr.Stats)
	}
}

// TestInferShapesRealModels annotates the test models, as loaded
// (symbolic inputs) and with static inputs, and checks in ONNX Runtime
// that the annotated model loads and computes what the original does.
func TestInferShapesRealModels(t *testing.T) {
	for _, tc := range testenv.RealModels(t) {
		t.Run(tc.Name, func(t *testing.T) {
			m, err := graph.LoadFile(tc.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, static := range []bool{false, true} {
				c, err := m.Clone()
				if err != nil {
					t.Fatal(err)
				}
				if static {
					in := c.Graph.Inputs[0]
					in.Type = graph.TensorType(in.Type.Elem, graph.StaticShape(tc.Input...))
				}
				before, err := graph.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				st := runInferShapes(t, c)
				typed := 0
				for _, n := range c.Graph.Nodes {
					for _, v := range n.Outputs() {
						if v.Type != nil && v.Type.Elem != graph.Undefined && v.Type.Shape != nil {
							typed++
						}
					}
				}
				if typed != len(c.Graph.Nodes) {
					t.Errorf("static=%v: %d of %d node outputs have a type with a rank", static, typed, len(c.Graph.Nodes))
				}
				if again := runInferShapes(t, c); again.Changed() {
					t.Errorf("static=%v: second run changed %+v", static, again)
				}
				t.Logf("static input %v: %d values annotated", static, st.Rewritten)
				after, err := graph.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				difftest.Check(t, before, after, difftest.Options{DataOpts: data.Options{
					Batch: 1, Samples: 1, Spec: data.Spec{Shapes: map[string][]int64{c.Graph.Inputs[0].Name: tc.Input}}}})
			}
		})
	}
}

// TestInferShapesScales runs the pass over a long chain: it must stay
// linear in the graph's size.
func TestInferShapesScales(t *testing.T) {
	s := newShapesGraph(t)
	prev := s.value("x", graph.TensorType(graph.Float, sym("N", 64)))
	s.Graph.Inputs = []*graph.Value{prev}
	const n = 100000
	for i := range n {
		op := "Relu"
		if i%2 == 1 {
			op = "Sigmoid"
		}
		prev = s.node(op, s.value("v"+strconv.Itoa(i), nil), nil, prev)
	}
	s.Graph.Outputs = []*graph.Value{prev}
	st := runInferShapes(t, s.Model)
	if st.Rewritten != n {
		t.Errorf("annotated %d of %d", st.Rewritten, n)
	}
}
