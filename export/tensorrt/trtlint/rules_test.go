package trtlint

import (
	"math"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/lint"
	"github.com/optc-dev/optc/tools/testgraph"
)

// builder makes small models node by node, with the Q/DQ helpers the
// TensorRT rules are about.
type builder struct{ *testgraph.Builder }

func newBuilder(t *testing.T, opset int64) *builder {
	return &builder{testgraph.New(t, "lint", opset)}
}

// qdq quantizes and dequantizes x with one scale and zero point of type zp
// holding zpVal; it returns the DequantizeLinear.
func (b *builder) qdq(name string, x *graph.Value, scale float32, zp graph.DataType, zpVal byte) *graph.Node {
	s := b.Floats(name+"_scale", nil, scale)
	z := b.Init(name+"_zp", zp, nil, []byte{zpVal})
	q := b.Node(name+"_q", "QuantizeLinear", x, s, z)
	return b.Node(name+"_dq", "DequantizeLinear", q.Output(0), s, z)
}

// quantizedX adds the float input x of shape dims and its int8 Q/DQ
// (scale 0.02, zero point 0); it returns the DequantizeLinear's output.
func (b *builder) quantizedX(dims ...int64) *graph.Value {
	return b.qdq("x", b.Input("x", dims...), 0.02, graph.Int8, 0).Output(0)
}

// qThenDQ is x -> QuantizeLinear "q" with scale qScale -> DequantizeLinear
// "dq" with scale dqScale, both with the zero point zp, or none when zp is
// nil; it returns the DequantizeLinear.
func (b *builder) qThenDQ(x, qScale, dqScale, zp *graph.Value) *graph.Node {
	withZP := func(ins ...*graph.Value) []*graph.Value {
		if zp != nil {
			ins = append(ins, zp)
		}
		return ins
	}
	q := b.Node("q", "QuantizeLinear", withZP(x, qScale)...)
	return b.Node("dq", "DequantizeLinear", withZP(q.Output(0), dqScale)...)
}

// returning makes n's output the graph's only output and returns the
// model.
func (b *builder) returning(n *graph.Node) *graph.Model {
	b.Graph.Outputs = []*graph.Value{n.Output(0)}
	return b.Model
}

// weightDQ is a constant int8 weight of shape dims with per-channel
// scales along axis (one scale when axis < 0) and its DequantizeLinear.
func (b *builder) weightDQ(name string, axis int64, dims ...int64) *graph.Node {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	w := b.Init(name+"_int8", graph.Int8, dims, make([]byte, n))
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
	s := b.Floats(name+"_scale", sdims, scales...)
	z := b.Init(name+"_zp", graph.Int8, sdims, make([]byte, count))
	dq := b.Node(name+"_dq", "DequantizeLinear", w, s, z)
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
	in := b.quantizedX(1, 3, 8, 8)
	w := b.weightDQ("w", 0, 4, 3, 3, 3)
	conv := b.Node("conv", "Conv", in, w.Output(0), b.Floats("bias", []int64{4}, 0, 0, 0, 0))
	b.returning(b.Node("relu", "Relu", conv.Output(0)))
	return b, conv
}

// trtConvAlone is trtConv without its Relu and graph outputs: a conv
// output no one reads yet, ready for the Add a test puts after it.
func trtConvAlone(t *testing.T) (*builder, *graph.Node) {
	b, conv := trtConv(t)
	relu := b.Graph.Outputs[0].Producer()
	b.Graph.Outputs = nil
	if err := b.Graph.RemoveNode(relu); err != nil {
		t.Fatal(err)
	}
	return b, conv
}

// qdqOnX builds, at opset, the input x [1, 4] through qdq("x") with scale
// 0.02 and a zero point of type zp holding zpVal, as the graph's output:
// the model a rule on Q/DQ types and zero points sees.
func qdqOnX(opset int64, zp graph.DataType, zpVal byte) func(*testing.T) *graph.Model {
	return func(t *testing.T) *graph.Model {
		b := newBuilder(t, opset)
		return b.returning(b.qdq("x", b.Input("x", 1, 4), 0.02, zp, zpVal))
	}
}

// weightedOp builds quantizedX(xDims...) -> op (node name) with the weight
// weightDQ("w", axis, wDims...): the model a rule on weight scales sees.
func weightedOp(name, op string, xDims, wDims []int64, axis int64) func(*testing.T) *graph.Model {
	return func(t *testing.T) *graph.Model {
		b := newBuilder(t, 13)
		return b.returning(b.Node(name, op, b.quantizedX(xDims...), b.weightDQ("w", axis, wDims...).Output(0)))
	}
}

// trtBlock is trtConv without its Relu, then Q/DQ "r" on the conv's output
// and a second Conv, conv2, reading r: a residual block short of its Add.
// The graph has no outputs yet.
func trtBlock(t *testing.T) (b *builder, conv1, r, conv2 *graph.Node) {
	b, conv1 = trtConv(t)
	relu := b.Graph.Outputs[0].Producer()
	b.Graph.Outputs = nil
	if err := b.Graph.RemoveNode(relu); err != nil {
		t.Fatal(err)
	}
	r = b.qdq("r", conv1.Output(0), 0.1, graph.Int8, 0)
	conv2 = b.Node("conv2", "Conv", r.Output(0), b.weightDQ("w2", 0, 4, 4, 1, 1).Output(0))
	return b, conv1, r, conv2
}

// rules returns "rule severity node" for each finding.
func rules(fs []lint.Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Rule+" "+f.Severity+" "+f.Node)
	}
	return strings.Join(s, "; ")
}

func TestTensorRTClean(t *testing.T) {
	b, _ := trtConv(t)
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if fs := Check(b.Model); len(fs) != 0 {
		t.Errorf("findings on a clean model: %+v", fs)
	}
	// A float model: no Q/DQ, nothing to say about placements.
	f := newBuilder(t, 13)
	x := f.Input("x", 1, 3, 8, 8)
	m := f.returning(f.Node("conv", "Conv", x, f.Floats("w", []int64{1, 3, 1, 1}, 1, 1, 1)))
	if fs := Check(m); len(fs) != 0 {
		t.Errorf("findings on a float model: %+v", fs)
	}
}

func TestTensorRTRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T) *graph.Model
		want  string // rules(Check(m))
	}{
		{"uint8 activation with a zero point", qdqOnX(13, graph.Uint8, 128), "qdq-type error x_dq; qdq-type error x_q; qdq-zero-point error x_dq; qdq-zero-point error x_q"},
		{"uint8 by default, without a zero point", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x, s := b.Input("x", 1, 4), b.Floats("s", nil, 0.5)
			return b.returning(b.qThenDQ(x, s, s, nil))
		}, "qdq-type error dq; qdq-type error q"},
		{"int8 zero point not 0", qdqOnX(13, graph.Int8, 3), "qdq-zero-point error x_dq; qdq-zero-point error x_q"},
		{"float8 is fine", qdqOnX(19, graph.Float8E4M3FN, 0), ""},
		{"zero and NaN scales", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			d := b.qdq("x", b.Input("x", 1, 4), 0, graph.Int8, 0)
			return b.returning(b.qdq("y", d.Output(0), float32(math.NaN()), graph.Int8, 0))
		}, "qdq-scale error x_dq; qdq-scale error x_q; qdq-scale error y_dq; qdq-scale error y_q"},
		{"scale computed at run time", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x, s, z := b.Input("x", 1, 4), b.Input("s"), b.Init("z", graph.Int8, nil, []byte{0})
			return b.returning(b.qThenDQ(x, s, b.Floats("s2", nil, 1), z))
		}, "qdq-pair-mismatch error dq; qdq-scale error q"},
		{"Q and DQ with different scales", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x, z := b.Input("x", 1, 4), b.Init("z", graph.Int8, nil, []byte{0})
			return b.returning(b.qThenDQ(x, b.Floats("s1", nil, 0.5), b.Floats("s2", nil, 0.25), z))
		}, "qdq-pair-mismatch error dq"},
		{"Q and DQ with equal scales in two initializers", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x, z := b.Input("x", 1, 4), b.Init("z", graph.Int8, nil, []byte{0})
			return b.returning(b.qThenDQ(x, b.Floats("s1", nil, 0.5), b.Floats("s2", nil, 0.5), z))
		}, ""},
		{"per-channel activation", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.Input("x", 1, 2)
			s, z := b.Floats("s", []int64{2}, 0.5, 0.25), b.Init("z", graph.Int8, []int64{2}, []byte{0, 0})
			return b.returning(b.qThenDQ(x, s, s, z))
		}, "qdq-per-channel-activation error dq; qdq-per-channel-activation error q"},
		{"per-channel weight below opset 13", func(t *testing.T) *graph.Model {
			b, _ := trtConv(t)
			b.Model.Opsets[0].Version = 11
			return b.Model
		}, "qdq-opset error w_dq"},
		{"Conv weight scales along axis 1", weightedOp("conv", "Conv", []int64{1, 3, 8, 8}, []int64{4, 3, 3, 3}, 1), "qdq-axis error w_dq"},
		{"ConvTranspose weight scales along axis 1", weightedOp("deconv", "ConvTranspose", []int64{1, 3, 8, 8}, []int64{3, 4, 3, 3}, 1), ""},
		{"ConvTranspose weight scales along axis 0", weightedOp("deconv", "ConvTranspose", []int64{1, 3, 8, 8}, []int64{3, 4, 3, 3}, 0), "qdq-axis error w_dq"},
		{"MatMul weight [K, N] along N (axis -1)", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			in := b.quantizedX(2, 6)
			w := b.weightDQ("w", 1, 6, 5)
			w.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: -1})
			return b.returning(b.Node("mm", "MatMul", in, w.Output(0)))
		}, ""},
		{"MatMul weight [K, N] along K", weightedOp("mm", "MatMul", []int64{2, 6}, []int64{6, 5}, 0), "qdq-axis error w_dq"},
		{"Conv with a float weight", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			return b.returning(b.Node("conv", "Conv", b.quantizedX(1, 3, 8, 8), b.Floats("w", []int64{1, 3, 1, 1}, 1, 1, 1)))
		}, "weighted-op-float-input warning conv"},
		{"Conv kept float on purpose by optc", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			conv := b.Node("conv", "Conv", b.quantizedX(1, 3, 8, 8), b.Floats("w", []int64{1, 3, 1, 1}, 1, 1, 1))
			conv.SetMeta("optc.kept_float", "fell back for accuracy")
			return b.returning(conv)
		}, ""},
		{"Q between Conv and Relu", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			relu := b.Graph.Outputs[0].Producer()
			d := b.qdq("c", conv.Output(0), 0.1, graph.Int8, 0)
			relu.SetInput(0, d.Output(0))
			return b.Model
		}, "q-before-activation warning c_q"},
		{"Q after Relu", func(t *testing.T) *graph.Model {
			b, _ := trtConv(t)
			return b.returning(b.qdq("r", b.Graph.Outputs[0], 0.1, graph.Int8, 0))
		}, ""},
		{"residual Add without Q/DQ", func(t *testing.T) *graph.Model {
			b, conv := trtConvAlone(t)
			skip := b.Input("skip", 1, 4, 6, 6)
			return b.returning(b.Node("add", "Add", conv.Output(0), skip))
		}, "residual-add-unquantized warning add"},
		{"Add on a conv output that other layers read too: no fusion to miss", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			skip := b.Input("skip", 1, 4, 6, 6)
			add := b.Node("add", "Add", conv.Output(0), skip)
			b.Graph.Outputs = append(b.Graph.Outputs, add.Output(0))
			return b.Model
		}, ""},
		{"residual Add with Q/DQ", func(t *testing.T) *graph.Model {
			b, conv := trtConv(t)
			skip := b.qdq("skip", b.Input("skip", 1, 4, 6, 6), 0.1, graph.Int8, 0)
			return b.returning(b.Node("add", "Add", skip.Output(0), conv.Output(0)))
		}, ""},
		{"block: Q/DQ on the residual, the Add fuses into the last conv", func(t *testing.T) *graph.Model {
			b, _, r, conv2 := trtBlock(t)
			return b.returning(b.Node("add", "Add", r.Output(0), conv2.Output(0)))
		}, ""},
		{"block: Q/DQ between the last conv and the Add", func(t *testing.T) *graph.Model {
			b, conv1, _, conv2 := trtBlock(t)
			c := b.qdq("c", conv2.Output(0), 0.1, graph.Int8, 0)
			return b.returning(b.Node("add", "Add", conv1.Output(0), c.Output(0)))
		}, "q-before-activation warning c_q"},
		{"omitted inputs are not a panic", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.Input("x", 1, 4)
			q := b.Node("q", "QuantizeLinear", nil, nil)
			dq := b.Node("dq", "DequantizeLinear", q.Output(0))
			conv := b.Node("conv", "Conv", nil, dq.Output(0))
			add := b.Node("add", "Add", conv.Output(0), x)
			return b.returning(add)
		}, "qdq-scale error dq; qdq-type error dq"},
		{"ops TensorRT does not import", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			b.Model.Opsets = append(b.Model.Opsets, graph.OpsetImport{Domain: "com.microsoft", Version: 1}, graph.OpsetImport{Domain: "trt.plugins", Version: 1})
			x := b.Input("x", 1, 4)
			g := b.Node("gelu", "Gelu", x)
			g.Domain = "com.microsoft"
			p := b.Node("plugin", "MyPlugin", g.Output(0))
			p.Domain = "trt.plugins"
			seq := b.Node("", "SplitToSequence", p.Output(0))
			return b.returning(seq)
		}, "unsupported-op error SplitToSequence -> _out; unsupported-op error gelu"},
		{"sequence and string values", func(t *testing.T) *graph.Model {
			b := newBuilder(t, 13)
			x := b.Input("x", 1, 4)
			x.Type = graph.TensorType(graph.String, graph.StaticShape(1, 4))
			id := b.Node("id", "Identity", x)
			id.Output(0).Type = &graph.Type{Kind: graph.KindSequence}
			return b.returning(id)
		}, "unsupported-type error ; unsupported-type error id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := Check(c.build(t))
			if got := rules(fs); got != c.want {
				t.Errorf("findings\n  %s\nwant\n  %s\n%+v", got, c.want, fs)
			}
			for _, f := range fs {
				if f.Message == "" || (f.Severity != lint.Error && f.Severity != lint.Warning) {
					t.Errorf("finding %+v: no message or an unknown severity", f)
				}
			}
		})
	}
}

// TestTensorRTSorted: errors first, then by rule and node, whatever the
// order of the nodes.
func TestTensorRTSorted(t *testing.T) {
	b, conv := trtConvAlone(t)
	skip := b.Input("skip", 1, 4, 6, 6)
	add := b.Node("add", "Add", conv.Output(0), skip)
	u := b.qdq("u", add.Output(0), 0.1, graph.Uint8, 7)
	fs := Check(b.returning(u))
	want := "qdq-type error u_dq; qdq-type error u_q; qdq-zero-point error u_dq; qdq-zero-point error u_q; residual-add-unquantized warning add"
	if got := rules(fs); got != want {
		t.Errorf("findings\n  %s\nwant\n  %s", got, want)
	}
	if lint.Errors(fs) != 4 {
		t.Errorf("Errors = %d, want 4", lint.Errors(fs))
	}
}
