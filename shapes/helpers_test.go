package shapes_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
)

// A small builder for hand-made graphs: inputs with symbolic dims,
// constant initializers, nodes with attributes, then inference.

type builder struct {
	t     *testing.T
	m     *graph.Model
	g     *graph.Graph
	nodes int
}

func newBuilder(t *testing.T, opset int64) *builder {
	g := graph.NewGraph("test")
	return &builder{t: t, g: g, m: &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Domain: "", Version: opset}}, Graph: g}}
}

// parseType reads "float32[N,3,?,224]"; "float32[*]" has an unknown rank.
func parseType(t testing.TB, s string) *graph.Type {
	t.Helper()
	i := strings.IndexByte(s, '[')
	if i < 0 || !strings.HasSuffix(s, "]") {
		t.Fatalf("bad type %q", s)
	}
	elem, err := graph.ParseDataType(s[:i])
	if err != nil {
		t.Fatal(err)
	}
	body := s[i+1 : len(s)-1]
	if body == "*" {
		return graph.TensorType(elem, nil)
	}
	shape := graph.Shape{}
	if body != "" {
		for _, d := range strings.Split(body, ",") {
			switch n, err := strconv.ParseInt(d, 10, 64); {
			case d == "?":
				shape = append(shape, graph.Dim{})
			case err == nil:
				shape = append(shape, graph.StaticDim(n))
			default:
				shape = append(shape, graph.SymbolicDim(d))
			}
		}
	}
	return graph.TensorType(elem, shape)
}

// typeString prints a type the way parseType reads it; "unknown" for nil.
func typeString(t *graph.Type) string {
	if t == nil {
		return "unknown"
	}
	if t.Shape == nil {
		return t.Elem.String() + "[*]"
	}
	return t.String()
}

func (b *builder) value(name string) *graph.Value {
	v, err := b.g.NewValue(name)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// input adds a graph input of type typ ("float32[N,3]").
func (b *builder) input(name, typ string) *graph.Value {
	v := b.value(name)
	v.Type = parseType(b.t, typ)
	b.g.Inputs = append(b.g.Inputs, v)
	return v
}

// ints adds a constant int64 initializer; a single value with scalar
// true is rank 0.
func (b *builder) ints(name string, vals ...int64) *graph.Value {
	tn, err := graph.NewInt64Tensor(name, []int64{int64(len(vals))}, vals)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.init(tn)
}

func (b *builder) scalar(name string, val int64) *graph.Value {
	tn, err := graph.NewInt64Tensor(name, []int64{}, []int64{val})
	if err != nil {
		b.t.Fatal(err)
	}
	return b.init(tn)
}

func (b *builder) floats(name string, vals ...float32) *graph.Value {
	tn, err := graph.NewFloat32Tensor(name, []int64{int64(len(vals))}, vals)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.init(tn)
}

// weights adds a float initializer of the given dims (zeros).
func (b *builder) weights(name string, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	tn, err := graph.NewFloat32Tensor(name, dims, make([]float32, n))
	if err != nil {
		b.t.Fatal(err)
	}
	return b.init(tn)
}

func (b *builder) init(tn *graph.Tensor) *graph.Value {
	v, err := b.g.AddInitializer(tn)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// op adds a node with nOut outputs (named after the node) and returns
// them; a nil input is an omitted optional one.
func (b *builder) op(typ string, nOut int, attrs []*graph.Attr, ins ...*graph.Value) []*graph.Value {
	b.nodes++
	name := typ + strconv.Itoa(b.nodes)
	outs := make([]*graph.Value, nOut)
	for i := range outs {
		outs[i] = b.value(name + "_" + strconv.Itoa(i))
	}
	n, err := b.g.AddNode(typ, ins, outs)
	if err != nil {
		b.t.Fatal(err)
	}
	n.Name = name
	n.Attrs = attrs
	return outs
}

// op1 adds a node with one output.
func (b *builder) op1(typ string, attrs []*graph.Attr, ins ...*graph.Value) *graph.Value {
	return b.op(typ, 1, attrs, ins...)[0]
}

func (b *builder) infer() *shapes.Result {
	b.t.Helper()
	if err := b.m.Verify(); err != nil {
		b.t.Fatal(err)
	}
	res, err := shapes.Infer(b.m)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// want checks the inferred types of values against types as parseType
// reads them ("unknown" for none).
func want(t *testing.T, res *shapes.Result, pairs ...any) {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		v := pairs[i].(*graph.Value)
		if got := typeString(res.Types[v]); got != pairs[i+1].(string) {
			t.Errorf("%s: got %s, want %s", v.Name, got, pairs[i+1])
		}
	}
}

func attrs(as ...*graph.Attr) []*graph.Attr { return as }

func aInt(name string, v int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInt, Int: v}
}

func aInts(name string, v ...int64) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrInts, Ints: v}
}

func aFloats(name string, v ...float32) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrFloats, Floats: v}
}

func aString(name, v string) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrString, String: []byte(v)}
}

func aTensor(name string, tn *graph.Tensor) *graph.Attr {
	return &graph.Attr{Name: name, Type: graph.AttrTensor, Tensor: tn}
}

const maxInt64 = math.MaxInt64
