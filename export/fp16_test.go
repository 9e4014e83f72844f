package export

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// fp16Case is a real model and the labelled data its float16 variant is
// measured on.
type fp16Case struct {
	name, model, images, labels string
	batch                       int
}

func realFP16Cases(t *testing.T) []fp16Case {
	mnist := testenv.Data(t, "mnist")
	testenv.Data(t, "mnist/test_images.npy")
	lines := filepath.Dir(testenv.Data(t, "textlines/cls_labels.npy"))
	return []fp16Case{
		{"mnist_cnn", testenv.Model("mnist_cnn.onnx"), filepath.Join(mnist, "test_images.npy"), filepath.Join(mnist, "test_labels.npy"), 256},
		{"paddleocr_cls", filepath.Join(testenv.Data(t, "ocr-models"), "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
			filepath.Join(lines, "cls_images.npy"), filepath.Join(lines, "cls_labels.npy"), 50},
	}
}

// TestToFloat16RealModels is the acceptance check: the MNIST CNN on its
// 2,004 held-out digits and the PaddleOCR direction classifier on 1,000
// rendered text lines, float16 against float32 in ORT: top-1 agreement
// >= 99.5%, cosine >= 0.999, float32 interface, about half the bytes.
func TestToFloat16RealModels(t *testing.T) {
	ortenv.Require(t)
	for _, tc := range realFP16Cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			m, err := graph.LoadFile(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			before := testgraph.Marshal(t, m)
			rep, err := ToFloat16(m, FP16Options{})
			if err != nil {
				t.Fatal(err)
			}
			after := testgraph.Marshal(t, m)
			if rep.Converted == 0 || rep.ConstantsConverted == 0 {
				t.Fatalf("nothing converted: %+v", rep)
			}
			for _, k := range rep.Kept {
				t.Logf("kept float32: %s (%s): %s", k.Node, k.Op, k.Reason)
			}
			_, outs := ort.Interface(m)
			for _, o := range outs {
				if o.DType != graph.Float {
					t.Errorf("output %q is %s, want float32", o.Name, o.DType)
				}
			}
			ratio := float64(len(after)) / float64(len(before))
			if ratio > 0.55 {
				t.Errorf("float16 model is %d bytes, %.2f of the float32 %d", len(after), ratio, len(before))
			}
			emulateHalf(t, m)
			emulated := testgraph.Marshal(t, m)
			for _, run := range []struct {
				name  string
				model []byte
			}{{"float16", after}, {"float16 rounding emulated in float32", emulated}} {
				// Level disable: ORT must not rewrite the rounding Casts away.
				res, err := compare.Models(compare.Options{ModelA: tc.model, ModelB: run.name, BInMemory: graph.Serialized{Bytes: run.model},
					Data: tc.images, DataOpts: data.Options{Batch: tc.batch}, Labels: tc.labels,
					Atol: map[string]float64{"": 1}, Session: ort.Options{Level: ort.LevelDisable}})
				if err != nil {
					t.Fatal(err)
				}
				o := res.Outputs[0]
				t.Logf("%s, %d samples: %d nodes float16, %d kept, %d casts, %d -> %d bytes (%.3f), %d weights flushed to zero; top-1 agreement %.2f%%, cosine %.7f, max abs error %.3g; accuracy %.2f%% -> %.2f%%",
					run.name, res.Samples, rep.Converted, len(rep.Kept), rep.Casts, len(before), len(after), ratio, rep.FlushedToZero,
					100*o.Top1Agree, o.Cosine, o.MaxAbs, res.Accuracy.A, res.Accuracy.B)
				if o.Top1Agree < 0.995 || o.Cosine < 0.999 {
					t.Errorf("%s: top-1 agreement %.4f (want >= 0.995), cosine %.6f (want >= 0.999)", run.name, o.Top1Agree, o.Cosine)
				}
			}
		})
	}
}

// TestToFloat16Deterministic converts each real model twice: the bytes
// must be identical.
func TestToFloat16Deterministic(t *testing.T) {
	for _, tc := range realFP16Cases(t) {
		var out [2][]byte
		for i := range out {
			m, err := graph.LoadFile(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ToFloat16(m, FP16Options{}); err != nil {
				t.Fatal(err)
			}
			out[i] = testgraph.Marshal(t, m)
			m.Close()
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Errorf("%s: two conversions differ", tc.name)
		}
	}
}

// run runs model bytes in ORT on one float32 input and returns all its
// outputs, which must be float32, end to end.
func run(t *testing.T, model []byte, x *graph.Tensor) []float32 {
	t.Helper()
	return float32Outputs(t, runModel(t, model, ort.DefaultOptions(), x))
}

// tinyInput is the input x[1,4] the tiny float16 test graphs run on.
func tinyInput(t *testing.T) *graph.Tensor {
	t.Helper()
	in, err := graph.NewFloat32Tensor("x", []int64{1, 4}, []float32{-2, 0.5, 3, 0.25})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// sameOutputs fails t unless the model before (bytes) and m, converted,
// compute the same outputs in ORT on tinyInput, to the bit.
func sameOutputs(t *testing.T, before []byte, m *graph.Model) {
	t.Helper()
	in := tinyInput(t)
	if want, got := run(t, before, in), run(t, testgraph.Marshal(t, m), in); !slices.Equal(want, got) {
		t.Errorf("outputs %v, want %v", got, want)
	}
}

// float32Outputs joins float32 outputs end to end.
func float32Outputs(t *testing.T, outs []*graph.Tensor) []float32 {
	t.Helper()
	var all []float32
	for _, o := range outs {
		if o.DType != graph.Float {
			t.Fatalf("output %q is %s, want float32", o.Name, o.DType)
		}
		f, err := o.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f...)
	}
	return all
}

// TestToFloat16OverflowingConstant: y = Relu(x) * 70000, z = Relu(x) + 1.
// The Mul reads a constant float16 cannot hold, so it stays float32 (it
// reads the float16 Relu through a Cast) and its result, far beyond 65504,
// is exact; Relu and Add run in float16 with a float16 constant. The
// inputs are values float16 holds, so both outputs equal float32's.
func TestToFloat16OverflowingConstant(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "tiny", 13)
	x := b.Input("x", 1, 4)
	r := b.Value("r")
	b.NodeTo("relu", "Relu", r, x)
	y := b.TypedValue("y", graph.Float, 1, 4)
	b.NodeTo("scale", "Mul", y, r, b.Floats("big", []int64{1}, 70000))
	z := b.TypedValue("z", graph.Float, 1, 4)
	b.NodeTo("shift", "Add", z, r, b.Floats("one", []int64{1}, 1))
	b.Graph.Outputs = append(b.Graph.Outputs, y, z)
	before := testgraph.Marshal(t, b.Model)

	rep, err := ToFloat16(b.Model, FP16Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Kept) != 1 || rep.Kept[0].Node != "scale" || !strings.Contains(rep.Kept[0].Reason, `"big"`) {
		t.Fatalf("kept %+v, want only the Mul, for its constant", rep.Kept)
	}
	// Casts: x to float16, r back to float32 for the Mul, z to float32.
	if rep.Converted != 2 || rep.ConstantsConverted != 1 || rep.ConstantsKept != 1 || rep.Casts != 3 {
		t.Errorf("report %+v: want Relu and Add converted, one constant each way, 3 casts", rep)
	}
	if big := b.Graph.Value("big").Const; big.DType != graph.Float {
		t.Errorf("the overflowing constant is now %s", big.DType)
	}
	if one := b.Graph.Value("one").Const; one.DType != graph.Float16 {
		t.Errorf("the Add's constant is %s, want float16", one.DType)
	}
	for _, name := range []string{"x", "y", "z"} {
		if v := b.Graph.Value(name); v.Type.Elem != graph.Float {
			t.Errorf("graph interface value %q is now %s", name, v.Type)
		}
	}
	if v := b.Graph.Value("r"); v.Producer().OpType != "Relu" || b.Graph.Value("z").Producer().OpType != "Cast" {
		t.Errorf("unexpected wiring: r from %s, z from %s", v.Producer(), b.Graph.Value("z").Producer())
	}
	after := testgraph.Marshal(t, b.Model)

	in := tinyInput(t)
	want, got := run(t, before, in), run(t, after, in)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("output %d = %v, want %v", i, got[i], want[i])
		}
	}
	if want[2] <= float16Max {
		t.Errorf("y[2] = %g: the test should exercise a value beyond float16's range", want[2])
	}
}

// qdqModel is x -> QuantizeLinear -> DequantizeLinear -> y at opset.
func qdqModel(t *testing.T, opset int64) *testgraph.Builder {
	b := testgraph.New(t, "tiny", opset)
	x := b.Input("x", 1, 4)
	scale := b.Floats("scale", nil, 0.05)
	zp := b.Init("zp", graph.Uint8, nil, []byte{128})
	q := b.Value("q")
	b.NodeTo("quantize", "QuantizeLinear", q, x, scale, zp)
	y := b.TypedValue("y", graph.Float, 1, 4)
	b.NodeTo("dequantize", "DequantizeLinear", y, q, scale, zp)
	b.Graph.Outputs = append(b.Graph.Outputs, y)
	return b
}

// TestToFloat16Schema: QuantizeLinear and DequantizeLinear admit float16
// only from opset 19. With the block list emptied they convert at 19 and
// stay float32 at 13, saying why; by default they are blocked at any
// opset.
func TestToFloat16Schema(t *testing.T) {
	for _, tc := range []struct {
		opset     int64
		block     []string
		converted int
		reason    string
	}{
		{13, []string{}, 0, "admits float16 from opset 19, the model imports opset 13"},
		{19, []string{}, 2, ""},
		{19, nil, 0, "blocked: quantization scales"},
	} {
		b := qdqModel(t, tc.opset)
		rep, err := ToFloat16(b.Model, FP16Options{Block: tc.block})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Converted != tc.converted {
			t.Errorf("opset %d, block %v: %d nodes converted, want %d (kept %+v)", tc.opset, tc.block, rep.Converted, tc.converted, rep.Kept)
		}
		for _, k := range rep.Kept {
			if !strings.Contains(k.Reason, tc.reason) {
				t.Errorf("opset %d, block %v: %s kept because %q, want %q", tc.opset, tc.block, k.Node, k.Reason, tc.reason)
			}
		}
		scale := b.Graph.Value("scale").Const.DType
		if wantScale := map[bool]graph.DataType{true: graph.Float16, false: graph.Float}[tc.converted > 0]; scale != wantScale {
			t.Errorf("opset %d, block %v: scale is %s, want %s", tc.opset, tc.block, scale, wantScale)
		}
	}
}

// TestToFloat16Options: KeepFloat32 patterns match a node's whole name or
// op type, Block replaces the default list; the result still runs in ORT
// and agrees with float32.
func TestToFloat16Options(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Data(t, "mnist")
	path := testenv.Model("mnist_cnn.onnx")
	for _, tc := range []struct {
		name string
		opts FP16Options
		kept []string // op types, in graph order
	}{
		{"keep by op type", FP16Options{KeepFloat32: []string{"Gemm"}}, []string{"Gemm"}},
		{"keep by name", FP16Options{KeepFloat32: []string{"/features/features.[03]/.*"}}, []string{"Conv", "Conv"}},
		{"pattern is anchored", FP16Options{KeepFloat32: []string{"Con"}}, nil},
		{"block", FP16Options{Block: []string{"Relu"}}, []string{"Relu", "Relu", "Relu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := graph.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			rep, err := ToFloat16(m, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, k := range rep.Kept {
				kept = append(kept, k.Op)
			}
			if strings.Join(kept, ",") != strings.Join(tc.kept, ",") || rep.Converted != 11-len(tc.kept) {
				t.Fatalf("kept %+v, %d converted; want %v kept", rep.Kept, rep.Converted, tc.kept)
			}
			res, err := compare.Models(compare.Options{ModelA: path, ModelB: tc.name, BInMemory: graph.Serialized{Bytes: testgraph.Marshal(t, m)},
				Data: filepath.Join(mnist, "test_images.npy"), DataOpts: data.Options{Batch: 500, Samples: 500},
				Atol: map[string]float64{"": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if o := res.Outputs[0]; o.Top1Agree < 0.995 || o.Cosine < 0.999 {
				t.Errorf("top-1 agreement %.4f, cosine %.6f", o.Top1Agree, o.Cosine)
			}
		})
	}
}

// TestToFloat16Refusals: a bad pattern is an error that names it, and
// leaves the model as it was.
func TestToFloat16Refusals(t *testing.T) {
	b := qdqModel(t, 19)
	before := testgraph.Marshal(t, b.Model)
	if _, err := ToFloat16(b.Model, FP16Options{KeepFloat32: []string{"Conv("}}); err == nil || !strings.Contains(err.Error(), `"Conv("`) {
		t.Errorf("bad pattern: got %v", err)
	}
	if !bytes.Equal(before, testgraph.Marshal(t, b.Model)) {
		t.Error("a refused conversion changed the model")
	}
}

// emulateHalf is EmulateFloat16, failing t on an error.
func emulateHalf(t *testing.T, m *graph.Model) {
	t.Helper()
	if err := EmulateFloat16(m); err != nil {
		t.Fatal(err)
	}
}

// TestToFloat16BorderNames: r = Relu(x) is a graph output and is read by
// a float16 Add and a float32 ReduceSum (blocked). The Relu writes r_fp16,
// a Cast writes r from it; the Add reads r_fp16 and the ReduceSum r, with
// no further Cast. Names are the value's name with a suffix.
func TestToFloat16BorderNames(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "tiny", 13)
	x := b.Input("x", 1, 4)
	r := b.TypedValue("r", graph.Float, 1, 4)
	b.NodeTo("relu", "Relu", r, x)
	z := b.TypedValue("z", graph.Float, 1, 4)
	add := b.NodeTo("add", "Add", z, r, b.Floats("one", []int64{1}, 1))
	s := b.TypedValue("s", graph.Float, 1, 1)
	sum := b.NodeTo("sum", "ReduceSum", s, r)
	b.Graph.Outputs = append(b.Graph.Outputs, r, z, s)
	before := testgraph.Marshal(t, b.Model)

	rep, err := ToFloat16(b.Model, FP16Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Casts != 3 || rep.Converted != 2 || len(rep.Kept) != 1 || rep.Kept[0].Op != "ReduceSum" {
		t.Fatalf("report %+v: want 3 casts, Relu and Add converted, ReduceSum kept", rep)
	}
	var casts []string
	for _, n := range b.Graph.Nodes {
		if n.OpType == "Cast" {
			casts = append(casts, n.Input(0).Name+"->"+n.Output(0).Name)
		}
	}
	if got, want := strings.Join(casts, " "), "x->x_fp16 r_fp16->r z_fp16->z"; got != want {
		t.Errorf("casts %s, want %s", got, want)
	}
	if add.Input(0).Name != "r_fp16" || sum.Input(0).Name != "r" {
		t.Errorf("the Add reads %q, the ReduceSum %q", add.Input(0).Name, sum.Input(0).Name)
	}
	if ty := b.Graph.Value("r_fp16").Type; ty.String() != "float16[1,4]" {
		t.Errorf("r_fp16 declared %s", ty)
	}
	sameOutputs(t, before, b.Model)
}

// TestToFloat16NodeNamedAfterOutput: exporters often name a node after
// its output. The Cast that writes the float32 graph output y is named
// after y, which the Relu producing it already is: the Cast gets a suffix,
// and ONNX Runtime (which refuses two nodes of one name) runs the model.
func TestToFloat16NodeNamedAfterOutput(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "tiny", 13)
	x := b.Input("x", 1, 4)
	y := b.TypedValue("y", graph.Float, 1, 4)
	b.NodeTo("y", "Relu", y, x)
	b.Graph.Outputs = append(b.Graph.Outputs, y)
	before := testgraph.Marshal(t, b.Model)
	if _, err := ToFloat16(b.Model, FP16Options{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range b.Graph.Nodes {
		if names[n.Name] {
			t.Errorf("two nodes named %q", n.Name)
		}
		names[n.Name] = true
	}
	sameOutputs(t, before, b.Model)
}

// TestToFloat16ClipWithoutLimit: a Clip whose max input is float32's
// largest value ("no limit") stays float32 with its constants; a Clip
// with a float16-sized max converts.
func TestToFloat16ClipWithoutLimit(t *testing.T) {
	b := testgraph.New(t, "tiny", 13)
	x := b.Input("x", 2)
	r := b.Value("r")
	b.NodeTo("relu6", "Clip", r, x, b.Floats("lo", nil, 0), b.Floats("six", nil, 6))
	y := b.TypedValue("y", graph.Float, 2)
	b.NodeTo("floor_only", "Clip", y, r, b.Floats("zero", nil, 0), b.Floats("nolimit", nil, math.MaxFloat32))
	b.Graph.Outputs = append(b.Graph.Outputs, y)
	rep, err := ToFloat16(b.Model, FP16Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Converted != 1 || len(rep.Kept) != 1 || rep.Kept[0].Node != "floor_only" || !strings.Contains(rep.Kept[0].Reason, `"nolimit"`) {
		t.Fatalf("report %+v: want relu6 converted, floor_only kept for its max", rep)
	}
	for name, want := range map[string]graph.DataType{"lo": graph.Float16, "six": graph.Float16, "zero": graph.Float, "nolimit": graph.Float} {
		if dt := b.Graph.Value(name).Const.DType; dt != want {
			t.Errorf("constant %q is %s, want %s", name, dt, want)
		}
	}
}

// TestDefaultFP16Block: sorted, blocks the growing reductions and not the
// bounded ones, and blocks only ops the schema table admits (a block on
// an op that never converts would be dead).
func TestDefaultFP16Block(t *testing.T) {
	ops := DefaultFP16Block()
	if !slices.IsSorted(ops) {
		t.Errorf("not sorted: %v", ops)
	}
	for _, op := range []string{"ReduceSum", "LayerNormalization", "Exp", "Resize"} {
		if !slices.Contains(ops, op) {
			t.Errorf("%s is not blocked", op)
		}
	}
	for _, op := range []string{"Softmax", "ReduceMean", "GlobalAveragePool", "Max"} {
		if slices.Contains(ops, op) {
			t.Errorf("%s is blocked", op)
		}
	}
	for _, op := range ops {
		if _, ok := fp16Schema[op]; !ok {
			t.Errorf("%s is blocked but not in the schema table", op)
		}
	}
}
