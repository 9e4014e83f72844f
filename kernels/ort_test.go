package kernels_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/kernels"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
)

// tensorOf builds a tensor of any integer, bool or float type from
// values (float16 through the Cast kernel).
func tensorOf(t testing.TB, dt graph.DataType, dims []int64, vals ...float64) *graph.Tensor {
	t.Helper()
	if dt == graph.Float16 {
		f := tensorOf(t, graph.Double, dims, vals...)
		out, err := kernels.Eval("Cast", "", 13, attrs{"to": intAttr(int64(graph.Float16))}, []*graph.Tensor{f})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	size := dt.BitSize() / 8
	b := make([]byte, size*len(vals))
	le := binary.LittleEndian
	for i, v := range vals {
		switch {
		case dt == graph.Float:
			le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		case dt == graph.Double:
			le.PutUint64(b[8*i:], math.Float64bits(v))
		case size == 1:
			b[i] = byte(int64(v))
		case size == 2:
			le.PutUint16(b[2*i:], uint16(int64(v)))
		case size == 4:
			le.PutUint32(b[4*i:], uint32(int64(v)))
		default:
			le.PutUint64(b[8*i:], uint64(int64(v)))
		}
	}
	x, err := graph.NewTensor("", dt, dims, b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// attrs is a literal attribute set for tests.
type attrs map[string]*graph.Attr

func (a attrs) Attr(name string) *graph.Attr {
	if x := a[name]; x != nil {
		x.Name = name
		return x
	}
	return nil
}

func intAttr(v int64) *graph.Attr     { return &graph.Attr{Type: graph.AttrInt, Int: v} }
func intsAttr(v ...int64) *graph.Attr { return &graph.Attr{Type: graph.AttrInts, Ints: v} }

type kernelCase struct {
	name  string
	op    string
	opset int64
	attrs attrs
	in    []*graph.Tensor
}

// corners are cases the backend node tests do not reach: older opsets
// (attributes that later became inputs), clamping, wrap-around, rounding,
// legacy attribute forms.
func corners(t testing.TB) []kernelCase {
	f := func(dims []int64, v ...float64) *graph.Tensor { return tensorOf(t, graph.Float, dims, v...) }
	i64 := func(dims []int64, v ...float64) *graph.Tensor { return tensorOf(t, graph.Int64, dims, v...) }
	i32 := func(dims []int64, v ...float64) *graph.Tensor { return tensorOf(t, graph.Int32, dims, v...) }
	of := func(dt graph.DataType, dims []int64, v ...float64) *graph.Tensor { return tensorOf(t, dt, dims, v...) }
	x234 := make([]float64, 24)
	for i := range x234 {
		x234[i] = float64(i) - 7.5
	}
	x := f([]int64{2, 3, 4}, x234...)
	big := math.MaxInt64
	return []kernelCase{
		{"squeeze attr", "Squeeze", 11, attrs{"axes": intsAttr(-1)}, []*graph.Tensor{f([]int64{2, 1}, 1, 2)}},
		{"squeeze all", "Squeeze", 13, nil, []*graph.Tensor{f([]int64{1, 2, 1}, 1, 2)}},
		{"unsqueeze attr", "Unsqueeze", 11, attrs{"axes": intsAttr(0, -1)}, []*graph.Tensor{f([]int64{2}, 1, 2)}},
		{"unsqueeze input", "Unsqueeze", 13, nil, []*graph.Tensor{f([]int64{2}, 1, 2), i64([]int64{2}, 2, 0)}},
		{"reducesum attr", "ReduceSum", 11, attrs{"axes": intsAttr(1), "keepdims": intAttr(0)}, []*graph.Tensor{x}},
		{"reducesum all", "ReduceSum", 13, attrs{"keepdims": intAttr(0)}, []*graph.Tensor{x}},
		{"reducesum int", "ReduceSum", 13, nil, []*graph.Tensor{i32([]int64{2, 2}, 1, 2, 3, 2147483647), i64([]int64{1}, 0)}},
		{"reduceprod input", "ReduceProd", 18, nil, []*graph.Tensor{x, i64([]int64{2}, 0, -1)}},
		{"reduceprod attr", "ReduceProd", 13, attrs{"axes": intsAttr(2)}, []*graph.Tensor{x}},
		{"reducemax 18", "ReduceMax", 18, attrs{"keepdims": intAttr(0)}, []*graph.Tensor{x}},
		{"reducemean attr", "ReduceMean", 13, attrs{"axes": intsAttr(0, 2)}, []*graph.Tensor{x}},
		{"reducemin noop", "ReduceMin", 18, attrs{"noop_with_empty_axes": intAttr(1)}, []*graph.Tensor{x}},
		{"slice attrs", "Slice", 9, attrs{"starts": intsAttr(1), "ends": intsAttr(1000), "axes": intsAttr(1)}, []*graph.Tensor{x}},
		{"slice neg steps", "Slice", 13, nil, []*graph.Tensor{x, i64([]int64{2}, -1, float64(big)), i64([]int64{2}, -1000, 0), i64([]int64{2}, 2, 0), i64([]int64{2}, -2, -1)}},
		{"slice int32 clamp", "Slice", 13, nil, []*graph.Tensor{x, i32([]int64{1}, -100), i32([]int64{1}, 2), nil, nil}},
		{"slice empty", "Slice", 13, nil, []*graph.Tensor{x, i64([]int64{1}, 3), i64([]int64{1}, 1), i64([]int64{1}, 2)}},
		{"reshape copy", "Reshape", 13, nil, []*graph.Tensor{x, i64([]int64{2}, 0, -1)}},
		{"reshape allowzero", "Reshape", 14, attrs{"allowzero": intAttr(1)}, []*graph.Tensor{f([]int64{0, 4}), i64([]int64{2}, 4, 0)}},
		{"reshape attr", "Reshape", 4, attrs{"shape": intsAttr(4, -1)}, []*graph.Tensor{x}},
		{"shape start end", "Shape", 15, attrs{"start": intAttr(-2), "end": intAttr(100)}, []*graph.Tensor{x}},
		{"shape empty", "Shape", 15, attrs{"start": intAttr(2), "end": intAttr(1)}, []*graph.Tensor{x}},
		{"size", "Size", 13, nil, []*graph.Tensor{x}},
		{"gather neg int32", "Gather", 13, attrs{"axis": intAttr(1)}, []*graph.Tensor{x, i32([]int64{2, 2}, -1, 0, 2, -3)}},
		{"gather scalar", "Gather", 13, nil, []*graph.Tensor{i64([]int64{3}, 5, 6, 7), i64(nil, -1)}},
		{"cast trunc", "Cast", 13, attrs{"to": intAttr(int64(graph.Int32))}, []*graph.Tensor{f([]int64{4}, -2.7, 2.7, -0.5, 1e9)}},
		{"cast uint8", "Cast", 13, attrs{"to": intAttr(int64(graph.Uint8))}, []*graph.Tensor{f([]int64{3}, 0, 254.9, 3.5)}},
		{"cast to f16", "Cast", 13, attrs{"to": intAttr(int64(graph.Float16))}, []*graph.Tensor{f([]int64{6}, 1.0009765625, 1.00048828125, 1.00146484375, 65519, 65520, 1e-8)}},
		{"cast i64 f16", "Cast", 13, attrs{"to": intAttr(int64(graph.Float16))}, []*graph.Tensor{i64([]int64{3}, 2049, -70000, 3)}},
		{"cast i64 f32", "Cast", 13, attrs{"to": intAttr(int64(graph.Float))}, []*graph.Tensor{i64([]int64{2}, 16777217, -9007199254740993)}},
		{"cast bool", "Cast", 13, attrs{"to": intAttr(int64(graph.Bool))}, []*graph.Tensor{f([]int64{3}, 0, -0.1, math.NaN())}},
		{"cast from bool", "Cast", 13, attrs{"to": intAttr(int64(graph.Float))}, []*graph.Tensor{of(graph.Bool, []int64{2}, 1, 0)}},
		{"cast wrap", "Cast", 13, attrs{"to": intAttr(int64(graph.Int8))}, []*graph.Tensor{i32([]int64{3}, 300, -129, 127)}},
		{"cast f16 f32", "Cast", 13, attrs{"to": intAttr(int64(graph.Float))}, []*graph.Tensor{of(graph.Float16, []int64{2}, 0.1, -3)}},
		{"cast u32 i64", "Cast", 13, attrs{"to": intAttr(int64(graph.Int64))}, []*graph.Tensor{of(graph.Uint32, []int64{1}, 4294967295)}},
		{"cast u64 f32", "Cast", 13, attrs{"to": intAttr(int64(graph.Float))}, []*graph.Tensor{of(graph.Uint64, []int64{1}, -1)}},
		{"castlike", "CastLike", 15, nil, []*graph.Tensor{f([]int64{2}, 1.5, -1.5), i64([]int64{1}, 0)}},
		{"div int", "Div", 13, nil, []*graph.Tensor{i32([]int64{4}, -7, 7, -7, 7), i32([]int64{4}, 2, -2, -2, 2)}},
		{"div u8", "Div", 14, nil, []*graph.Tensor{of(graph.Uint8, []int64{2}, 255, 7), of(graph.Uint8, []int64{1}, 2)}},
		{"mul wrap", "Mul", 14, nil, []*graph.Tensor{of(graph.Int8, []int64{2}, 100, -100), of(graph.Int8, []int64{1}, 3)}},
		{"sub u8", "Sub", 14, nil, []*graph.Tensor{of(graph.Uint8, []int64{2}, 1, 200), of(graph.Uint8, []int64{2}, 2, 100)}},
		{"add f16", "Add", 14, nil, []*graph.Tensor{of(graph.Float16, []int64{2}, 1, 2048), of(graph.Float16, []int64{2}, 0.0004, 1)}},
		{"add f64", "Add", 14, nil, []*graph.Tensor{of(graph.Double, []int64{1}, 0.1), of(graph.Double, []int64{1}, 0.2)}},
		{"pow ii", "Pow", 15, nil, []*graph.Tensor{i64([]int64{3}, 2, -3, 10), i64([]int64{3}, 10, 3, 15)}},
		{"pow fi", "Pow", 15, nil, []*graph.Tensor{f([]int64{3}, 2, -3, 0.5), i32([]int64{1}, 3)}},
		{"pow ff", "Pow", 13, nil, []*graph.Tensor{f([]int64{3}, 2, 9, 0.5), f([]int64{3}, 0.5, -0.5, 3)}},
		{"range f", "Range", 11, nil, []*graph.Tensor{f(nil, 0.1), f(nil, 1.0), f(nil, 0.1)}},
		{"range i", "Range", 11, nil, []*graph.Tensor{i64(nil, 10), i64(nil, -3), i64(nil, -4)}},
		{"range d", "Range", 11, nil, []*graph.Tensor{of(graph.Double, nil, 1), of(graph.Double, nil, 0), of(graph.Double, nil, 0.3)}},
		{"matmul 1d", "MatMul", 13, nil, []*graph.Tensor{f([]int64{3}, 1, 2, 3), f([]int64{3, 2}, 1, 2, 3, 4, 5, 6)}},
		{"matmul 2d1d", "MatMul", 13, nil, []*graph.Tensor{f([]int64{2, 3}, 1, 2, 3, 4, 5, 6), f([]int64{3}, 1, 0, -1)}},
		{"matmul batch", "MatMul", 13, nil, []*graph.Tensor{x, f([]int64{1, 4, 2}, 1, 2, 3, 4, 5, 6, 7, 8)}},
		{"matmul int", "MatMul", 13, nil, []*graph.Tensor{i32([]int64{2, 2}, 1, 2, 3, 4), i32([]int64{2, 2}, 5, 6, 7, 8)}},
		{"tile", "Tile", 13, nil, []*graph.Tensor{f([]int64{2, 1}, 1, 2), i64([]int64{2}, 2, 3)}},
		{"expand", "Expand", 13, nil, []*graph.Tensor{f([]int64{3, 1}, 1, 2, 3), i64([]int64{3}, 2, 1, 4)}},
		{"constantofshape", "ConstantOfShape", 9, attrs{"value": {Type: graph.AttrTensor, Tensor: i32([]int64{1}, 7)}}, []*graph.Tensor{i64([]int64{2}, 2, 3)}},
		{"constantofshape scalar", "ConstantOfShape", 9, nil, []*graph.Tensor{i64([]int64{0})}},
		{"where", "Where", 16, nil, []*graph.Tensor{of(graph.Bool, []int64{2, 1}, 1, 0), i64([]int64{3}, 1, 2, 3), i64([]int64{1}, -1)}},
		{"concat neg", "Concat", 13, attrs{"axis": intAttr(-1)}, []*graph.Tensor{x, x}},
		{"concat empty", "Concat", 13, attrs{"axis": intAttr(0)}, []*graph.Tensor{i64([]int64{0}), i64([]int64{2}, 1, 2)}},
		{"transpose", "Transpose", 13, nil, []*graph.Tensor{x}},
		{"transpose perm", "Transpose", 13, attrs{"perm": intsAttr(1, 2, 0)}, []*graph.Tensor{x}},
		{"flatten 0", "Flatten", 13, attrs{"axis": intAttr(0)}, []*graph.Tensor{x}},
		{"max3", "Max", 13, nil, []*graph.Tensor{f([]int64{3}, 1, 5, 3), f([]int64{1}, 2), f([]int64{2, 1}, 0, 4)}},
		{"min int", "Min", 13, nil, []*graph.Tensor{i64([]int64{3}, 1, 5, 3), i64([]int64{3}, 2, 2, 2)}},
		{"mean", "Mean", 13, nil, []*graph.Tensor{f([]int64{2}, 1, 2), f([]int64{2}, 4, 4), f([]int64{1}, 1)}},
		{"sum", "Sum", 13, nil, []*graph.Tensor{x, f([]int64{4}, 1, 2, 3, 4)}},
		{"equal bool", "Equal", 13, nil, []*graph.Tensor{of(graph.Bool, []int64{2}, 1, 0), of(graph.Bool, []int64{1}, 1)}},
		{"less int", "Less", 13, nil, []*graph.Tensor{i64([]int64{3}, 1, 2, 3), i64([]int64{1}, 2)}},
		{"greaterorequal", "GreaterOrEqual", 16, nil, []*graph.Tensor{f([]int64{3}, 1, 2, math.NaN()), f([]int64{1}, 2)}},
		{"not", "Not", 1, nil, []*graph.Tensor{of(graph.Bool, []int64{2}, 1, 0)}},
		{"xor", "Xor", 7, nil, []*graph.Tensor{of(graph.Bool, []int64{2, 2}, 1, 0, 1, 0), of(graph.Bool, []int64{2}, 1, 1)}},
		{"neg int", "Neg", 13, nil, []*graph.Tensor{i32([]int64{2}, -5, 7)}},
		{"abs int", "Abs", 13, nil, []*graph.Tensor{of(graph.Int8, []int64{2}, -5, 7)}},
		{"reciprocal", "Reciprocal", 13, nil, []*graph.Tensor{f([]int64{3}, 2, 0, -4)}},
		{"sqrt f16", "Sqrt", 13, nil, []*graph.Tensor{of(graph.Float16, []int64{3}, 2, 3, 0.01)}},
		{"identity", "Identity", 16, nil, []*graph.Tensor{x}},
		{"mod python", "Mod", 13, nil, []*graph.Tensor{i32([]int64{4}, -7, 7, -7, 7), i32([]int64{4}, 3, -3, -3, 3)}},
		{"mod c", "Mod", 13, attrs{"fmod": intAttr(1)}, []*graph.Tensor{i64([]int64{4}, -7, 7, -7, 7), i64([]int64{4}, 3, -3, -3, 3)}},
		{"mod float", "Mod", 13, attrs{"fmod": intAttr(1)}, []*graph.Tensor{f([]int64{3}, -7.5, 7.25, 1), f([]int64{1}, 2)}},
		{"div f", "Div", 13, nil, []*graph.Tensor{f([]int64{3}, 1, -1, 0), f([]int64{1}, 0)}},
	}
}

// TestKernelsAgreeWithORT evaluates each corner case with the kernels and
// in ONNX Runtime (one-node model, level disable) and wants equal results.
func TestKernelsAgreeWithORT(t *testing.T) {
	ortenv.Require(t)
	ev := &ort.NodeEvaluator{}
	for _, kc := range corners(t) {
		got, err := kernels.Eval(kc.op, "", kc.opset, kc.attrs, kc.in)
		if errors.Is(err, kernels.ErrUnsupported) {
			t.Errorf("%s: %v", kc.name, err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", kc.name, err)
			continue
		}
		n := nodeFor(t, kc)
		want, err := ev.EvalNode(n, kc.in, []graph.OpsetImport{{Version: kc.opset}})
		if err != nil {
			t.Errorf("%s: ORT: %v", kc.name, err)
			continue
		}
		if msg := diff(want[0], got[0]); msg != "" {
			t.Errorf("%s: %s", kc.name, msg)
		}
	}
}

// nodeFor builds the node of a case in a scratch graph.
func nodeFor(t testing.TB, kc kernelCase) *graph.Node {
	g := graph.NewGraph("g")
	ins := make([]*graph.Value, len(kc.in))
	for i, x := range kc.in {
		if x != nil {
			ins[i], _ = g.NewValue(g.UniqueName("in"))
		}
	}
	out, _ := g.NewValue("out")
	n, err := g.AddNode(kc.op, ins, []*graph.Value{out})
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range kc.attrs {
		c := *a
		c.Name = name
		n.Attrs = append(n.Attrs, &c)
	}
	return n
}
