package quantize

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// builder makes small models node by node, with random weights from a
// fixed seed.
type builder struct {
	*testgraph.Builder
	rng *rand.Rand
}

func newBuilder(t testing.TB, opset int64) *builder {
	return &builder{Builder: testgraph.New(t, "test", opset), rng: rand.New(rand.NewSource(1))}
}

// weight adds a float32 initializer of random values in [-scale, scale).
func (b *builder) weight(name string, scale float64, dims ...int64) *graph.Value {
	b.T.Helper()
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32((2*b.rng.Float64() - 1) * scale)
	}
	return b.Floats(name, dims, vals...)
}

// paddedConv adds Conv node name reading ins, padded by 1 on every side
// (a 3x3 kernel keeps the spatial size).
func (b *builder) paddedConv(name string, ins ...*graph.Value) *graph.Node {
	b.T.Helper()
	n := b.Node(name, "Conv", ins...)
	n.SetAttr(ints("pads", 1, 1, 1, 1))
	return n
}

func ints(name string, vs ...int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInts, Ints: vs}
}

func intAttr(name string, v int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInt, Int: v}
}

func boolp(b bool) *bool { return &b }

// exposedSession opens model (bytes) in ORT with names exposed as outputs
// after the model's own; it returns the model as parsed, the session and
// its outputs. The caller closes the session.
func exposedSession(t testing.TB, model []byte, names []string, opts ort.Options) (*graph.Model, *ort.Session, []ort.IO) {
	t.Helper()
	ortenv.Require(t)
	m, err := graph.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := graph.ExposeValues(m, names); err != nil {
		t.Fatal(err)
	}
	ins, outs := ort.Interface(m)
	s, err := ort.NewSession(ort.Source{Bytes: testgraph.Marshal(t, m), Inputs: ins, Outputs: outs}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, s, outs
}

// measure runs model (bytes) in ORT at level disable on src's batches with
// names exposed and returns each value's [min, max].
func measure(t testing.TB, model []byte, spec string, opts data.Options, names []string) map[string][2]float64 {
	t.Helper()
	m, s, outs := exposedSession(t, model, names, ort.Options{})
	defer s.Close()
	src, err := data.Open(spec, data.GraphInputs(m.Graph), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r := map[string][2]float64{}
	for {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(batch.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			vals, err := res[i].Float32s()
			if err != nil {
				t.Fatal(err)
			}
			mm, ok := r[o.Name]
			if !ok {
				mm = [2]float64{math.Inf(1), math.Inf(-1)}
			}
			for _, v := range vals {
				mm[0], mm[1] = math.Min(mm[0], float64(v)), math.Max(mm[1], float64(v))
			}
			r[o.Name] = mm
		}
	}
	return r
}

// floatValueNames lists the main graph's float activations: inputs and
// node outputs (everything a calibrator would measure).
func activationNames(m *graph.Model) []string {
	var names []string
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			names = append(names, v.Name)
		}
	}
	for _, n := range m.Graph.Nodes {
		for _, o := range n.Outputs() {
			if o != nil && n.OpType != "Constant" && n.OpType != "Shape" {
				names = append(names, o.Name)
			}
		}
	}
	return names
}

// dqOf returns the DequantizeLinear that computes v, or fails.
func dqOf(t testing.TB, v *graph.Value) *graph.Node {
	t.Helper()
	if v == nil || v.Producer() == nil || v.Producer().OpType != "DequantizeLinear" {
		t.Fatalf("%v is not computed by a DequantizeLinear", v)
	}
	return v.Producer()
}

func f32s(t testing.TB, v *graph.Value) []float32 {
	t.Helper()
	f, err := v.Const.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ints8/uint8s/int32s decode an initializer of that type.
func constBytes(t testing.TB, v *graph.Value, dt graph.DataType) []byte {
	t.Helper()
	if v.Const == nil || v.Const.DType != dt {
		t.Fatalf("%q: want a %s initializer, got %+v", v.Name, dt, v.Const)
	}
	b, err := v.Const.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func int32s(t testing.TB, v *graph.Value) []int32 {
	b := constBytes(t, v, graph.Int32)
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func int8s(t testing.TB, v *graph.Value) []int8 {
	b := constBytes(t, v, graph.Int8)
	out := make([]int8, len(b))
	for i, x := range b {
		out[i] = int8(x)
	}
	return out
}

func countOps(g *graph.Graph, op string) int {
	c := 0
	for _, n := range g.Nodes {
		if n.OpType == op {
			c++
		}
	}
	return c
}

// saturatingCPU reports whether ORT's U8S8 integer kernels saturate with
// full-range int8 weights here (x86 without AVX-512 VNNI or AVX-VNNI).
func saturatingCPU() bool {
	rr, _ := autoReduceRange()
	return rr
}
