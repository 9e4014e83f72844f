package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestHardSigmoidConvBridge(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 2, 4, 6, 6)
	// A HardSwish of 16 channels: bridged.
	c16 := f.op("Conv", x, f.weight("w16", 16, 4, 3, 3), f.weight("b16", 16))
	h16 := f.op("Mul", c16, f.attrFloat(f.node("HardSigmoid", []*graph.Value{c16}), "alpha", 0.2).Output(0))
	// 8 channels: ORT would not take the identity conv into NCHWc at 16.
	c8 := f.op("Conv", x, f.weight("w8", 8, 4, 1, 1))
	h8 := f.op("Mul", c8, f.op("HardSigmoid", c8))
	// A HardSigmoid alone after its conv: ORT fuses it without help.
	gate := f.op("HardSigmoid", f.op("Conv", h16, f.weight("wg", 16, 16, 1, 1)))
	f.output(f.op("Mul", h16, gate))
	f.output(h8)
	f.fusesInORT(hardSigmoidConvBridge, Context{ChannelBlock: 16}, Stats{Added: 1, Rewritten: 1}, -4, 4)
	ops := f.ops()
	if ops["Conv"] != 4 || ops["HardSigmoid"] != 3 {
		t.Errorf("ops %v, want one more Conv", ops)
	}
	f.refuses(hardSigmoidConvBridge, Context{})
}

// HardSwish (opset 14) becomes x * HardSigmoid(Conv_id(x)).
func TestHardSigmoidConvBridgeHardSwish(t *testing.T) {
	f := newFusionFixture(t, 14)
	x := f.input("x", 1, 3, 5, 5)
	c := f.op("Conv", x, f.weight("w", 8, 3, 3, 3))
	f.output(f.op("HardSwish", c))
	f.fusesInORT(hardSigmoidConvBridge, Context{ChannelBlock: 8}, Stats{Added: 3, Removed: 1}, -4, 4)
	ops := f.ops()
	if ops["HardSwish"] != 0 || ops["HardSigmoid"] != 1 || ops["Mul"] != 1 || ops["Conv"] != 2 {
		t.Errorf("ops %v, want Conv, Conv, HardSigmoid, Mul", ops)
	}
}
