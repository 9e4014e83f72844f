package lint

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"optc/graph"
)

// builder makes small models node by node.
type builder struct {
	t *testing.T
	m *graph.Model
	g *graph.Graph
}

func newBuilder(t *testing.T, opset int64) *builder {
	g := graph.NewGraph("lint")
	return &builder{t: t, g: g, m: &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: opset}}, Graph: g}}
}

func (b *builder) value(name string) *graph.Value {
	b.t.Helper()
	v, err := b.g.NewValue(name)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *builder) input(name string, dims ...int64) *graph.Value {
	v := b.value(name)
	v.Type = graph.TensorType(graph.Float, graph.StaticShape(dims...))
	b.g.Inputs = append(b.g.Inputs, v)
	return v
}

func (b *builder) init(name string, dt graph.DataType, dims []int64, data []byte) *graph.Value {
	b.t.Helper()
	t, err := graph.NewTensor(name, dt, dims, data)
	if err != nil {
		b.t.Fatal(err)
	}
	v, err := b.g.AddInitializer(t)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *builder) floats(name string, dims []int64, vals ...float32) *graph.Value {
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return b.init(name, graph.Float, dims, data)
}

// node adds node name computing op; its output is called name+"_out".
func (b *builder) node(name, op string, ins ...*graph.Value) *graph.Node {
	b.t.Helper()
	n, err := b.g.AddNode(op, ins, []*graph.Value{b.value(name + "_out")})
	if err != nil {
		b.t.Fatal(err)
	}
	n.Name = name
	return n
}

// qdq quantizes and dequantizes x with one scale and zero point of type zp
// holding zpVal; it returns the DequantizeLinear.
func (b *builder) qdq(name string, x *graph.Value, scale float32, zp graph.DataType, zpVal byte) *graph.Node {
	s := b.floats(name+"_scale", nil, scale)
	z := b.init(name+"_zp", zp, nil, []byte{zpVal})
	q := b.node(name+"_q", "QuantizeLinear", x, s, z)
	return b.node(name+"_dq", "DequantizeLinear", q.Output(0), s, z)
}

// weightDQ is a constant int8 Conv weight [4, 3, 3, 3] with per-channel
// scales along axis (one scale when axis < 0) and its DequantizeLinear.
func (b *builder) weightDQ(name string, axis int64, dims ...int64) *graph.Node {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	w := b.init(name+"_int8", graph.Int8, dims, make([]byte, n))
	var sdims []int64
	count := int64(1)
	if axis >= 0 {
		count = dims[axis]
		sdims = []int64{count}
	}
	scales := make([]float32, count)
	for i := range scales {
		scales[i] = 0.01
	}
	s := b.floats(name+"_scale", sdims, scales...)
	z := b.init(name+"_zp", graph.Int8, sdims, make([]byte, count))
	dq := b.node(name+"_dq", "DequantizeLinear", w, s, z)
	if axis >= 0 {
		dq.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: axis})
	}
	return dq
}

// trtConv is what the tensorrt target makes of x -> Conv -> Relu:
// Q/DQ (int8, zero point 0) on the input, an int8 per-channel weight, a
// float bias.
func trtConv(t *testing.T) (*builder, *graph.Node) {
	b := newBuilder(t, 13)
	x := b.input("x", 1, 3, 8, 8)
	in := b.qdq("x", x, 0.02, graph.Int8, 0)
	w := b.weightDQ("w", 0, 4, 3, 3, 3)
	conv := b.node("conv", "Conv", in.Output(0), w.Output(0), b.floats("bias", []int64{4}, 0, 0, 0, 0))
	relu := b.node("relu", "Relu", conv.Output(0))
	b.g.Outputs = []*graph.Value{relu.Output(0)}
	return b, conv
}

// rules returns "rule severity node" for each finding.
func rules(fs []Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Rule+" "+f.Severity+" "+f.Node)
	}
	return strings.Join(s, "; ")
}

func TestTensorRTClean(t *testing.T) {
	b, _ := trtConv(t)
	if err := b.m.Verify(); err != nil {
		t.Fatal(err)
	}
	if fs := TensorRT(b.m); len(fs) != 0 {
		t.Errorf("findings on a clean model: %+v", fs)
	}
	// A float model: no Q/DQ, nothing to say about placements.
	f := newBuilder(t, 13)
	x := f.input("x", 1, 3, 8, 8)
	conv := f.node("conv", "Conv", x, f.floats("w", []int64{1, 3, 1, 1}, 1, 1, 1))
	f.g.Outputs = []*graph.Value{conv.Output(0)}
	if fs := TensorRT(f.m); len(fs) != 0 {
		t.Errorf("findings on a float model: %+v", fs)
	}
}

func TestTensorRTRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T) *graph.Model
		want  string // rules(TensorRT(m))
	}{
		{"uint8 activation with a zero point", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			b.g.Outputs = []*graph.Value{b.qdq("x", x, 0.02, graph.Uint8, 128).Output(0)}
			return b.m
		}, "qdq-type error x_dq; qdq-type error x_q; qdq-zero-point error x_dq; qdq-zero-point error x_q"},
		{"uint8 by default, without a zero point", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			s := b.floats("s", nil, 0.5)
			q := b.node("q", "QuantizeLinear", x, s)
			b.g.Outputs = []*graph.Value{b.node("dq", "DequantizeLinear", q.Output(0), s).Output(0)}
			return b.m
		}, "qdq-type error dq; qdq-type error q"},
		{"int8 zero point not 0", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			b.g.Outputs = []*graph.Value{b.qdq("x", x, 0.02, graph.Int8, 3).Output(0)}
			return b.m
		}, "qdq-zero-point error x_dq; qdq-zero-point error x_q"},
		{"float8 is fine", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 19)
			x := b.input("x", 1, 4)
			b.g.Outputs = []*graph.Value{b.qdq("x", x, 0.02, graph.Float8E4M3FN, 0).Output(0)}
			return b.m
		}, ""},
		{"zero and NaN scales", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			d := b.qdq("x", x, 0, graph.Int8, 0)
			b.g.Outputs = []*graph.Value{b.qdq("y", d.Output(0), float32(math.NaN()), graph.Int8, 0).Output(0)}
			return b.m
		}, "qdq-scale error x_dq; qdq-scale error x_q; qdq-scale error y_dq; qdq-scale error y_q"},
		{"scale computed at run time", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			s := b.input("s")
			z := b.init("z", graph.Int8, nil, []byte{0})
			q := b.node("q", "QuantizeLinear", x, s, z)
			b.g.Outputs = []*graph.Value{b.node("dq", "DequantizeLinear", q.Output(0), b.floats("s2", nil, 1), z).Output(0)}
			return b.m
		}, "qdq-pair-mismatch error dq; qdq-scale error q"},
		{"Q and DQ with different scales", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			z := b.init("z", graph.Int8, nil, []byte{0})
			q := b.node("q", "QuantizeLinear", x, b.floats("s1", nil, 0.5), z)
			b.g.Outputs = []*graph.Value{b.node("dq", "DequantizeLinear", q.Output(0), b.floats("s2", nil, 0.25), z).Output(0)}
			return b.m
		}, "qdq-pair-mismatch error dq"},
		{"Q and DQ with equal scales in two initializers", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			z := b.init("z", graph.Int8, nil, []byte{0})
			q := b.node("q", "QuantizeLinear", x, b.floats("s1", nil, 0.5), z)
			b.g.Outputs = []*graph.Value{b.node("dq", "DequantizeLinear", q.Output(0), b.floats("s2", nil, 0.5), z).Output(0)}
			return b.m
		}, ""},
		{"per-channel activation", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 2)
			s := b.floats("s", []int64{2}, 0.5, 0.25)
			z := b.init("z", graph.Int8, []int64{2}, []byte{0, 0})
			q := b.node("q", "QuantizeLinear", x, s, z)
			b.g.Outputs = []*graph.Value{b.node("dq", "DequantizeLinear", q.Output(0), s, z).Output(0)}
			return b.m
		}, "qdq-per-channel-activation error dq; qdq-per-channel-activation error q"},
		{"per-channel weight below opset 13", func(t *testing.T) *graph.Model {
			b, _ := trtConv(t)
			b.m.Opsets[0].Version = 11
			return b.m
		}, "qdq-opset error w_dq"},
		{"Conv weight scales along axis 1", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 3, 8, 8)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			conv := b.node("conv", "Conv", in.Output(0), b.weightDQ("w", 1, 4, 3, 3, 3).Output(0))
			b.g.Outputs = []*graph.Value{conv.Output(0)}
			return b.m
		}, "qdq-axis error w_dq"},
		{"ConvTranspose weight scales along axis 1", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 3, 8, 8)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			conv := b.node("deconv", "ConvTranspose", in.Output(0), b.weightDQ("w", 1, 3, 4, 3, 3).Output(0))
			b.g.Outputs = []*graph.Value{conv.Output(0)}
			return b.m
		}, ""},
		{"ConvTranspose weight scales along axis 0", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 3, 8, 8)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			conv := b.node("deconv", "ConvTranspose", in.Output(0), b.weightDQ("w", 0, 3, 4, 3, 3).Output(0))
			b.g.Outputs = []*graph.Value{conv.Output(0)}
			return b.m
		}, "qdq-axis error w_dq"},
		{"MatMul weight [K, N] along N (axis -1)", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 2, 6)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			w := b.weightDQ("w", 1, 6, 5)
			w.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: -1})
			b.g.Outputs = []*graph.Value{b.node("mm", "MatMul", in.Output(0), w.Output(0)).Output(0)}
			return b.m
		}, ""},
		{"MatMul weight [K, N] along K", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 2, 6)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			b.g.Outputs = []*graph.Value{b.node("mm", "MatMul", in.Output(0), b.weightDQ("w", 0, 6, 5).Output(0)).Output(0)}
			return b.m
		}, "qdq-axis error w_dq"},
		{"Conv with a float weight", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 3, 8, 8)
			in := b.qdq("x", x, 0.02, graph.Int8, 0)
			conv := b.node("conv", "Conv", in.Output(0), b.floats("w", []int64{1, 3, 1, 1}, 1, 1, 1))
			b.g.Outputs = []*graph.Value{conv.Output(0)}
			return b.m
		}, "weighted-op-float-input warning conv"},
		{"Q between Conv and Relu", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			relu := b.g.Outputs[0].Producer()
			d := b.qdq("c", conv.Output(0), 0.1, graph.Int8, 0)
			relu.SetInput(0, d.Output(0))
			return b.m
		}, "q-before-activation warning c_q"},
		{"Q after Relu", func(t *testing.T) *graph.Model {
			b, _ := trtConv(t)
			d := b.qdq("r", b.g.Outputs[0], 0.1, graph.Int8, 0)
			b.g.Outputs = []*graph.Value{d.Output(0)}
			return b.m
		}, ""},
		{"residual Add without Q/DQ", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			skip := b.input("skip", 1, 4, 6, 6)
			add := b.node("add", "Add", conv.Output(0), skip)
			b.g.Outputs = []*graph.Value{add.Output(0)}
			return b.m
		}, "residual-add-unquantized warning add"},
		{"residual Add with Q/DQ", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			skip := b.qdq("skip", b.input("skip", 1, 4, 6, 6), 0.1, graph.Int8, 0)
			add := b.node("add", "Add", skip.Output(0), conv.Output(0))
			b.g.Outputs = []*graph.Value{add.Output(0)}
			return b.m
		}, ""},
		{"block: Q/DQ on the residual, the Add fuses into the last conv", func(t *testing.T) *graph.Model {
			b, conv1 := trtConv(t)
			relu := b.g.Outputs[0].Producer()
			b.g.Outputs = nil
			if err := b.g.RemoveNode(relu); err != nil {
				t.Fatal(err)
			}
			r := b.qdq("r", conv1.Output(0), 0.1, graph.Int8, 0)
			conv2 := b.node("conv2", "Conv", r.Output(0), b.weightDQ("w2", 0, 4, 4, 1, 1).Output(0))
			add := b.node("add", "Add", r.Output(0), conv2.Output(0))
			b.g.Outputs = []*graph.Value{add.Output(0)}
			return b.m
		}, ""},
		{"block: Q/DQ between the last conv and the Add", func(t *testing.T) *graph.Model {
			b, conv1 := trtConv(t)
			relu := b.g.Outputs[0].Producer()
			b.g.Outputs = nil
			if err := b.g.RemoveNode(relu); err != nil {
				t.Fatal(err)
			}
			r := b.qdq("r", conv1.Output(0), 0.1, graph.Int8, 0)
			conv2 := b.node("conv2", "Conv", r.Output(0), b.weightDQ("w2", 0, 4, 4, 1, 1).Output(0))
			c := b.qdq("c", conv2.Output(0), 0.1, graph.Int8, 0)
			add := b.node("add", "Add", conv1.Output(0), c.Output(0))
			b.g.Outputs = []*graph.Value{add.Output(0)}
			return b.m
		}, "q-before-activation warning c_q"},
		{"omitted inputs are not a panic", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			q := b.node("q", "QuantizeLinear", nil, nil)
			dq := b.node("dq", "DequantizeLinear", q.Output(0))
			conv := b.node("conv", "Conv", nil, dq.Output(0))
			add := b.node("add", "Add", conv.Output(0), x)
			b.g.Outputs = []*graph.Value{add.Output(0)}
			return b.m
		}, "qdq-scale error dq; qdq-type error dq"},
		{"ops TensorRT does not import", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			b.m.Opsets = append(b.m.Opsets, graph.OpsetImport{Domain: "com.microsoft", Version: 1}, graph.OpsetImport{Domain: "trt.plugins", Version: 1})
			x := b.input("x", 1, 4)
			g := b.node("gelu", "Gelu", x)
			g.Domain = "com.microsoft"
			p := b.node("plugin", "MyPlugin", g.Output(0))
			p.Domain = "trt.plugins"
			seq := b.node("", "SplitToSequence", p.Output(0))
			b.g.Outputs = []*graph.Value{seq.Output(0)}
			return b.m
		}, "unsupported-op error SplitToSequence -> _out; unsupported-op error gelu"},
		{"sequence and string values", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.input("x", 1, 4)
			x.Type = graph.TensorType(graph.String, graph.StaticShape(1, 4))
			id := b.node("id", "Identity", x)
			id.Output(0).Type = &graph.Type{Kind: graph.KindSequence}
			b.g.Outputs = []*graph.Value{id.Output(0)}
			return b.m
		}, "unsupported-type error ; unsupported-type error id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := TensorRT(c.build(t))
			if got := rules(fs); got != c.want {
				t.Errorf("findings\n  %s\nwant\n  %s\n%+v", got, c.want, fs)
			}
			for _, f := range fs {
				if f.Message == "" || (f.Severity != Error && f.Severity != Warning) {
					t.Errorf("finding %+v: no message or an unknown severity", f)
				}
			}
		})
	}
}

// TestTensorRTSorted: errors first, then by rule and node, whatever the
// order of the nodes.
func TestTensorRTSorted(t *testing.T) {
	b, conv := trtConv(t)
	skip := b.input("skip", 1, 4, 6, 6)
	add := b.node("add", "Add", conv.Output(0), skip)
	u := b.qdq("u", add.Output(0), 0.1, graph.Uint8, 7)
	b.g.Outputs = []*graph.Value{u.Output(0)}
	fs := TensorRT(b.m)
	want := "qdq-type error u_dq; qdq-type error u_q; qdq-zero-point error u_dq; qdq-zero-point error u_q; residual-add-unquantized warning add"
	if got := rules(fs); got != want {
		t.Errorf("findings\n  %s\nwant\n  %s", got, want)
	}
	if Errors(fs) != 4 {
		t.Errorf("Errors = %d, want 4", Errors(fs))
	}
}
