package passes

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// hardSwishSpelling says how a test writes x * Clip(x + 3, 0, 6) / 6.
type hardSwishSpelling struct {
	swapAdd, swapMul bool // Add(3, x); Mul(clip, x)
	sixth            bool // Mul by 1/6 instead of Div by 6
	sixthFirst       bool // Mul(1/6, prod)
	constNodes       bool // constants in Constant nodes
	three, six, hi   float32
}

// hardSwish writes the pattern over x and returns its nodes: Add, Clip,
// Mul, and the last one.
func (f *fusionFixture) hardSwish(x *graph.Value, s hardSwishSpelling) []*graph.Node {
	opset := f.Model.OpsetVersion("")
	scalar := func(name string, v float32) *graph.Value {
		if s.constNodes {
			return f.constant(name, []int64{1}, []float32{v})
		}
		return f.init(name, []int64{1}, []float32{v})
	}
	if s.three == 0 {
		s.three, s.six, s.hi = 3, 6, 6
	}
	addIns := []*graph.Value{x, scalar("three", s.three)}
	if s.swapAdd {
		addIns[0], addIns[1] = addIns[1], addIns[0]
	}
	add := f.node("Add", addIns)
	var clip *graph.Node
	if opset < 11 {
		clip = f.attrFloat(f.attrFloat(f.node("Clip", []*graph.Value{add.Output(0)}), "min", 0), "max", s.hi)
	} else {
		clip = f.node("Clip", []*graph.Value{add.Output(0), scalar("lo", 0), scalar("hi", s.hi)})
	}
	mulIns := []*graph.Value{x, clip.Output(0)}
	if s.swapMul {
		mulIns[0], mulIns[1] = mulIns[1], mulIns[0]
	}
	mul := f.node("Mul", mulIns)
	var last *graph.Node
	switch {
	case !s.sixth:
		last = f.node("Div", []*graph.Value{mul.Output(0), scalar("six", s.six)})
	case s.sixthFirst:
		last = f.node("Mul", []*graph.Value{scalar("sixth", 1/s.six), mul.Output(0)})
	default:
		last = f.node("Mul", []*graph.Value{mul.Output(0), scalar("sixth", 1/s.six)})
	}
	return []*graph.Node{add, clip, mul, last}
}

func TestFuseHardSwish(t *testing.T) {
	spellings := []hardSwishSpelling{
		{},
		{swapAdd: true, swapMul: true},
		{sixth: true},
		{sixth: true, sixthFirst: true, swapMul: true},
		{constNodes: true},
		{constNodes: true, sixth: true, swapAdd: true},
	}
	for _, opset := range []int64{9, 11, 13, 14, 17} {
		for _, s := range spellings {
			t.Run(fmt.Sprintf("opset %d %+v", opset, s), func(t *testing.T) {
				f := newFusionFixture(t, opset)
				x := f.op("Conv", f.input("x", 2, 3, 4, 4), f.weight("w", 4, 3, 1, 1))
				nodes := f.hardSwish(x, s)
				y := nodes[3].Output(0)
				f.output(f.op("Relu", y))
				want := Stats{Removed: 4, Added: 2}
				if opset >= 14 {
					want.Added = 1
				}
				f.fuses(fuseHardSwish, Context{}, want, -5, 5)
				ops := f.ops()
				if opset >= 14 {
					if y.Producer().OpType != "HardSwish" || ops["HardSwish"] != 1 {
						t.Errorf("%s produces %q; ops %v", y.Producer(), y.Name, ops)
					}
				} else if p := y.Producer(); p.OpType != "Mul" || ops["HardSigmoid"] != 1 || ops["Clip"] != 0 {
					t.Errorf("%s produces %q; ops %v", p, y.Name, ops)
				}
				if ops["Div"]+ops["Add"]+ops["Clip"] != 0 {
					t.Errorf("pattern ops left: %v", ops)
				}
			})
		}
	}
}

// The input of the pattern may be a graph input read elsewhere too.
func TestFuseHardSwishSharedInput(t *testing.T) {
	f := newFusionFixture(t, 13)
	x := f.input("x", 1, 8)
	f.output(f.hardSwish(x, hardSwishSpelling{})[3].Output(0))
	f.output(f.op("Neg", x))
	f.fuses(fuseHardSwish, Context{}, Stats{Removed: 4, Added: 2}, -5, 5)
}

func TestFuseHardSwishRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opset int64
		build func(f *fusionFixture, x *graph.Value) []*graph.Node
	}{
		{"Add result read elsewhere", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			f.output(f.op("Neg", n[0].Output(0)))
			return n
		}},
		{"Clip result read elsewhere", 9, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			f.output(f.op("Neg", n[1].Output(0)))
			return n
		}},
		{"Mul result is a graph output", 14, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			f.output(n[2].Output(0))
			return n
		}},
		{"adds 2", 14, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			return f.hardSwish(x, hardSwishSpelling{three: 2, six: 6, hi: 6})
		}},
		{"clips at 5", 9, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			return f.hardSwish(x, hardSwishSpelling{three: 3, six: 6, hi: 5})
		}},
		{"divides by 5", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			return f.hardSwish(x, hardSwishSpelling{three: 3, six: 5, hi: 6})
		}},
		{"multiplies by 1/5", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			return f.hardSwish(x, hardSwishSpelling{three: 3, six: 5, hi: 6, sixth: true})
		}},
		{"divides 6 by the product", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			six, prod := n[3].Input(1), n[3].Input(0)
			n[3].SetInput(0, six)
			n[3].SetInput(1, prod)
			return n
		}},
		{"multiplies another value", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			n[2].SetInput(0, f.input("other", 1, 3, 4, 4))
			return n
		}},
		{"Clip bound not constant", 13, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			n := f.hardSwish(x, hardSwishSpelling{})
			n[1].SetInput(2, f.input("hi"))
			return n
		}},
		{"x is a scalar, the constants [1]", 14, func(f *fusionFixture, _ *graph.Value) []*graph.Node {
			return f.hardSwish(f.input("s"), hardSwishSpelling{})
		}},
		{"rank of x unknown, the constants [1]", 14, func(f *fusionFixture, _ *graph.Value) []*graph.Node {
			s := f.value("s")
			f.Graph.Inputs = append(f.Graph.Inputs, s)
			return f.hardSwish(s, hardSwishSpelling{})
		}},
		{"opset 5", 5, func(f *fusionFixture, x *graph.Value) []*graph.Node {
			return f.hardSwish(x, hardSwishSpelling{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, tc.opset)
			n := tc.build(f, f.input("x", 1, 3, 4, 4))
			f.output(n[3].Output(0))
			f.refuses(fuseHardSwish, Context{})
		})
	}
}
