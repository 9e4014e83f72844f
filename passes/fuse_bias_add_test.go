package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestFuseBiasAdd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(f *fusionFixture) *graph.Value // the Add's output
	}{
		{"conv + [M,1,1]", func(f *fusionFixture) *graph.Value {
			y := f.op("Conv", f.input("x", 2, 3, 5, 5), f.weight("w", 4, 3, 3, 3))
			return f.op("Add", y, f.init("k", []int64{4, 1, 1}, f.random(4, -1, 1)))
		}},
		{"[1,M,1,1] + conv with bias", func(f *fusionFixture) *graph.Value {
			y := f.op("Conv", f.input("x", 2, 3, 5, 5), f.weight("w", 4, 3, 3, 3), f.weight("b", 4))
			return f.op("Add", f.init("k", []int64{1, 4, 1, 1}, f.random(4, -1, 1)), y)
		}},
		{"conv transpose + [M,1,1], k in a Constant node", func(f *fusionFixture) *graph.Value {
			n := f.node("ConvTranspose", []*graph.Value{f.input("x", 1, 3, 4, 4), f.weight("w", 3, 5, 2, 2)})
			y := f.attrInts(n, "strides", 2, 2).Output(0)
			return f.op("Add", y, f.constant("k", []int64{5, 1, 1}, f.random(5, -1, 1)))
		}},
		{"conv + scalar", func(f *fusionFixture) *graph.Value {
			y := f.op("Conv", f.input("x", 2, 3, 5, 5), f.weight("w", 4, 3, 3, 3))
			return f.op("Add", y, f.init("k", []int64{1}, []float32{0.25}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, 13)
			y := tc.build(f)
			f.output(y)
			f.fuses(fuseBiasAdd, Context{}, Stats{Removed: 1, Rewritten: 1}, -1, 1)
			if f.ops()["Add"] != 0 || f.Graph.Outputs[0] != y {
				t.Errorf("ops %v; output %q", f.ops(), f.Graph.Outputs[0].Name)
			}
		})
	}
}

func TestFuseBiasAddRefuses(t *testing.T) {
	conv := func(f *fusionFixture) *graph.Value {
		return f.op("Conv", f.input("x", 1, 3, 4, 4), f.weight("w", 4, 3, 3, 3))
	}
	for _, tc := range []struct {
		name  string
		build func(f *fusionFixture)
	}{
		{"spatial constant", func(f *fusionFixture) {
			f.output(f.op("Add", conv(f), f.init("k", []int64{1, 1, 2, 2}, f.random(4, -1, 1))))
		}},
		{"constant adds a dimension", func(f *fusionFixture) {
			f.output(f.op("Add", conv(f), f.init("k", []int64{1, 1, 4, 1, 1}, f.random(4, -1, 1))))
		}},
		{"non-constant operand", func(f *fusionFixture) {
			f.output(f.op("Add", conv(f), f.input("z", 1, 4, 2, 2)))
		}},
		{"conv output read twice", func(f *fusionFixture) {
			y := conv(f)
			f.output(f.op("Add", y, f.init("k", []int64{4, 1, 1}, f.random(4, -1, 1))))
			f.output(f.op("Relu", y))
		}},
		{"conv output is a graph output", func(f *fusionFixture) {
			y := conv(f)
			f.output(y)
			f.output(f.op("Add", y, f.init("k", []int64{4, 1, 1}, f.random(4, -1, 1))))
		}},
		{"bias not constant", func(f *fusionFixture) {
			y := f.op("Conv", f.input("x", 1, 3, 4, 4), f.weight("w", 4, 3, 3, 3), f.input("b", 4))
			f.output(f.op("Add", y, f.init("k", []int64{4, 1, 1}, f.random(4, -1, 1))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, 13)
			tc.build(f)
			f.refuses(fuseBiasAdd, Context{})
		})
	}
}
