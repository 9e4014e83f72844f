package ort_test

import (
	"os"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
)

// oneNode builds a model computing op(x) for a float32 input of shape dims,
// with the output declared as outType.
func oneNode(t *testing.T, op string, dims []int64, outType *graph.Type, attrs ...*graph.Attr) (*graph.Model, []byte) {
	t.Helper()
	g := graph.NewGraph("g")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(dims...))
	y.Type = outType
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	n, err := g.AddNode(op, []*graph.Value{x}, []*graph.Value{y})
	if err != nil {
		t.Fatal(err)
	}
	n.Attrs = attrs
	m := &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, b
}

func runOne(t *testing.T, m *graph.Model, b []byte, in *graph.Tensor) *graph.Tensor {
	t.Helper()
	return runSerialized(t, m, graph.Serialized{Bytes: b}, in)
}

// runSerialized runs s (with m's interface) on in and returns its output.
func runSerialized(t *testing.T, m *graph.Model, ser graph.Serialized, in *graph.Tensor) *graph.Tensor {
	t.Helper()
	ins, outs := ort.Interface(m)
	return ortenv.Run(t, ort.SourceFrom(ser, ins, outs), ort.DefaultOptions(), []*graph.Tensor{in})[0]
}

func TestFloat16Output(t *testing.T) {
	ortenv.Require(t)
	m, b := oneNode(t, "Cast", []int64{2, 3}, graph.TensorType(graph.Float16, graph.StaticShape(2, 3)),
		&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float16)})
	vals := []float32{0, 1, -2, 0.5, 65504, 1e-3}
	in, _ := graph.NewFloat32Tensor("x", []int64{2, 3}, vals)
	out := runOne(t, m, b, in)
	if out.DType != graph.Float16 || len(out.Dims) != 2 {
		t.Fatalf("got %s%v", out.DType, out.Dims)
	}
	got, err := out.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if d := got[i] - v; d > 1e-3*max(1, v) || d < -1e-3*max(1, v) {
			t.Errorf("element %d: %g, want %g", i, got[i], v)
		}
	}
}

func TestScalarOutput(t *testing.T) {
	ortenv.Require(t)
	m, b := oneNode(t, "ReduceSum", []int64{4}, graph.TensorType(graph.Float, graph.Shape{}),
		&graph.Attr{Name: "keepdims", Type: graph.AttrInt, Int: 0})
	in, _ := graph.NewFloat32Tensor("x", []int64{4}, []float32{1, 2, 3, 4})
	out := runOne(t, m, b, in)
	got, _ := out.Float32s()
	if len(out.Dims) != 0 || len(got) != 1 || got[0] != 10 {
		t.Errorf("got %v %v, want scalar 10", out.Dims, got)
	}
}

func TestBadInputs(t *testing.T) {
	ortenv.Require(t)
	m, b := oneNode(t, "Relu", []int64{2}, graph.TensorType(graph.Float, graph.StaticShape(2)))
	ins, outs := ort.Interface(m)
	s, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, ort.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wrong, _ := graph.NewInt64Tensor("x", []int64{2}, []int64{1, 2})
	if _, err := s.Run([]*graph.Tensor{wrong}); err == nil || !strings.Contains(err.Error(), "ONNX Runtime") {
		t.Errorf("int64 fed to a float input: %v", err)
	}
	if _, err := s.Run(nil); err == nil {
		t.Error("no inputs accepted")
	}
	if _, err := ort.NewSession(ort.Source{Bytes: []byte("not a model"), Inputs: ins, Outputs: outs}, ort.DefaultOptions()); err == nil ||
		!strings.Contains(err.Error(), "cannot load the model") {
		t.Errorf("garbage model: %v", err)
	}
}

func TestProviders(t *testing.T) {
	ortenv.Require(t)
	m, b := oneNode(t, "Relu", []int64{2}, graph.TensorType(graph.Float, graph.StaticShape(2)))
	ins, outs := ort.Interface(m)
	for _, p := range []string{"cuda", "tensorrt"} {
		opts := ort.DefaultOptions()
		opts.Provider = p
		_, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, opts)
		if err == nil || !strings.Contains(err.Error(), "execution provider "+p+" is not available") {
			t.Errorf("%s: %v", p, err)
		}
	}
	opts := ort.DefaultOptions()
	opts.Provider = "tpu"
	if _, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, opts); err == nil {
		t.Error("unknown provider accepted")
	}
}

func TestLevels(t *testing.T) {
	for i, name := range []string{"disable", "basic", "extended", "all"} {
		l, err := ort.ParseLevel(name)
		if err != nil || int(l) != i || l.String() != name {
			t.Errorf("%s: %v %v", name, l, err)
		}
	}
	if _, err := ort.ParseLevel("max"); err == nil {
		t.Error("unknown level accepted")
	}
}

func TestOptimizedModelFile(t *testing.T) {
	ortenv.Require(t)
	m, b := oneNode(t, "Relu", []int64{2}, graph.TensorType(graph.Float, graph.StaticShape(2)))
	ins, outs := ort.Interface(m)
	for _, name := range []string{"opt.onnx", "opt.ort"} {
		path := t.TempDir() + "/" + name
		ortenv.WriteOptimized(t, ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, ort.DefaultOptions(), path)
		fi, err := os.Stat(path)
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

// A model in memory whose weights stay in a side file (what
// graph.MarshalReferencing gives for models over 2 GiB) runs when the
// source names the side file's folder, and only then.
func TestExternalDir(t *testing.T) {
	ortenv.Require(t)
	g := graph.NewGraph("g")
	x, _ := g.NewValue("x")
	w, _ := g.NewValue("w")
	y, _ := g.NewValue("y")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, 512))
	vals := make([]float32, 512)
	for i := range vals {
		vals[i] = float32(i)
	}
	var err error
	if w.Const, err = graph.NewFloat32Tensor("w", []int64{1, 512}, vals); err != nil {
		t.Fatal(err)
	}
	g.Initializers = []*graph.Value{w}
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	if _, err := g.AddNode("Add", []*graph.Value{x, w}, []*graph.Value{y}); err != nil {
		t.Fatal(err)
	}
	m := &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g}
	dir := t.TempDir()
	path := dir + "/m.onnx"
	if err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalAlways}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := graph.NewFloat32Tensor("x", []int64{1, 512}, make([]float32, 512))
	got, _ := runSerialized(t, m, graph.Serialized{Bytes: b, Dir: dir}, in).Float32s()
	if got[511] != 511 {
		t.Errorf("y[511] = %v, want 511 (read from the side file)", got[511])
	}
	ins, outs := ort.Interface(m)
	if s, err := ort.NewSession(ort.SourceFrom(graph.Serialized{Bytes: b}, ins, outs), ort.DefaultOptions()); err == nil {
		s.Close()
		t.Error("the session opened without the side file's folder")
	}
}
