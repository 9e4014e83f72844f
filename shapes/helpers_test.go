package shapes_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
	"github.com/optc-dev/optc/tools/testgraph"
)

// A small builder for hand-made graphs: inputs with symbolic dims,
// constant initializers, nodes with attributes, then inference.

type builder struct {
	*testgraph.Builder
	nodes int
}

func newBuilder(t *testing.T, opset int64) *builder {
	return &builder{Builder: testgraph.New(t, "test", opset)}
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

// input adds a graph input of type typ ("float32[N,3]").
func (b *builder) input(name, typ string) *graph.Value {
	v := b.Value(name)
	v.Type = parseType(b.T, typ)
	b.Graph.Inputs = append(b.Graph.Inputs, v)
	return v
}

// ints adds a constant int64 initializer; a single value with scalar
// true is rank 0.
func (b *builder) ints(name string, vals ...int64) *graph.Value {
	return b.Int64s(name, []int64{int64(len(vals))}, vals...)
}

func (b *builder) scalar(name string, val int64) *graph.Value {
	return b.Int64s(name, []int64{}, val)
}

func (b *builder) floats(name string, vals ...float32) *graph.Value {
	return b.Floats(name, []int64{int64(len(vals))}, vals...)
}

// weights adds a float initializer of the given dims (zeros).
func (b *builder) weights(name string, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return b.Floats(name, dims, make([]float32, n)...)
}

// op adds a node with nOut outputs (named after the node) and returns
// them; a nil input is an omitted optional one.
func (b *builder) op(typ string, nOut int, attrs []*graph.Attr, ins ...*graph.Value) []*graph.Value {
	b.nodes++
	name := typ + strconv.Itoa(b.nodes)
	outs := make([]*graph.Value, nOut)
	for i := range outs {
		outs[i] = b.Value(name + "_" + strconv.Itoa(i))
	}
	n, err := b.Graph.AddNode(typ, ins, outs)
	if err != nil {
		b.T.Fatal(err)
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
	b.T.Helper()
	if err := b.Model.Verify(); err != nil {
		b.T.Fatal(err)
	}
	res, err := shapes.Infer(b.Model)
	if err != nil {
		b.T.Fatal(err)
	}
	return res
}

// want checks the inferred types of values against types as parseType
// reads them ("unknown" for none).
func want(t *testing.T, res *shapes.Result, pairs ...any) {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		v := pairs[i].(*graph.Value)
		if got := typeString(res.Types.Get(v)); got != pairs[i+1].(string) {
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
