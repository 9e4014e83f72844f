package kernels

import (
	"errors"
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testgraph"
)

func TestHalfConversion(t *testing.T) {
	for h := range 1 << 16 {
		bits := uint16(h)
		v := halfToFloat64(bits)
		if math.IsNaN(v) {
			continue
		}
		if got := float64ToHalf(v); got != bits {
			t.Fatalf("%#04x -> %g -> %#04x", bits, v, got)
		}
		// The midpoint to the next value up rounds to the even one.
		if bits&0x7fff >= 0x7bff {
			continue // the largest finite value and infinity
		}
		next := halfToFloat64(bits + 1)
		if math.Signbit(v) {
			continue // the same, mirrored
		}
		want := bits
		if bits&1 == 1 {
			want = bits + 1
		}
		if got := float64ToHalf((v + next) / 2); got != want {
			t.Fatalf("midpoint of %#04x and %#04x rounds to %#04x, want %#04x", bits, bits+1, got, want)
		}
	}
	for _, c := range []struct {
		v    float64
		want uint16
	}{{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {1e6, 0x7c00}, {-1e6, 0xfc00}, {math.Ldexp(1, -25), 0}, {math.Ldexp(1.5, -25), 1}, {math.Copysign(0, -1), 0x8000}} {
		if got := float64ToHalf(c.v); got != c.want {
			t.Errorf("float64ToHalf(%g) = %#04x, want %#04x", c.v, got, c.want)
		}
	}
}

func TestRefusals(t *testing.T) {
	one := []*graph.Tensor{testgraph.Int64Tensor(t, []int64{1}, 1)}
	cases := []struct {
		name  string
		op    string
		limit int64
		in    []*graph.Tensor
		want  error
	}{
		{"no kernel", "Sin", 0, one, ErrUnsupported},
		{"blow-up", "ConstantOfShape", 1 << 20, []*graph.Tensor{testgraph.Int64Tensor(t, []int64{2}, 1024, 257)}, ErrTooLarge},
		{"expand", "Expand", 1000, []*graph.Tensor{testgraph.Int64Tensor(t, nil, 1), testgraph.Int64Tensor(t, []int64{2}, 100, 100)}, ErrTooLarge},
		{"division by zero", "Div", 0, []*graph.Tensor{testgraph.Int64Tensor(t, []int64{2}, 1, 2), testgraph.Int64Tensor(t, []int64{1}, 0)}, ErrUndefined},
		{"overflowing division", "Div", 0, []*graph.Tensor{testgraph.Int64Tensor(t, nil, math.MinInt64), testgraph.Int64Tensor(t, nil, -1)}, ErrUndefined},
		{"negative power", "Pow", 0, []*graph.Tensor{testgraph.Int64Tensor(t, nil, 2), testgraph.Int64Tensor(t, nil, -1)}, ErrUnsupported},
	}
	for _, c := range cases {
		_, err := EvalLimit(c.limit, c.op, "", 17, nil, c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Eval("Add", "com.microsoft", 1, nil, append(one, one...)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("another domain: %v", err)
	}
	nan, _ := graph.NewFloat32Tensor("", []int64{1}, []float32{float32(math.NaN())})
	to := &graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Int32)}
	if _, err := Eval("Cast", "", 13, &graph.Node{Attrs: []*graph.Attr{to}}, []*graph.Tensor{nan}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("NaN to int32: %v", err)
	}
	if _, err := Eval("Max", "", 13, nil, []*graph.Tensor{nan, nan}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Max of NaN: %v", err)
	}
}
