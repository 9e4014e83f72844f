package passes

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// mobileBlock builds a MobileNetV3-style net of odd channel counts: a
// stem conv with HardSwish, a depthwise conv, squeeze-excite, a
// projection with a residual Add, and readers the padding cannot pass
// (a grouped conv, a Flatten, graph outputs).
func mobileBlock(f *fusionFixture) {
	x := f.input("x", 2, 3, 12, 12)
	stem := f.node("Conv", []*graph.Value{x, f.weight("stem_w", 8, 3, 3, 3), f.weight("stem_b", 8)})
	f.attrInts(stem, "pads", 1, 1, 1, 1)
	c := stem.Output(0)
	h := f.op("Mul", c, f.op("HardSigmoid", c)) // HardSwish
	dw := f.attrInt(f.node("Conv", []*graph.Value{h, f.weight("dw_w", 8, 1, 3, 3), f.weight("dw_b", 8)}), "group", 8)
	f.attrInts(dw, "pads", 1, 1, 1, 1)
	d := f.op("Relu", dw.Output(0))
	// squeeze-excite
	s := f.op("GlobalAveragePool", d)
	s = f.op("Relu", f.op("Conv", s, f.weight("se1_w", 2, 8, 1, 1), f.weight("se1_b", 2)))
	s = f.op("HardSigmoid", f.op("Conv", s, f.weight("se2_w", 8, 2, 1, 1), f.weight("se2_b", 8)))
	e := f.op("Mul", d, s)
	// projection to 24 and a residual of 24 from the stem
	p := f.op("Conv", e, f.weight("proj_w", 24, 8, 1, 1))
	r := f.op("Conv", h, f.weight("res_w", 24, 8, 1, 1), f.weight("res_b", 24))
	sum := f.op("Add", p, r)
	sum = f.op("Sub", sum, f.init("half", []int64{1}, []float32{0.5}))
	lo, hi := f.init("lo", nil, []float32{-1}), f.init("hi", nil, []float32{4})
	sum = f.op("Clip", sum, lo, hi)
	pool := f.attrInts(f.node("MaxPool", []*graph.Value{sum}), "kernel_shape", 2, 2)
	// readers that take the real channels: a grouped conv, a Flatten
	grouped := f.attrInt(f.node("Conv", []*graph.Value{pool.Output(0), f.weight("grp_w", 8, 12, 1, 1)}), "group", 2)
	f.output(f.op("Flatten", f.op("GlobalAveragePool", grouped.Output(0))))
	f.output(f.op("Relu", pool.Output(0))) // a padded value returned: sliced
	f.output(f.op("Conv", d, f.weight("out_w", 10, 8, 1, 1)))
}

func TestPadConvChannels(t *testing.T) {
	for _, opset := range []int64{9, 13} {
		t.Run(fmt.Sprintf("opset %d", opset), func(t *testing.T) {
			f := newFusionFixture(t, opset)
			mobileBlock(f)
			if opset < 11 {
				// Clip's bounds are attributes before opset 11
				for _, n := range f.Graph.Nodes {
					if n.OpType == "Clip" {
						n.TruncateInputs(1)
						f.attrFloat(f.attrFloat(n, "min", -1), "max", 4)
					}
				}
			}
			// Padded: stem (8->16), dw (8->16), se1 (in 8->16, out 2->16),
			// se2 (in 2->16, out 8->16), proj (in 8->16, out 24->32), res
			// (in 8->16, out 24->32), out_w (in 8->16; returned, so its
			// output stays 10); the grouped conv and the Relu returned
			// read one Slice of the pool.
			f.fusesInORT(padConvChannels, Context{ChannelBlock: 16}, Stats{Rewritten: 7, Added: 1}, -1, 1)
			for _, n := range f.Graph.Nodes {
				if n.OpType != "Conv" {
					continue
				}
				w := n.Input(1).ConstantTensor()
				if n.AttrInt("group", 1) == 2 {
					if w.Dims[1] != 12 {
						t.Errorf("grouped conv weight %v, want its input channels unchanged", w.Dims)
					}
					continue
				}
				if w.Dims[1] > 3 && w.Dims[1]%16 != 0 && n.AttrInt("group", 1) == 1 {
					t.Errorf("conv %s reads %d channels", n.Name, w.Dims[1])
				}
			}
			f.refuses(padConvChannels, Context{ChannelBlock: 0})
		})
	}
}

// A conv whose channels are a multiple of the block already, and a
// one-channel conv broadcast against a wider tensor, are left alone.
func TestPadConvChannelsLeavesAligned(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 1, 16, 4, 4)
	a := f.op("Conv", x, f.weight("a", 16, 16, 1, 1))
	gate := f.op("Sigmoid", f.op("Conv", x, f.weight("g", 1, 16, 1, 1))) // 1 channel, padded
	f.output(f.op("Mul", a, gate))                                       // 16 * 1: the gate is sliced back
	f.fusesInORT(padConvChannels, Context{ChannelBlock: 16}, Stats{Rewritten: 1, Added: 1}, -1, 1)
	if n := f.ops()["Slice"]; n != 1 {
		t.Errorf("%d Slices, want 1 (the gate's)", n)
	}
}
