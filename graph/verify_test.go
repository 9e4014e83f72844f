package graph_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
)

func TestVerifyAcceptsValidModels(t *testing.T) {
	mustVerify(t, newSimple(t).m)
	mustVerify(t, parseProto(t, ifModelProto()))
	mustVerify(t, parseProto(t, ifOuterOutputProto()))

	// "ai.onnx" is the default domain; a domain of a local function is
	// imported by the function.
	s := newSimple(t)
	s.relu.Domain = "ai.onnx"
	s.m.Opsets = []graph.OpsetImport{{Domain: "ai.onnx", Version: 17}}
	s.add.Domain = "local.fn"
	s.m.Functions = []*onnxpb.FunctionProto{{Name: pstr("Add"), Domain: pstr("local.fn")}}
	mustVerify(t, s.m)
}

func TestVerifyCycle(t *testing.T) {
	g := graph.NewGraph("g")
	m := newModel(g)
	x := mustValue(t, g, "x")
	g.Inputs = []*graph.Value{x}
	p, q := mustValue(t, g, "p"), mustValue(t, g, "q")
	mustNode(t, g, "first", "Add", []*graph.Value{x, q}, []*graph.Value{p})
	mustNode(t, g, "second", "Relu", []*graph.Value{p}, []*graph.Value{q})
	g.Outputs = []*graph.Value{q}
	wantVerifyErr(t, m, "cycle", `"first" (Add)`, `"second" (Relu)`)
}

func TestVerifySelfLoop(t *testing.T) {
	g := graph.NewGraph("g")
	m := newModel(g)
	x := mustValue(t, g, "x")
	g.Inputs = []*graph.Value{x}
	p := mustValue(t, g, "p")
	mustNode(t, g, "loop", "Add", []*graph.Value{x, p}, []*graph.Value{p})
	g.Outputs = []*graph.Value{p}
	wantVerifyErr(t, m, "cycle", `"loop" (Add)`)
}

func TestVerifyUndefinedInput(t *testing.T) {
	s := newSimple(t)
	ghost := mustValue(t, s.g, "ghost")
	s.add.SetInput(1, ghost)
	wantVerifyErr(t, s.m, `"add"`, `"ghost"`, "not defined")

	// The same from a file: a node reads a name nothing defines.
	mp := pmodel(&onnxpb.GraphProto{
		Name:   pstr("g"),
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 2)},
		Node:   []*onnxpb.NodeProto{pnode("n", "Add", []string{"x", "nowhere"}, []string{"y"})},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 2)},
	})
	wantVerifyErr(t, parseProto(t, mp), `"n" (Add)`, `"nowhere"`, "not defined")

	// Inside a subgraph.
	mp = ifModelProto()
	mp.Graph.Node[2].Attribute[0].G.Node[0].Input = []string{"missing"}
	wantVerifyErr(t, parseProto(t, mp), `"tid" (Identity)`, `"missing"`, `subgraph "then"`, `"if" (If)`)
}

func TestVerifyUndefinedOutput(t *testing.T) {
	mp := pmodel(&onnxpb.GraphProto{
		Name:   pstr("g"),
		Input:  []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 2)},
		Node:   []*onnxpb.NodeProto{pnode("n", "Relu", []string{"x"}, []string{"y"})},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 2), vinfo("z", graph.Float, 2)},
	})
	wantVerifyErr(t, parseProto(t, mp), "graph output 1", `"z"`, "not defined")

	s := newSimple(t)
	s.g.Outputs = append(s.g.Outputs, &graph.Value{Name: "stray"})
	wantVerifyErr(t, s.m, "graph output", `"stray"`)
}

func TestParseRejectsDuplicateNames(t *testing.T) {
	base := func() *onnxpb.GraphProto {
		return &onnxpb.GraphProto{
			Name:        pstr("g"),
			Input:       []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 2)},
			Initializer: []*onnxpb.TensorProto{f32Proto("w", []int64{2}, 1, 2)},
			Node: []*onnxpb.NodeProto{
				pnode("n1", "Add", []string{"x", "w"}, []string{"y"}),
			},
			Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 2)},
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(g *onnxpb.GraphProto)
		want   []string
	}{
		{"two nodes produce one name", func(g *onnxpb.GraphProto) {
			g.Node = append(g.Node, pnode("n2", "Relu", []string{"x"}, []string{"y"}))
		}, []string{`"y"`, `"n2"`, "twice"}},
		{"node output shadows an initializer", func(g *onnxpb.GraphProto) {
			g.Node = append(g.Node, pnode("n2", "Relu", []string{"x"}, []string{"w"}))
		}, []string{`"w"`, `"n2"`, "twice"}},
		{"node output shadows a graph input", func(g *onnxpb.GraphProto) {
			g.Node = append(g.Node, pnode("n2", "Relu", []string{"y"}, []string{"x"}))
		}, []string{`"x"`, `"n2"`, "twice"}},
		{"duplicate graph input", func(g *onnxpb.GraphProto) {
			g.Input = append(g.Input, vinfo("x", graph.Float, 2))
		}, []string{`"x"`, "graph input", "twice"}},
		{"duplicate initializer", func(g *onnxpb.GraphProto) {
			g.Initializer = append(g.Initializer, f32Proto("w", []int64{2}, 3, 4))
		}, []string{`"w"`, "initializer", "twice"}},
		{"node output twice in one node", func(g *onnxpb.GraphProto) {
			g.Node = append(g.Node, pnode("n2", "Split", []string{"x"}, []string{"s", "s"}))
		}, []string{`"s"`, `"n2"`}},
		{"empty initializer name", func(g *onnxpb.GraphProto) {
			g.Initializer = append(g.Initializer, f32Proto("", []int64{1}, 1))
		}, []string{"initializer", "empty name"}},
		{"duplicate in a subgraph", func(g *onnxpb.GraphProto) {
			sub := &onnxpb.GraphProto{Name: pstr("body"), Node: []*onnxpb.NodeProto{
				pnode("s1", "Relu", []string{"x"}, []string{"u"}),
				pnode("s2", "Relu", []string{"x"}, []string{"u"}),
			}, Output: []*onnxpb.ValueInfoProto{vinfo("u", graph.Float, 2)}}
			g.Node = append(g.Node, pnode("if", "If", []string{"x"}, []string{"z"},
				graphAttr("then_branch", sub), graphAttr("else_branch", sub)))
		}, []string{`"u"`, `"s2"`, `"body"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := base()
			tc.modify(g)
			_, err := graph.Parse(marshalProto(t, pmodel(g)), "")
			wantErr(t, err, tc.want...)
		})
	}
	// An initializer that is also listed as a graph input is not a duplicate.
	g := base()
	g.Input = append(g.Input, vinfo("w", graph.Float, 2))
	m := parseProto(t, pmodel(g))
	mustVerify(t, m)
	if w := m.Graph.Value("w"); w.Const == nil || len(m.Graph.Inputs) != 2 || m.Graph.Inputs[1] != w {
		t.Errorf("initializer listed as input is not one value")
	}
}

func TestVerifyDomainNotImported(t *testing.T) {
	s := newSimple(t)
	s.add.Domain = "com.example"
	wantVerifyErr(t, s.m, `"add"`, `"com.example"`, "not imported")
	s.m.Opsets = append(s.m.Opsets, graph.OpsetImport{Domain: "com.example", Version: 1})
	mustVerify(t, s.m)

	s.m.Opsets = nil
	wantVerifyErr(t, s.m, "imports no operator set")
	wantVerifyErr(t, s.m, `"relu"`, "not imported")
}

func TestVerifyInitializerSize(t *testing.T) {
	s := newSimple(t)
	s.w.Const.Dims = []int64{5}
	wantVerifyErr(t, s.m, `initializer "w"`, "16 bytes", "20")

	s.w.Const.Dims = []int64{-1, 4}
	wantVerifyErr(t, s.m, `"w"`, "negative")

	// From a file: raw_data of the wrong length.
	mp := pmodel(&onnxpb.GraphProto{
		Name: pstr("g"),
		Initializer: []*onnxpb.TensorProto{{Name: pstr("k"), DataType: proto.Int32(int32(graph.Float)),
			Dims: []int64{3}, RawData: make([]byte, 8)}},
		Node:   []*onnxpb.NodeProto{pnode("n", "Relu", []string{"k"}, []string{"y"})},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 3)},
	})
	wantVerifyErr(t, parseProto(t, mp), `initializer "k"`, "8 bytes", "12")
}

func TestVerifyDeclaredTypeContradictsInitializer(t *testing.T) {
	for _, tc := range []struct {
		name string
		decl *onnxpb.ValueInfoProto
		want []string
	}{
		{"dtype", vinfo("w", graph.Int64, 4), []string{`"w"`, "int64", "float32"}},
		{"shape", vinfo("w", graph.Float, 5), []string{`"w"`, "[5]", "[4]"}},
		{"rank", vinfo("w", graph.Float, 2, 2), []string{`"w"`, "[2,2]", "[4]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp := pmodel(&onnxpb.GraphProto{
				Name:        pstr("g"),
				Input:       []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 4), tc.decl},
				Initializer: []*onnxpb.TensorProto{f32Proto("w", []int64{4}, 1, 2, 3, 4)},
				Node:        []*onnxpb.NodeProto{pnode("n", "Add", []string{"x", "w"}, []string{"y"})},
				Output:      []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 4)},
			})
			wantVerifyErr(t, parseProto(t, mp), tc.want...)
		})
	}
	// A symbolic dimension admits any size.
	decl := vinfo("w", graph.Float, 0)
	decl.Type.GetTensorType().Shape.Dim[0].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}
	mp := pmodel(&onnxpb.GraphProto{
		Name:        pstr("g"),
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 4), decl},
		Initializer: []*onnxpb.TensorProto{f32Proto("w", []int64{4}, 1, 2, 3, 4)},
		Node:        []*onnxpb.NodeProto{pnode("n", "Add", []string{"x", "w"}, []string{"y"})},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 4)},
	})
	mustVerify(t, parseProto(t, mp))

	// Through the API.
	s := newSimple(t)
	s.w.Type = graph.TensorType(graph.Float16, graph.StaticShape(4))
	wantVerifyErr(t, s.m, `"w"`, "float16", "float32")
}

func TestVerifyTopologicalOrder(t *testing.T) {
	s := newSimple(t)
	s.g.Nodes[0], s.g.Nodes[1] = s.g.Nodes[1], s.g.Nodes[0]
	wantVerifyErr(t, s.m, `"add"`, `"a"`, `"relu"`, "topological order")

	mp := pmodel(&onnxpb.GraphProto{
		Name:  pstr("g"),
		Input: []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 2)},
		Node: []*onnxpb.NodeProto{
			pnode("second", "Neg", []string{"h"}, []string{"y"}),
			pnode("first", "Relu", []string{"x"}, []string{"h"}),
		},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 2)},
	})
	m := parseProto(t, mp)
	wantVerifyErr(t, m, `"second" (Neg)`, `"h"`, `"first" (Relu)`, "topological order")
	if err := m.Graph.TopoSort(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, m)
}

func TestVerifyBrokenLinks(t *testing.T) {
	// A node whose graph pointer disagrees with the list it is in.
	s := newSimple(t)
	other := newSimple(t)
	s.g.Nodes = append(s.g.Nodes, other.relu)
	wantVerifyErr(t, s.m, `"relu"`, "does not belong")

	// A value listed as the output of two nodes.
	s = newSimple(t)
	graph.AppendOutputBehindTheBack(s.add, s.relu.Output(0))
	wantVerifyErr(t, s.m, "produced by two nodes", `"relu"`, `"add"`)

	// A value registered under another name.
	s = newSimple(t)
	s.a.Name = "renamed-behind-the-back"
	wantVerifyErr(t, s.m, `"renamed-behind-the-back"`)

	// A use list naming an input that reads something else, and missing
	// one that reads the value.
	s = newSimple(t)
	graph.CorruptUses(s.a, s.relu, s.add)
	wantVerifyErr(t, s.m, `value "a": its use list names input 0 of node "relu" (Relu), which reads something else`)
	wantVerifyErr(t, s.m, `node "add" (Add): input 0 "a" is missing from the value's use list`)
}

func TestVerifyErrorListsEveryProblem(t *testing.T) {
	s := newSimple(t)
	s.add.Domain = "com.example"
	s.w.Const.Dims = []int64{5}
	err := s.m.Verify()
	ve, ok := err.(*graph.VerifyError)
	if !ok || len(ve.Problems) != 2 {
		t.Fatalf("Verify = %v, want two problems", err)
	}
	if !strings.HasPrefix(err.Error(), "2 problems: ") || !strings.Contains(err.Error(), "; ") {
		t.Errorf("message %q does not list both problems", err)
	}
	if m := (&graph.Model{}); m.Verify() == nil {
		t.Errorf("a model without a graph verified")
	}
}
