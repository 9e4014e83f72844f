package export

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"optc/compare"
	"optc/data"
	"optc/graph"
	"optc/internal/ortenv"
	"optc/internal/testenv"
	"optc/ort"
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
			before := marshal(t, m)
			rep, err := ToFloat16(m, FP16Options{})
			if err != nil {
				t.Fatal(err)
			}
			after := marshal(t, m)
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
			res, err := compare.Models(compare.Options{ModelA: tc.model, ModelB: "float16", BBytes: after,
				Data: tc.images, DataOpts: data.Options{Batch: tc.batch}, Labels: tc.labels,
				Atol: map[string]float64{"": 1}})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Outputs[0]
			t.Logf("%d samples: %d nodes float16, %d kept, %d casts, %d -> %d bytes (%.3f); top-1 agreement %.2f%%, cosine %.7f, max abs error %.3g; accuracy %.2f%% -> %.2f%%",
				res.Samples, rep.Converted, len(rep.Kept), rep.Casts, len(before), len(after), ratio,
				100*o.Top1Agree, o.Cosine, o.MaxAbs, res.Accuracy.A, res.Accuracy.B)
			if o.Top1Agree < 0.995 || o.Cosine < 0.999 {
				t.Errorf("top-1 agreement %.4f (want >= 0.995), cosine %.6f (want >= 0.999)", o.Top1Agree, o.Cosine)
			}
		})
	}
}

func marshal(t *testing.T, m *graph.Model) []byte {
	t.Helper()
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
			out[i] = marshal(t, m)
			m.Close()
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Errorf("%s: two conversions differ", tc.name)
		}
	}
}

// tiny builds hand-made models for the rule tests.
type tiny struct {
	t *testing.T
	m *graph.Model
	g *graph.Graph
}

func newTiny(t *testing.T, opset int64) *tiny {
	g := graph.NewGraph("tiny")
	return &tiny{t: t, g: g, m: &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: opset}}, Graph: g}}
}

func (b *tiny) value(name string, dt graph.DataType, dims ...int64) *graph.Value {
	b.t.Helper()
	v, err := b.g.NewValue(name)
	if err != nil {
		b.t.Fatal(err)
	}
	if dt != graph.Undefined {
		v.Type = graph.TensorType(dt, graph.StaticShape(dims...))
	}
	return v
}

func (b *tiny) constant(name string, dims []int64, vals ...float32) *graph.Value {
	b.t.Helper()
	tn, err := graph.NewFloat32Tensor(name, dims, vals)
	if err != nil {
		b.t.Fatal(err)
	}
	v, err := b.g.AddInitializer(tn)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *tiny) node(name, op string, out *graph.Value, ins ...*graph.Value) *graph.Node {
	b.t.Helper()
	n, err := b.g.AddNode(op, ins, []*graph.Value{out})
	if err != nil {
		b.t.Fatal(err)
	}
	n.Name = name
	return n
}

// run runs model bytes in ORT on one float32 input and returns all its
// outputs, which must be float32, end to end.
func run(t *testing.T, model []byte, x *graph.Tensor) []float32 {
	t.Helper()
	m, err := graph.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	ins, outs := ort.Interface(m)
	s, err := ort.NewSession(ort.Source{Bytes: model, Inputs: ins, Outputs: outs}, ort.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	y, err := s.Run([]*graph.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	var all []float32
	for _, o := range y {
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
	b := newTiny(t, 13)
	x := b.value("x", graph.Float, 1, 4)
	b.g.Inputs = append(b.g.Inputs, x)
	r := b.value("r", graph.Undefined)
	b.node("relu", "Relu", r, x)
	y := b.value("y", graph.Float, 1, 4)
	b.node("scale", "Mul", y, r, b.constant("big", []int64{1}, 70000))
	z := b.value("z", graph.Float, 1, 4)
	b.node("shift", "Add", z, r, b.constant("one", []int64{1}, 1))
	b.g.Outputs = append(b.g.Outputs, y, z)
	before := marshal(t, b.m)

	rep, err := ToFloat16(b.m, FP16Options{})
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
	if big := b.g.Value("big").Const; big.DType != graph.Float {
		t.Errorf("the overflowing constant is now %s", big.DType)
	}
	if one := b.g.Value("one").Const; one.DType != graph.Float16 {
		t.Errorf("the Add's constant is %s, want float16", one.DType)
	}
	for _, name := range []string{"x", "y", "z"} {
		if v := b.g.Value(name); v.Type.Elem != graph.Float {
			t.Errorf("graph interface value %q is now %s", name, v.Type)
		}
	}
	if v := b.g.Value("r"); v.Producer().OpType != "Relu" || b.g.Value("z").Producer().OpType != "Cast" {
		t.Errorf("unexpected wiring: r from %s, z from %s", v.Producer(), b.g.Value("z").Producer())
	}
	after := marshal(t, b.m)

	in, err := graph.NewFloat32Tensor("x", []int64{1, 4}, []float32{-2, 0.5, 3, 0.25})
	if err != nil {
		t.Fatal(err)
	}
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
