// Package testgraph builds small models by hand for tests: a Builder adds
// values, initializers and nodes one at a time and fails the test on any
// error, so that a test reads as the graph it makes. It also reads and
// serializes models (LoadFile, ReadModel, Marshal) and makes tensors
// (Float32Tensor, Int64Tensor) for tests, failing them the same way, and
// counts a graph's operators (OpCounts).
package testgraph

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// Builder makes a model node by node. Model is the model being built,
// Graph its main graph, and T the test that any error fails.
type Builder struct {
	T     testing.TB
	Model *graph.Model
	Graph *graph.Graph
}

// New returns a builder of an empty model (IR version 8, the default
// domain at opset) whose main graph is called name.
func New(t testing.TB, name string, opset int64) *Builder {
	g := graph.NewGraph(name)
	return &Builder{T: t, Graph: g, Model: &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: opset}}, Graph: g}}
}

// Value adds a value called name, without a type.
func (b *Builder) Value(name string) *graph.Value {
	b.T.Helper()
	v, err := b.Graph.NewValue(name)
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// TypedValue adds a value called name, declared a dt tensor of static
// shape dims.
func (b *Builder) TypedValue(name string, dt graph.DataType, dims ...int64) *graph.Value {
	b.T.Helper()
	v := b.Value(name)
	v.Type = graph.TensorType(dt, graph.StaticShape(dims...))
	return v
}

// Input adds a float32 graph input of static shape dims.
func (b *Builder) Input(name string, dims ...int64) *graph.Value {
	b.T.Helper()
	v := b.TypedValue(name, graph.Float, dims...)
	b.Graph.Inputs = append(b.Graph.Inputs, v)
	return v
}

// Output declares v a float32 tensor of static shape dims and appends it
// to the graph outputs.
func (b *Builder) Output(v *graph.Value, dims ...int64) {
	v.Type = graph.TensorType(graph.Float, graph.StaticShape(dims...))
	b.Graph.Outputs = append(b.Graph.Outputs, v)
}

// Init adds an initializer of type dt and shape dims holding data, the
// little-endian bytes of its elements.
func (b *Builder) Init(name string, dt graph.DataType, dims []int64, data []byte) *graph.Value {
	b.T.Helper()
	return b.initializer(graph.NewTensor(name, dt, dims, data))
}

// Floats adds a float32 initializer of shape dims holding vals.
func (b *Builder) Floats(name string, dims []int64, vals ...float32) *graph.Value {
	b.T.Helper()
	return b.initializer(graph.NewFloat32Tensor(name, dims, vals))
}

// Int64s adds an int64 initializer of shape dims holding vals.
func (b *Builder) Int64s(name string, dims []int64, vals ...int64) *graph.Value {
	b.T.Helper()
	return b.initializer(graph.NewInt64Tensor(name, dims, vals))
}

// initializer adds t, the result of a tensor constructor that failed when
// err is not nil.
func (b *Builder) initializer(t *graph.Tensor, err error) *graph.Value {
	b.T.Helper()
	v, err := b.Graph.AddInitializer(made(b.T, t, err))
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// Node adds node name computing op from ins; its one output is a new
// value called name+"_out".
func (b *Builder) Node(name, op string, ins ...*graph.Value) *graph.Node {
	b.T.Helper()
	return b.NodeTo(name, op, b.Value(name+"_out"), ins...)
}

// NodeTo adds node name computing op from ins into out, its one output.
func (b *Builder) NodeTo(name, op string, out *graph.Value, ins ...*graph.Value) *graph.Node {
	b.T.Helper()
	n, err := b.Graph.AddNode(op, ins, []*graph.Value{out})
	if err != nil {
		b.T.Fatal(err)
	}
	n.Name = name
	return n
}

// TensorBesideOptional writes, into a new folder of the test's, the
// backend model test_if_opt (at path; its one output is an optional) with
// a tensor output beside it, Not of its condition, and returns the file.
func TensorBesideOptional(t testing.TB, path string) string {
	t.Helper()
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cond := m.Graph.Inputs[0]
	flag, err := m.Graph.NewValue("flag")
	if err != nil {
		t.Fatal(err)
	}
	flag.Type = cond.Type.Clone()
	if _, err := m.Graph.AddNode("Not", []*graph.Value{cond}, []*graph.Value{flag}); err != nil {
		t.Fatal(err)
	}
	m.Graph.Outputs = append(m.Graph.Outputs, flag)
	dir := filepath.Join(t.TempDir(), "test_if_opt_and_a_tensor")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model.onnx")
	if err := graph.Save(m, out, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TransposeIntoHalfMatMul is the smallest model known to crash ONNX
// Runtime 1.24.1 (SIGSEGV creating a session at level all): x float32
// [8,1,32] cast to float16, a Transpose that moves the batch axis
// (perm 1,0,2), a float16 MatMul by zeros [32,10], cast back to float32
// [1,8,10]. A GRU converted to float16 for TensorRT becomes one.
func TransposeIntoHalfMatMul(t testing.TB) *graph.Model {
	b := New(t, "crash", 13)
	x := b.TypedValue("x", graph.Float, 8, 1, 32)
	b.Graph.Inputs = append(b.Graph.Inputs, x)
	half := b.Node("half", "Cast", x)
	half.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float16)})
	swap := b.Node("swap", "Transpose", half.Output(0))
	swap.SetAttr(&graph.Attr{Name: "perm", Type: graph.AttrInts, Ints: []int64{1, 0, 2}})
	w := b.Init("w", graph.Float16, []int64{32, 10}, make([]byte, 32*10*2))
	mm := b.Node("mm", "MatMul", swap.Output(0), w)
	back := b.Node("back", "Cast", mm.Output(0))
	back.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float)})
	b.Output(back.Output(0), 1, 8, 10)
	return b.Model
}
