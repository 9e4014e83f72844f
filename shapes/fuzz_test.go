package shapes

// This file is in package shapes (not shapes_test) so that the fuzzer can
// pick its ops from the rule tables.

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// FuzzRules builds one node of a random op with random inputs (shapes
// with static, symbolic and unknown dims, integer and float constants,
// omitted inputs) and attributes, at a random opset, and infers it:
// whatever the node says, inference must not panic, and what it infers
// must be a tensor type that says something.
func FuzzRules(f *testing.F) {
	for _, seed := range []string{"", "\x00\x01\x02", "conv\x04\x01\x03\x02\x02", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8"} {
		f.Add([]byte(seed))
	}
	var ops []string
	for op := range rules {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data: data}
		m, n := fuzzNode(t, r, ops)
		res, err := Infer(m)
		if err != nil {
			t.Fatal(err)
		}
		if res.Counts.Values != len(n.Outputs()) {
			t.Errorf("counts %+v for %d outputs", res.Counts, len(n.Outputs()))
		}
		for _, v := range n.Outputs() {
			if ty := res.Types.Get(v); ty != nil && (ty.Kind != graph.KindTensor || ty.Elem == graph.Undefined && ty.Shape == nil) {
				t.Errorf("%s: output %q has the type %s", n.OpType, v.Name, ty)
			}
		}
	})
}

type fuzzReader struct {
	data []byte
	at   int
}

func (r *fuzzReader) next(n int) int {
	if n <= 0 {
		return 0
	}
	if r.at >= len(r.data) {
		return 0
	}
	b := r.data[r.at]
	r.at++
	return int(b) % n
}

var fuzzInts = []int64{0, 1, 2, 3, -1, -2, 4, 5, 7, 8, 16, math.MaxInt64, math.MinInt64, math.MaxInt32, -100, 100}

func fuzzNode(t *testing.T, r *fuzzReader, ops []string) (*graph.Model, *graph.Node) {
	g := graph.NewGraph("fuzz")
	opset := []int64{1, 4, 6, 9, 10, 11, 13, 15, 17, 18, 21}[r.next(11)]
	m := &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: opset}}, Graph: g}
	op := ops[r.next(len(ops))]
	count := 0
	newValue := func() *graph.Value {
		count++
		v, err := g.NewValue("v" + strconv.Itoa(count))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var ins []*graph.Value
	// addInitializer takes a constant input as its constructor returns it.
	addInitializer := func(tn *graph.Tensor, err error) {
		if err != nil {
			t.Fatal(err)
		}
		count++
		v, err := g.AddInitializer(tn)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, v)
	}
	elems := []graph.DataType{graph.Float, graph.Int64, graph.Bool, graph.Int32, graph.Uint8, graph.Float16, graph.Undefined}
	for range 1 + r.next(8) {
		switch r.next(5) {
		case 0, 1:
			v := newValue()
			var shape graph.Shape
			if rank := r.next(7); rank < 6 {
				shape = graph.Shape{}
				for range rank {
					switch r.next(4) {
					case 0:
						shape = append(shape, graph.Dim{})
					case 1:
						shape = append(shape, graph.SymbolicDim([]string{"N", "M"}[r.next(2)]))
					default:
						shape = append(shape, graph.StaticDim(int64(r.next(7))))
					}
				}
			}
			v.Type = graph.TensorType(elems[r.next(len(elems))], shape)
			g.Inputs = append(g.Inputs, v)
			ins = append(ins, v)
		case 2:
			vals := make([]int64, r.next(6))
			for i := range vals {
				vals[i] = fuzzInts[r.next(len(fuzzInts))]
			}
			dims := []int64{int64(len(vals))}
			if len(vals) == 1 && r.next(2) == 0 {
				dims = nil
			}
			addInitializer(graph.NewInt64Tensor("c"+strconv.Itoa(count), dims, vals))
		case 3:
			vals := make([]float32, r.next(6))
			for i := range vals {
				vals[i] = []float32{0, 0.5, 1, 2, -1, float32(math.NaN()), float32(math.Inf(1)), 1e30}[r.next(8)]
			}
			addInitializer(graph.NewFloat32Tensor("f"+strconv.Itoa(count), []int64{int64(len(vals))}, vals))
		default:
			ins = append(ins, nil)
		}
	}
	names := []string{"axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group", "keepdims",
		"split", "starts", "ends", "shape", "output_shape", "output_padding", "to", "transA", "transB", "blocksize",
		"ceil_mode", "k", "batch_dims", "num_outputs", "allowzero", "start", "end", "noop_with_empty_axes", "layout", "hidden_size"}
	var attrs []*graph.Attr
	for range r.next(5) {
		a := &graph.Attr{Name: names[r.next(len(names))]}
		if r.next(2) == 0 {
			a.Type, a.Int = graph.AttrInt, fuzzInts[r.next(len(fuzzInts))]
		} else {
			a.Type = graph.AttrInts
			for range r.next(6) {
				a.Ints = append(a.Ints, fuzzInts[r.next(len(fuzzInts))])
			}
		}
		attrs = append(attrs, a)
	}
	switch r.next(4) {
	case 1:
		attrs = append(attrs, &graph.Attr{Name: "auto_pad", Type: graph.AttrString, String: []byte([]string{"SAME_UPPER", "SAME_LOWER", "VALID"}[r.next(3)])})
	case 2:
		attrs = append(attrs, &graph.Attr{Name: "scales", Type: graph.AttrFloats, Floats: []float32{1, 2, 0.5, -1}[:r.next(5)]})
	}
	outs := make([]*graph.Value, 1+r.next(3))
	for i := range outs {
		outs[i] = newValue()
	}
	n, err := g.AddNode(op, ins, outs)
	if err != nil {
		t.Fatal(err)
	}
	n.Attrs = attrs
	g.Outputs = outs
	return m, n
}
