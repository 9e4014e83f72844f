package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
)

func randomBytes(t *testing.T, inputs []Input, opts Options) [][]byte {
	t.Helper()
	src, err := Open("random", inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, b := range readAll(t, src) {
		for _, tt := range b.Tensors {
			out = append(out, tensorBytes(t, tt))
		}
	}
	return out
}

func TestRandomDeterminism(t *testing.T) {
	inputs := []Input{
		{Name: "img", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), st(4), st(4)}},
		{Name: "ids", DType: graph.Int64, Shape: graph.Shape{dyn("N"), st(5)}},
	}
	opts := Options{Batch: 2, Samples: 6, Seed: 42, Low: -1, High: 1}
	a := randomBytes(t, inputs, opts)
	b := randomBytes(t, inputs, opts)
	if len(a) != 6 {
		t.Fatalf("%d tensors, want 6 (3 batches of 2 inputs)", len(a))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Errorf("tensor %d differs between runs with the same seed", i)
		}
	}
	opts.Seed = 43
	c := randomBytes(t, inputs, opts)
	if bytes.Equal(a[0], c[0]) {
		t.Error("different seeds gave the same data")
	}
	// Samples do not depend on how they are batched.
	opts.Seed = 42
	opts.Batch = 3
	d := randomBytes(t, inputs, opts)
	if !bytes.Equal(append(append([]byte{}, a[0]...), a[2]...)[:3*48*4], d[0]) {
		t.Error("the first 3 samples differ between batch sizes 2 and 3")
	}
}

func TestRandomRanges(t *testing.T) {
	const n = 4000
	for _, c := range []struct {
		dt        graph.DataType
		low, high float64
		wantLo    float64 // the least and greatest values 4000 draws reach
		wantHi    float64
	}{
		{graph.Float, 0, 0, 0, 1},
		{graph.Float, -3, 5, -3, 5},
		{graph.Double, 10, 10.5, 10, 10.5},
		{graph.Float16, -2, 2, -2, 2},
		{graph.Float16, 0.999, 1.001, 0.99902344, 1}, // only these two fit
		{graph.Float16, 0, 1e6, 0, 65504},            // clamped below infinity
		{graph.BFloat16, -1, 1, -1, 1},
		{graph.Int8, -5, 5, -5, 4},
		{graph.Int8, -128, 128, -128, 127},
		{graph.Uint8, 0, 256, 0, 255},
		{graph.Int32, 0.5, 3.5, 1, 3},
		{graph.Int64, -1e18, 1e18, -1e18, 1e18},
		{graph.Int64, math.MinInt64, 1 << 63, math.MinInt64, 1 << 63},
		{graph.Uint64, 0, 1 << 64, 0, 1 << 64},
		{graph.Uint16, 7, 8, 7, 7},
		{graph.Bool, 0, 0, 0, 1},
	} {
		in := []Input{{Name: "x", DType: c.dt, Shape: graph.Shape{dyn("N")}}}
		src, err := Open("random", in, Options{Batch: n, Low: c.low, High: c.high, Seed: 7})
		if err != nil {
			t.Errorf("%s [%g,%g): %v", c.dt, c.low, c.high, err)
			continue
		}
		bs := readAll(t, src)
		if len(bs) != 1 || bs[0].Samples != n {
			t.Fatalf("%s: %d batches", c.dt, len(bs))
		}
		vals := decodeFloat64s(t, bs[0].Tensors[0])
		lo, hi := c.low, c.high
		if lo == 0 && hi == 0 {
			lo, hi = 0, 1
		}
		minV, maxV := math.Inf(1), math.Inf(-1)
		for _, v := range vals {
			minV, maxV = min(minV, v), max(maxV, v)
			ok := v >= lo && v < hi
			if c.dt == graph.Bool {
				ok = v == 0 || v == 1
			}
			if c.dt == graph.Float16 && c.high > 65504 {
				ok = v >= lo && v <= 65504
			}
			if !ok {
				t.Errorf("%s [%g,%g): value %g out of range", c.dt, c.low, c.high, v)
				break
			}
		}
		// Values spread over the range (within 2% of each end).
		tol := (c.wantHi - c.wantLo) * 0.02
		if minV > c.wantLo+tol || maxV < c.wantHi-tol {
			t.Errorf("%s [%g,%g): values span [%g, %g], want about [%g, %g]", c.dt, c.low, c.high, minV, maxV, c.wantLo, c.wantHi)
		}
	}
}

// decodeFloat64s reads any numeric tensor as float64 (uint64 and int64
// exactly enough for range checks).
func decodeFloat64s(t *testing.T, tt *graph.Tensor) []float64 {
	t.Helper()
	b := tensorBytes(t, tt)
	n := int(tt.ByteSize()) / (tt.DType.BitSize() / 8)
	out := make([]float64, n)
	le := binary.LittleEndian
	ints, _ := tt.Int64s()
	for i := range out {
		switch tt.DType {
		case graph.Double:
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		case graph.Float:
			out[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		case graph.Float16:
			out[i] = halfToFloat64(le.Uint16(b[2*i:]))
		case graph.BFloat16:
			out[i] = bfloatToFloat64(le.Uint16(b[2*i:]))
		case graph.Uint64:
			out[i] = float64(le.Uint64(b[8*i:]))
		default:
			out[i] = float64(ints[i])
		}
	}
	return out
}

func TestRandomShapes(t *testing.T) {
	inputs := []Input{
		{Name: "img", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), dyn("H"), dyn("W")}},
		{Name: "scale", DType: graph.Float, Shape: graph.Shape{}},
	}
	_, err := Open("random", inputs, Options{})
	wantErr(t, err, `input "img"`, "dim 2 (H) is dynamic", "--shape img:?,3,<H>,<W>")

	// --shape fixes H and W; the dynamic batch stays the stage's choice.
	opts := Options{Batch: 4, Samples: 10, Spec: Spec{Shapes: map[string][]int64{"img": {1, 3, 8, 8}}}}
	src, err := Open("random", inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Next()
	if err != nil || !dimsEqual(b.Tensors[0].Dims, []int64{4, 3, 8, 8}) || b.Samples != 4 || len(b.Tensors[1].Dims) != 0 {
		t.Fatalf("batch %+v, %v", b, err)
	}

	// A static batch is used as it is: 10 samples at batch 2.
	static := []Input{{Name: "img", DType: graph.Float, Shape: graph.StaticShape(2, 3, 8, 8)}}
	src, err = Open("random", static, Options{Batch: 4, Samples: 10})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for {
		b, err := src.Next()
		if err != nil {
			break
		}
		if b.Samples != 2 || b.Tensors[0].Dims[0] != 2 {
			t.Fatalf("run %d: %d samples, dims %v", runs, b.Samples, b.Tensors[0].Dims)
		}
		runs++
	}
	if runs != 5 {
		t.Fatalf("%d runs, want 5", runs)
	}
	_, err = Open("random", static, Options{Batch: 4, StrictBatch: true})
	wantErr(t, err, `input "img"`, "static batch size of 2", "batch size 4")

	opts = Options{Batch: 4, Samples: 8, Spec: Spec{Shapes: map[string][]int64{"img": {4, 3, 8, 16}}}}
	src, err = Open("random", inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 2 || !dimsEqual(bs[1].Tensors[0].Dims, []int64{4, 3, 8, 16}) || len(bs[1].Tensors[1].Dims) != 0 {
		t.Fatalf("%d batches", len(bs))
	}

	// Dynamic batch: Samples split with a smaller last batch.
	dynIn := []Input{{Name: "x", DType: graph.Int32, Shape: graph.Shape{graph.Dim{}, st(2)}}}
	src, err = Open("random", dynIn, Options{Batch: 4, Samples: 10})
	if err != nil {
		t.Fatal(err)
	}
	bs = readAll(t, src)
	if len(bs) != 3 || bs[2].Samples != 2 || !dimsEqual(bs[2].Tensors[0].Dims, []int64{2, 2}) {
		t.Fatalf("dynamic batch: %d batches", len(bs))
	}

	// Unsupported and empty ranges.
	_, err = Open("random", []Input{{Name: "s", DType: graph.String, Shape: graph.Shape{}}}, Options{})
	wantErr(t, err, `input "s"`, "string")
	_, err = Open("random", dynIn, Options{Low: 0.2, High: 0.8})
	wantErr(t, err, `input "x"`, "no integer")
	_, err = Open("random", []Input{{Name: "u", DType: graph.Uint8, Shape: graph.Shape{dyn("N")}}}, Options{Low: -1, High: 10})
	wantErr(t, err, `input "u"`, "does not fit uint8")
	_, err = Open("random", dynIn, Options{Low: 3, High: 1})
	wantErr(t, err, "empty")
	_, err = Open("random", []Input{{Name: "h", DType: graph.Float16, Shape: graph.Shape{dyn("N")}}}, Options{Low: 0.1, High: 0.10001})
	wantErr(t, err, `input "h"`, "no float16 value")
	_, err = Open("random", []Input{{Name: "r", DType: graph.Float}}, Options{})
	wantErr(t, err, `input "r"`, "rank is unknown")
}

func TestResolveShape(t *testing.T) {
	in := Input{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), dyn("H"), st(5)}}
	_, err := ResolveShape(in, Options{})
	wantErr(t, err, `input "x"`, "dim 2 (H)")
	got, err := ResolveShape(in, Options{Batch: 6, Spec: Spec{Shapes: map[string][]int64{"x": {6, 3, 7, 5}}}})
	if err != nil || !dimsEqual(got, []int64{6, 3, 7, 5}) {
		t.Fatalf("got %v, %v", got, err)
	}
	_, err = ResolveShape(in, Options{Spec: Spec{Shapes: map[string][]int64{"x": {1, 4, 7, 5}}}})
	wantErr(t, err, `"x"`, "x:1,4,7,5", "dim 1 is 4, want 3")
	_, err = ResolveShape(in, Options{Spec: Spec{Shapes: map[string][]int64{"x": {1, 3, 7}}}})
	wantErr(t, err, `"x"`, "rank 3, want 4")
	in.Shape[2] = st(9)
	got, err = ResolveShape(in, Options{})
	if err != nil || !dimsEqual(got, []int64{1, 3, 9, 5}) {
		t.Fatalf("got %v, %v", got, err)
	}
	got, err = ResolveShape(in, Options{Batch: 3})
	if err != nil || !dimsEqual(got, []int64{3, 3, 9, 5}) {
		t.Fatalf("got %v, %v", got, err)
	}
	in.Shape[0] = st(2)
	got, err = ResolveShape(in, Options{Batch: 3})
	if err != nil || !dimsEqual(got, []int64{2, 3, 9, 5}) {
		t.Fatalf("static batch: got %v, %v", got, err)
	}
	got, err = ResolveShape(Input{Name: "u", DType: graph.Float}, Options{Spec: Spec{Shapes: map[string][]int64{"u": {2, 2}}}})
	if err != nil || !dimsEqual(got, []int64{2, 2}) {
		t.Fatalf("unknown rank with --shape: %v, %v", got, err)
	}
}

func TestParseShapeFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		dims []int64
	}{
		{"x:1,3,224,224", "x", []int64{1, 3, 224, 224}},
		{"input:0:8, 3", "input:0", []int64{8, 3}},
		{"ids:7", "ids", []int64{7}},
	} {
		name, dims, err := ParseShapeFlag(c.in)
		if err != nil || name != c.name || !dimsEqual(dims, c.dims) {
			t.Errorf("%q: %q %v %v", c.in, name, dims, err)
		}
	}
	for _, bad := range []string{"x", ":1,2", "x:", "x:1,,2", "x:1,-2", "x:a"} {
		if _, _, err := ParseShapeFlag(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestHalfConversion checks float16 and bfloat16 rounding: every value
// round-trips, midpoints round to even, overflow goes to infinity.
func TestHalfConversion(t *testing.T) {
	for h := range 1 << 16 {
		v := halfToFloat64(uint16(h))
		if math.IsNaN(v) {
			if got := float64ToHalf(v); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN became %#04x", got)
			}
			continue
		}
		if got := float64ToHalf(v); got != uint16(h) {
			t.Fatalf("half %#04x (%g) round-trips to %#04x", h, v, got)
		}
		// The midpoint to the next value rounds to the even one of the two.
		if h&0x7fff < 0x7bff {
			next := halfToFloat64(uint16(h + 1))
			mid := (v + next) / 2
			want := uint16(h)
			if h&1 == 1 {
				want = uint16(h + 1)
			}
			if got := float64ToHalf(mid); got != want {
				t.Fatalf("midpoint %g of %#04x and %#04x became %#04x, want %#04x", mid, h, h+1, got, want)
			}
			// Just above the midpoint rounds up.
			if got := float64ToHalf(math.Nextafter(mid, math.Inf(sign(v)))); got != uint16(h+1) {
				t.Fatalf("just past the midpoint of %#04x: %#04x", h, got)
			}
		}
	}
	for _, c := range []struct {
		v    float64
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {1e9, 0x7c00},
		{math.Inf(-1), 0xfc00}, {5.960464477539063e-08, 0x0001}, {2.98e-08, 0x0000}, {2.99e-08, 0x0001},
		{6.103515625e-05, 0x0400}, {0.1, 0x2e66}, {math.Copysign(0, -1), 0x8000},
	} {
		if got := float64ToHalf(c.v); got != c.want {
			t.Errorf("float64ToHalf(%g) = %#04x, want %#04x", c.v, got, c.want)
		}
	}
	for b := range 1 << 16 {
		v := bfloatToFloat64(uint16(b))
		if math.IsNaN(v) {
			continue
		}
		if got := float64ToBFloat(v); got != uint16(b) {
			t.Fatalf("bfloat16 %#04x (%g) round-trips to %#04x", b, v, got)
		}
	}
	if got := float64ToBFloat(1.00390625); got != 0x3f80 { // midpoint of 1 and 1+2^-7 rounds to even (1)
		t.Errorf("bfloat16 midpoint: %#04x", got)
	}
	if got := float64ToBFloat(1.01171875); got != 0x3f82 { // midpoint of 1+2^-7 and 1+2^-6 rounds to even
		t.Errorf("bfloat16 midpoint: %#04x", got)
	}
}

func sign(v float64) int {
	if math.Signbit(v) {
		return -1
	}
	return 1
}

// TestFailedSourceStaysFailed: once making a batch fails, every later
// batch gives the same error, whichever source it is (the batching cursor
// keeps it), even when the next try would have worked.
func TestFailedSourceStaysFailed(t *testing.T) {
	b := &batching{batch: 2, total: 8}
	fail := errors.New("input x: broken")
	tries := 0
	tensor := func(_, n int) (*graph.Tensor, error) {
		tries++
		if tries == 2 {
			return nil, fail
		}
		return graph.NewTensor("x", graph.Float, []int64{int64(n)}, make([]byte, 4*n))
	}
	if _, err := b.nextBatch(1, tensor); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	for range 2 {
		if _, err := b.nextBatch(1, tensor); err != fail {
			t.Fatalf("after the failed batch: err %v, want %v", err, fail)
		}
	}
	if tries != 2 {
		t.Fatalf("%d tries, want 2: a failed source must not try again", tries)
	}
}
