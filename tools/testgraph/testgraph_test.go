package testgraph

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestBuilder(t *testing.T) {
	b := New(t, "tiny", 13)
	x := b.Input("x", 1, 4)
	r := b.Node("relu", "Relu", x)
	y := b.TypedValue("y", graph.Float, 1, 4)
	add := b.NodeTo("add", "Add", y, r.Output(0), b.Floats("one", []int64{1}, 1))
	b.Graph.Outputs = append(b.Graph.Outputs, y)
	shape := b.Int64s("shape", []int64{2}, 4, 1)
	rs := b.Node("reshape", "Reshape", add.Output(0), shape)
	b.Output(rs.Output(0), 4, 1)
	zp := b.Init("zp", graph.Int8, nil, []byte{3})
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if b.Model.Graph != b.Graph || b.Model.Opsets[0].Version != 13 || b.Graph.Name != "tiny" {
		t.Errorf("model %+v", b.Model)
	}
	if r.Name != "relu" || r.OpType != "Relu" || r.Output(0).Name != "relu_out" || r.Output(0).Type != nil {
		t.Errorf("relu node %s writes %q typed %v", r, r.Output(0).Name, r.Output(0).Type)
	}
	if add.Output(0) != y || add.Input(1).Name != "one" {
		t.Errorf("add node %s", add)
	}
	for v, want := range map[*graph.Value]string{x: "float32[1,4]", y: "float32[1,4]", rs.Output(0): "float32[4,1]"} {
		if got := v.Type.String(); got != want {
			t.Errorf("%s declared %s, want %s", v.Name, got, want)
		}
	}
	if len(b.Graph.Inputs) != 1 || len(b.Graph.Outputs) != 2 || b.Graph.Outputs[1] != rs.Output(0) {
		t.Errorf("inputs %v, outputs %v", b.Graph.Inputs, b.Graph.Outputs)
	}
	if vals, err := shape.Const.Int64s(); err != nil || len(vals) != 2 || vals[0] != 4 {
		t.Errorf("shape %v (%v)", vals, err)
	}
	if data, err := zp.Const.Bytes(); err != nil || zp.Const.DType != graph.Int8 || len(data) != 1 || data[0] != 3 {
		t.Errorf("zero point %+v (%v)", zp.Const, err)
	}
}
