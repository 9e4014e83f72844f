package data

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testenv"
)

// writePB writes t as a TensorProto file.
func writePB(t testing.TB, path string, tt *graph.Tensor) {
	t.Helper()
	b, err := graph.MarshalTensor(tt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPBSetFolder(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set")
	writePB(t, filepath.Join(set, "input_0.pb"), mustTensor(t, "", graph.Float, []int64{2, 3}, seqF32(6)))
	writePB(t, filepath.Join(set, "input_1.pb"), mustTensor(t, "", graph.Int64, []int64{2}, i64(7, 8)))
	writePB(t, filepath.Join(set, "output_0.pb"), mustTensor(t, "", graph.Float, []int64{1}, f32(0)))
	src, err := Open(set, twoInputs, Options{Batch: 5}) // Batch does not re-batch .pb sets
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 1 || bs[0].Samples != 2 {
		t.Fatalf("%d batches", len(bs))
	}
	ta, tb := bs[0].Tensors[0], bs[0].Tensors[1]
	if ta.Name != "a" || !dimsEqual(ta.Dims, []int64{2, 3}) || !bytes.Equal(tensorBytes(t, ta), seqF32(6)) {
		t.Errorf("a: %s %v", ta.Name, ta.Dims)
	}
	if tb.Name != "b" || !bytes.Equal(tensorBytes(t, tb), i64(7, 8)) {
		t.Errorf("b: %s %v", tb.Name, tb.Dims)
	}

	// Named tensors map by name, whatever their index.
	named := filepath.Join(dir, "named")
	writePB(t, filepath.Join(named, "input_0.pb"), mustTensor(t, "b", graph.Int64, []int64{1}, i64(9)))
	writePB(t, filepath.Join(named, "input_1.pb"), mustTensor(t, "a", graph.Float, []int64{1, 3}, f32(1, 2, 3)))
	src, err = Open(named, twoInputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs = readAll(t, src)
	if len(bs) != 1 || bs[0].Tensors[0].Name != "a" || !bytes.Equal(tensorBytes(t, bs[0].Tensors[0]), f32(1, 2, 3)) ||
		!bytes.Equal(tensorBytes(t, bs[0].Tensors[1]), i64(9)) {
		t.Fatalf("named tensors were not mapped by name")
	}

	// A single .pb file feeds a single-input model; a scalar is one sample.
	one := filepath.Join(dir, "one.pb")
	writePB(t, one, mustTensor(t, "whatever", graph.Float, nil, f32(4)))
	src, err = Open(one, []Input{{Name: "s", DType: graph.Float, Shape: graph.Shape{}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs = readAll(t, src)
	if len(bs) != 1 || bs[0].Samples != 1 || bs[0].Tensors[0].Name != "s" || len(bs[0].Tensors[0].Dims) != 0 {
		t.Fatalf("single .pb: %d batches", len(bs))
	}
}

func TestPBFolderOfSets(t *testing.T) {
	dir := t.TempDir()
	in := []Input{{Name: "x", DType: graph.Int64, Shape: graph.Shape{dyn("N")}}}
	// Natural order: set_2 before set_10.
	for i, name := range []string{"test_data_set_0", "test_data_set_1", "test_data_set_2", "test_data_set_10"} {
		vals := make([]int64, i+1)
		for j := range vals {
			vals[j] = int64(i)
		}
		writePB(t, filepath.Join(dir, name, "input_0.pb"), mustTensor(t, "", graph.Int64, []int64{int64(i + 1)}, i64(vals...)))
	}
	os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not read"), 0o644)
	os.Mkdir(filepath.Join(dir, "unrelated"), 0o755)
	src, err := Open(dir, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 4 {
		t.Fatalf("%d batches, want 4", len(bs))
	}
	for i, b := range bs {
		v, _ := b.Tensors[0].Int64s()
		if b.Samples != i+1 || len(v) != i+1 || v[0] != int64(i) {
			t.Errorf("batch %d: %d samples, values %v", i, b.Samples, v)
		}
	}
}

func TestNaturalCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"set_2", "set_10", -1}, {"set_10", "set_2", 1}, {"a", "b", -1}, {"set_1", "set_1", 0},
		{"x9", "x09", 1}, {"a1b2", "a1b10", -1}, {"abc", "ab", 1},
	} {
		if got := naturalCompare(c.a, c.b); got != c.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestONNXConformanceData opens a real ONNX backend test data set.
func TestONNXConformanceData(t *testing.T) {
	root := testenv.Data(t, "onnx-testdata")
	set := filepath.Join(root, "node", "test_conv_with_strides_padding", "test_data_set_0")
	inputs := []Input{
		{Name: "x", DType: graph.Float, Shape: graph.StaticShape(1, 1, 7, 5)},
		{Name: "W", DType: graph.Float, Shape: graph.StaticShape(1, 1, 3, 3)},
	}
	src, err := Open(set, inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 1 || bs[0].Samples != 1 {
		t.Fatalf("%d batches", len(bs))
	}
	for i, tt := range bs[0].Tensors {
		if tt.Name != inputs[i].Name || !dimsEqual(tt.Dims, inputs[i].Shape.Dims()) || tt.DType != graph.Float {
			t.Errorf("tensor %d: %s %s%v", i, tt.Name, tt.DType, tt.Dims)
		}
		if v, err := tt.Float32s(); err != nil || len(v) != int(tt.ByteSize()/4) {
			t.Errorf("tensor %d: %d values, %v", i, len(v), err)
		}
	}
	// The whole test folder (model.onnx and test_data_set_0) works too.
	src, err = Open(filepath.Dir(set), inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 1 {
		t.Fatalf("test folder: %d batches", len(bs))
	}
	// A wrong static dim names the input and the file.
	bad := append([]Input{}, inputs...)
	bad[0].Shape = graph.StaticShape(1, 1, 5, 5)
	_, err = Open(set, bad, Options{})
	wantErr(t, err, `input "x"`, "input_0.pb", "float32[1,1,5,5]", "float32[1,1,7,5]")
}

// TestGraphInputsMNIST feeds the committed MNIST model's input list to
// random data.
func TestGraphInputsMNIST(t *testing.T) {
	m, err := graph.LoadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	inputs := GraphInputs(m.Graph)
	if len(inputs) != 1 || inputs[0].Name != "input" || inputs[0].String() != "float32[N,1,28,28]" {
		t.Fatalf("inputs %v", inputs)
	}
	src, err := Open("random", inputs, Options{Batch: 4, Samples: 8})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 2 || !dimsEqual(bs[1].Tensors[0].Dims, []int64{4, 1, 28, 28}) {
		t.Fatalf("%d batches", len(bs))
	}
}
