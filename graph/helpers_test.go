package graph_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/testenv"
)

// Shared helpers for the black-box tests of package graph.

// newModel wraps g in a model that imports the default domain at opset 17.
func newModel(g *graph.Graph) *graph.Model {
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Domain: "", Version: 17}}, Graph: g}
}

func mustValue(t testing.TB, g *graph.Graph, name string) *graph.Value {
	t.Helper()
	v, err := g.NewValue(name)
	if err != nil {
		t.Fatalf("NewValue(%q): %v", name, err)
	}
	return v
}

func mustNode(t testing.TB, g *graph.Graph, name, op string, ins, outs []*graph.Value) *graph.Node {
	t.Helper()
	n, err := g.AddNode(op, ins, outs)
	if err != nil {
		t.Fatalf("AddNode(%s %q): %v", op, name, err)
	}
	n.Name = name
	return n
}

func mustF32(t testing.TB, name string, dims []int64, vals []float32) *graph.Tensor {
	t.Helper()
	tn, err := graph.NewFloat32Tensor(name, dims, vals)
	if err != nil {
		t.Fatalf("NewFloat32Tensor(%q): %v", name, err)
	}
	return tn
}

func mustInit(t testing.TB, g *graph.Graph, tn *graph.Tensor) *graph.Value {
	t.Helper()
	v, err := g.AddInitializer(tn)
	if err != nil {
		t.Fatalf("AddInitializer(%q): %v", tn.Name, err)
	}
	return v
}

func mustVerify(t testing.TB, m *graph.Model) {
	t.Helper()
	if err := m.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// wantErr fails unless err is non-nil and its text contains every one of
// subs.
func wantErr(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// wantVerifyErr fails unless m.Verify reports a problem mentioning every
// one of subs (in a single problem line).
func wantVerifyErr(t testing.TB, m *graph.Model, subs ...string) {
	t.Helper()
	err := m.Verify()
	if err == nil {
		t.Fatalf("Verify passed, want a problem mentioning %q", subs)
	}
	ve, ok := err.(*graph.VerifyError)
	if !ok {
		t.Fatalf("Verify returned %T (%v), want *graph.VerifyError", err, err)
	}
	for _, p := range ve.Problems {
		all := true
		for _, s := range subs {
			if !strings.Contains(p, s) {
				all = false
			}
		}
		if all {
			return
		}
	}
	t.Fatalf("no problem mentions all of %q; Verify said: %v", subs, err)
}

// simple is a small model:
//
//	x (input, float32[1,4]) -> Relu "relu" -> a
//	a, w (initializer float32[4]) -> Add "add" -> y (output)
type simple struct {
	m         *graph.Model
	g         *graph.Graph
	x, w, a   *graph.Value
	y         *graph.Value
	relu, add *graph.Node
}

func newSimple(t testing.TB) *simple {
	t.Helper()
	g := graph.NewGraph("simple")
	s := &simple{g: g, m: newModel(g)}
	s.x = mustValue(t, g, "x")
	s.x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 4))
	g.Inputs = append(g.Inputs, s.x)
	s.w = mustInit(t, g, mustF32(t, "w", []int64{4}, []float32{1, 2, 3, 4}))
	s.a = mustValue(t, g, "a")
	s.y = mustValue(t, g, "y")
	s.y.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 4))
	s.relu = mustNode(t, g, "relu", "Relu", []*graph.Value{s.x}, []*graph.Value{s.a})
	s.add = mustNode(t, g, "add", "Add", []*graph.Value{s.a, s.w}, []*graph.Value{s.y})
	g.Outputs = append(g.Outputs, s.y)
	mustVerify(t, s.m)
	return s
}

// useSet returns v's uses as "node:index" strings, sorted.
func useSet(v *graph.Value) []string {
	var out []string
	for _, u := range v.Uses() {
		out = append(out, u.Node.Name+":"+strconv.Itoa(u.Index))
	}
	slices.Sort(out)
	return out
}

func wantUses(t testing.TB, v *graph.Value, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := useSet(v); !slices.Equal(got, want) {
		t.Errorf("uses of %q = %v, want %v", v.Name, got, want)
	}
}

// nodeNames lists the names of g's nodes in order.
func nodeNames(g *graph.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// inputNames lists the names of n's inputs ("" for an omitted one).
func inputNames(n *graph.Node) []string {
	var out []string
	for _, v := range n.Inputs() {
		if v == nil {
			out = append(out, "")
		} else {
			out = append(out, v.Name)
		}
	}
	return out
}

func findNode(g *graph.Graph, name string) *graph.Node {
	for _, n := range g.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// saveReload saves m into a fresh folder (data inline) and loads it back,
// closing it when the test ends. The reloaded model must verify.
func saveReload(t testing.TB, m *graph.Model) *graph.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalNever}); err != nil {
		t.Fatalf("Save: %v", err)
	}
	r, err := graph.LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	mustVerify(t, r)
	return r
}

func mustMarshal(t testing.TB, m *graph.Model) []byte {
	t.Helper()
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

// unmarshalModel decodes b with plain protobuf.
func unmarshalModel(t testing.TB, b []byte) *onnxpb.ModelProto {
	t.Helper()
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		t.Fatalf("proto.Unmarshal: %v", err)
	}
	return mp
}

// sameModel fails unless a and b are equal ONNX models (protobuf equality).
func sameModel(t testing.TB, a, b []byte) {
	t.Helper()
	if !proto.Equal(unmarshalModel(t, a), unmarshalModel(t, b)) {
		t.Fatalf("models differ:\n%v\n---\n%v", unmarshalModel(t, a), unmarshalModel(t, b))
	}
}

// tempLeftovers lists the temporary files Save leaves in dir on failure.
func tempLeftovers(t testing.TB, dir string) []string {
	t.Helper()
	return testenv.DirNames(t, dir, func(name string) bool {
		return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
	})
}

// --- protobuf builders ---

func pstr(s string) *string { return proto.String(s) }

func vinfo(name string, elem graph.DataType, dims ...int64) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{
			Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: pstr(name), Type: &onnxpb.TypeProto{
		Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)), Shape: shape}}}}
}

func pnode(name, op string, ins, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: pstr(name), OpType: pstr(op), Input: ins, Output: outs, Attribute: attrs}
}

func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: pstr(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}

func f32Proto(name string, dims []int64, vals ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: pstr(name), DataType: proto.Int32(int32(graph.Float)), Dims: dims, FloatData: vals}
}

func pmodel(g *onnxpb.GraphProto) *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: pstr(""), Version: proto.Int64(17)}},
		Graph:       g,
	}
}

func marshalProto(t testing.TB, mp *onnxpb.ModelProto) []byte {
	t.Helper()
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatalf("proto.Marshal: %v", err)
	}
	return b
}

func parseProto(t testing.TB, mp *onnxpb.ModelProto) *graph.Model {
	t.Helper()
	m, err := graph.Parse(marshalProto(t, mp), "")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

// ifModelProto is a model with an If node whose branches read outer values:
//
//	x (float32[2]), cond (bool) inputs
//	relu: x -> a;  neg: x -> b
//	if(cond) -> y (output)
//	  then: tid: Identity(a) -> t        (output t)
//	  else: emul: Mul(a, b) -> e         (output e)
func ifModelProto() *onnxpb.ModelProto {
	then := &onnxpb.GraphProto{
		Name:   pstr("then"),
		Node:   []*onnxpb.NodeProto{pnode("tid", "Identity", []string{"a"}, []string{"t"})},
		Output: []*onnxpb.ValueInfoProto{vinfo("t", graph.Float, 2)},
	}
	els := &onnxpb.GraphProto{
		Name:   pstr("else"),
		Node:   []*onnxpb.NodeProto{pnode("emul", "Mul", []string{"a", "b"}, []string{"e"})},
		Output: []*onnxpb.ValueInfoProto{vinfo("e", graph.Float, 2)},
	}
	return ifModelWith(then, els)
}

// ifModelWith is the model of ifModelProto with the given branches and
// initializers in the main graph.
func ifModelWith(then, els *onnxpb.GraphProto, inits ...*onnxpb.TensorProto) *onnxpb.ModelProto {
	return pmodel(&onnxpb.GraphProto{
		Name:        pstr("main"),
		Initializer: inits,
		Input:       []*onnxpb.ValueInfoProto{vinfo("x", graph.Float, 2), vinfo("cond", graph.Bool)},
		Node: []*onnxpb.NodeProto{
			pnode("relu", "Relu", []string{"x"}, []string{"a"}),
			pnode("neg", "Neg", []string{"x"}, []string{"b"}),
			pnode("if", "If", []string{"cond"}, []string{"y"},
				graphAttr("then_branch", then), graphAttr("else_branch", els)),
		},
		Output: []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 2)},
	})
}
