package passes

import (
	"fmt"
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// geluSpelling says how a test writes GELU.
type geluSpelling struct {
	tanh bool
	// erf form: Mul by 1/√2 instead of Div by √2.
	mulInvSqrt2 bool
	// tanh form: the cube as Pow(x, 3), or as Mul(Mul(x, x), x) (default
	// Mul(x, Mul(x, x)), torch's).
	pow3, squareFirst bool
	// Where the 0.5 goes: "" (x·e)·0.5 (torch), "x" (x·0.5)·e, "e" x·(e·0.5).
	half       string
	swap       bool // every commutative op with its operands the other way
	constNodes bool
	rank1      bool    // constants of shape [1] instead of []
	sqrt2      float32 // default 1.4142135
	cubic      float32 // default 0.044715
	halfValue  float32 // default 0.5
}

// gelu writes GELU over x and returns its last node.
func (f *fusionFixture) gelu(x *graph.Value, s geluSpelling) *graph.Node {
	scalar := func(name string, v float32) *graph.Value {
		var dims []int64
		if s.rank1 {
			dims = []int64{1}
		}
		if s.constNodes {
			return f.constant(name, dims, []float32{v})
		}
		return f.init(name, dims, []float32{v})
	}
	pair := func(a, b *graph.Value) []*graph.Value {
		if s.swap {
			return []*graph.Value{b, a}
		}
		return []*graph.Value{a, b}
	}
	mul := func(a, b *graph.Value) *graph.Value { return f.node("Mul", pair(a, b)).Output(0) }
	if s.sqrt2 == 0 {
		s.sqrt2 = 1.4142135
	}
	if s.cubic == 0 {
		s.cubic = 0.044715
	}
	if s.halfValue == 0 {
		s.halfValue = 0.5
	}
	var act *graph.Value
	if s.tanh {
		var cube *graph.Value
		switch {
		case s.pow3:
			cube = f.op("Pow", x, scalar("three", 3))
		case s.squareFirst:
			cube = mul(mul(x, x), x)
		default:
			cube = mul(x, mul(x, x))
		}
		inner := f.node("Add", pair(x, mul(scalar("cubic", s.cubic), cube))).Output(0)
		act = f.op("Tanh", mul(scalar("sqrt_2_pi", float32(math.Sqrt(2/math.Pi))), inner))
	} else {
		var t *graph.Value
		if s.mulInvSqrt2 {
			t = mul(x, scalar("inv_sqrt2", 1/s.sqrt2))
		} else {
			t = f.op("Div", x, scalar("sqrt2", s.sqrt2))
		}
		act = f.op("Erf", t)
	}
	e := f.node("Add", pair(act, scalar("one", 1))).Output(0)
	half := scalar("half", s.halfValue)
	switch s.half {
	case "x":
		return f.node("Mul", pair(mul(x, half), e))
	case "e":
		return f.node("Mul", pair(x, mul(e, half)))
	}
	return f.node("Mul", pair(mul(x, e), half))
}

func TestFuseGelu(t *testing.T) {
	spellings := []geluSpelling{
		{},
		{mulInvSqrt2: true, swap: true},
		{half: "x"},
		{half: "e", swap: true, constNodes: true},
		{half: "x", mulInvSqrt2: true, rank1: true},
		{tanh: true},
		{tanh: true, swap: true, half: "x"},
		{tanh: true, pow3: true, half: "e", rank1: true},
		{tanh: true, squareFirst: true, constNodes: true},
	}
	for _, opset := range []int64{17, 20} {
		for _, s := range spellings {
			t.Run(fmt.Sprintf("opset %d %+v", opset, s), func(t *testing.T) {
				f := newFusionFixture(t, opset)
				x := f.op("MatMul", f.input("x", 2, 5, 6), f.weight("w", 6, 8))
				last := f.gelu(x, s)
				y := last.Output(0)
				f.output(f.op("Neg", y))
				removed := 5
				if s.tanh {
					removed = 9
					if s.pow3 {
						removed = 8
					}
				}
				f.fusesInORT(fuseGelu, Context{ORTContrib: opset < 20}, Stats{Removed: removed, Added: 1}, -4, 4)
				n := y.Producer()
				want, domain := "Gelu", ""
				if opset < 20 {
					domain = msDomain
					if s.tanh {
						want = "FastGelu"
					}
				}
				if n.OpType != want || n.Domain != domain || n.Name != last.Name || n.Input(0) != x {
					t.Fatalf("%s (domain %q) produces %q, want %s", n, n.Domain, y.Name, want)
				}
				approx := n.AttrString("approximate", "none")
				if opset >= 20 && s.tanh && approx != "tanh" || !(opset >= 20 && s.tanh) && approx != "none" {
					t.Errorf("approximate %q", approx)
				}
				if (f.Model.OpsetVersion(msDomain) == 1) != (opset < 20) {
					t.Errorf("opsets %v", f.Model.Opsets)
				}
				if ops := f.ops(); ops["Erf"]+ops["Tanh"]+ops["Mul"]+ops["Add"]+ops["Div"]+ops["Pow"] != 0 {
					t.Errorf("pattern ops left: %v", ops)
				}
			})
		}
	}
}

// Below opset 20 ONNX has no Gelu: without ORTContrib (a model that may go
// to TensorRT) the pattern stays and no com.microsoft op appears.
func TestFuseGeluStandardOnlyBelowOpset20(t *testing.T) {
	for _, s := range []geluSpelling{{}, {tanh: true}} {
		f := newFusionFixture(t, 19)
		f.output(f.gelu(f.input("x", 2, 8), s).Output(0))
		f.refuses(fuseGelu, Context{})
		if f.Model.OpsetVersion(msDomain) != 0 {
			t.Errorf("opsets %v", f.Model.Opsets)
		}
	}
}

// Two GELUs over the same x, and x read elsewhere: each fuses alone.
func TestFuseGeluSharedInput(t *testing.T) {
	f := newFusionFixture(t, 20)
	x := f.input("x", 3, 8)
	f.output(f.gelu(x, geluSpelling{}).Output(0))
	f.output(f.gelu(x, geluSpelling{tanh: true}).Output(0))
	f.output(f.op("Neg", x))
	f.fusesInORT(fuseGelu, Context{}, Stats{Removed: 14, Added: 2}, -4, 4)
}

func TestFuseGeluRefuses(t *testing.T) {
	producer := func(last *graph.Node, op string) *graph.Node {
		var found *graph.Node
		seen := map[*graph.Node]bool{}
		var walk func(n *graph.Node)
		walk = func(n *graph.Node) {
			if n == nil || seen[n] || found != nil {
				return
			}
			seen[n] = true
			if n.OpType == op {
				found = n
				return
			}
			for _, in := range n.Inputs() {
				walk(in.Producer())
			}
		}
		walk(last)
		return found
	}
	for _, tc := range []struct {
		name   string
		s      geluSpelling
		mutate func(f *fusionFixture, last *graph.Node)
	}{
		{"halves by 0.4", geluSpelling{halfValue: 0.4}, nil},
		{"divides by 1.414", geluSpelling{sqrt2: 1.414}, nil},
		{"multiplies by 1/1.414", geluSpelling{sqrt2: 1.414, mulInvSqrt2: true}, nil},
		{"cubic 0.05", geluSpelling{tanh: true, cubic: 0.05}, nil},
		{"Erf of another value", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			producer(last, "Div").SetInput(0, f.input("other", 2, 8))
		}},
		{"multiplies another value", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			last.Input(0).Producer().SetInput(0, f.input("other", 2, 8))
		}},
		{"Erf read elsewhere", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			f.output(producer(last, "Erf").Output(0))
		}},
		{"1 + Erf is a graph output", geluSpelling{half: "x"}, func(f *fusionFixture, last *graph.Node) {
			f.output(producer(last, "Add").Output(0))
		}},
		{"x·e read elsewhere", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			f.output(f.op("Neg", last.Input(0)))
		}},
		{"adds 2", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			producer(last, "Add").SetInput(1, f.init("two", nil, []float32{2}))
		}},
		{"Pow 2", geluSpelling{tanh: true, pow3: true}, func(f *fusionFixture, last *graph.Node) {
			producer(last, "Pow").SetInput(1, f.init("two", nil, []float32{2}))
		}},
		{"cube of another value", geluSpelling{tanh: true, pow3: true}, func(f *fusionFixture, last *graph.Node) {
			producer(last, "Pow").SetInput(0, f.input("other", 2, 8))
		}},
		{"x², not x³", geluSpelling{tanh: true}, func(f *fusionFixture, last *graph.Node) {
			cube := producer(last, "Tanh").Input(0).Producer().Input(1).Producer().Input(1).Producer().Input(1).Producer()
			cube.SetInput(0, f.init("one", nil, []float32{1}))
		}},
		{"tanh of x + c·x³ without √(2/π)", geluSpelling{tanh: true}, func(f *fusionFixture, last *graph.Node) {
			u := producer(last, "Tanh").Input(0).Producer()
			u.SetInput(0, f.init("one", nil, []float32{1}))
		}},
		{"constants of rank 3 over x of rank 2", geluSpelling{}, func(f *fusionFixture, last *graph.Node) {
			producer(last, "Div").SetInput(1, f.init("sqrt2_3d", []int64{1, 1, 1}, []float32{1.4142135}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFusionFixture(t, 20)
			last := f.gelu(f.input("x", 2, 8), tc.s)
			f.output(last.Output(0))
			if tc.mutate != nil {
				tc.mutate(f, last)
			}
			f.refuses(fuseGelu, Context{ORTContrib: true})
		})
	}
}
