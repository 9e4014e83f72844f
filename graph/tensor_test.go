package graph_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
)

// le builds little-endian bytes from a list of fixed-size values.
func le(vals ...any) []byte {
	var b bytes.Buffer
	for _, v := range vals {
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

func mustTensor(t *testing.T, dt graph.DataType, dims []int64, data []byte) *graph.Tensor {
	t.Helper()
	tn, err := graph.NewTensor("t", dt, dims, data)
	if err != nil {
		t.Fatalf("NewTensor(%s%v, %d bytes): %v", dt, dims, len(data), err)
	}
	return tn
}

func eqFloat32s(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool {
		return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
	})
}

func TestFloat32sFromRawBytes(t *testing.T) {
	for _, tc := range []struct {
		dt   graph.DataType
		data []byte
		want []float32
	}{
		{graph.Float, le(float32(1.5), float32(-2), float32(math.Inf(1))), []float32{1.5, -2, float32(math.Inf(1))}},
		{graph.Double, le(0.25, -1e10), []float32{0.25, -1e10}},
		{graph.Float16, le(
			uint16(0x3C00), uint16(0xC000), uint16(0x7C00), uint16(0xFC00),
			uint16(0x0001), uint16(0x0200), uint16(0x0400), uint16(0x7BFF), uint16(0x8000), uint16(0x3555)),
			[]float32{1, -2, float32(math.Inf(1)), float32(math.Inf(-1)),
				0x1p-24, 0x1p-15, 0x1p-14, 65504, float32(math.Copysign(0, -1)), 0.333251953125}},
		{graph.BFloat16, le(uint16(0x3F80), uint16(0xC040), uint16(0x7F80)), []float32{1, -3, float32(math.Inf(1))}},
		{graph.Int8, []byte{0xFD, 0x7F, 0x80}, []float32{-3, 127, -128}},
		{graph.Uint8, []byte{200, 0, 255}, []float32{200, 0, 255}},
		{graph.Bool, []byte{1, 0}, []float32{1, 0}},
		{graph.Int16, le(int16(-2), int16(300)), []float32{-2, 300}},
		{graph.Uint16, le(uint16(65535)), []float32{65535}},
		{graph.Int32, le(int32(-5), int32(7)), []float32{-5, 7}},
		{graph.Uint32, le(uint32(4000000000)), []float32{4e9}},
		{graph.Int64, le(int64(-1), int64(1)<<40), []float32{-1, 1 << 40}},
		{graph.Uint64, le(uint64(1) << 63), []float32{1 << 63}},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			tn := mustTensor(t, tc.dt, []int64{int64(len(tc.want))}, tc.data)
			got, err := tn.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			if !eqFloat32s(got, tc.want) {
				t.Errorf("Float32s = %v, want %v", got, tc.want)
			}
		})
	}
	// A NaN half stays NaN.
	got, err := mustTensor(t, graph.Float16, []int64{1}, le(uint16(0x7E00))).Float32s()
	if err != nil || len(got) != 1 || !math.IsNaN(float64(got[0])) {
		t.Errorf("float16 NaN = %v, %v", got, err)
	}
	for _, dt := range []graph.DataType{graph.Float8E4M3FN, graph.Int4, graph.Complex64} {
		n := int64(2)
		size, _ := dt.ByteSize(n)
		_, err := mustTensor(t, dt, []int64{n}, make([]byte, size)).Float32s()
		wantErr(t, err, dt.String())
	}
}

func TestInt64s(t *testing.T) {
	for _, tc := range []struct {
		dt   graph.DataType
		data []byte
		want []int64
	}{
		{graph.Int8, []byte{0xFF, 5}, []int64{-1, 5}},
		{graph.Uint8, []byte{0xFF}, []int64{255}},
		{graph.Bool, []byte{1, 0, 1}, []int64{1, 0, 1}},
		{graph.Int16, le(int16(-300)), []int64{-300}},
		{graph.Uint16, le(uint16(65000)), []int64{65000}},
		{graph.Int32, le(int32(math.MinInt32)), []int64{math.MinInt32}},
		{graph.Uint32, le(uint32(math.MaxUint32)), []int64{math.MaxUint32}},
		{graph.Int64, le(int64(math.MinInt64), int64(math.MaxInt64)), []int64{math.MinInt64, math.MaxInt64}},
		{graph.Uint64, le(uint64(7)), []int64{7}},
	} {
		got, err := mustTensor(t, tc.dt, []int64{int64(len(tc.want))}, tc.data).Int64s()
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Int64s = %v, %v; want %v", tc.dt, got, err, tc.want)
		}
	}
	_, err := mustF32(t, "f", []int64{1}, []float32{1}).Int64s()
	wantErr(t, err, `"f"`, "float32")
	ints, err := graph.NewInt64Tensor("shape", []int64{3}, []int64{1, -1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ints.Int64s(); err != nil || !slices.Equal(got, []int64{1, -1, 4}) {
		t.Errorf("NewInt64Tensor round trip = %v, %v", got, err)
	}
}

// typedCase is an initializer stored in one of TensorProto's typed fields.
type typedCase struct {
	name  string
	tp    *onnxpb.TensorProto
	bytes []byte    // the little-endian element bytes it stands for
	f32   []float32 // Float32s, nil when it must fail
	i64   []int64   // Int64s, nil when it must fail
}

func typedCases() []typedCase {
	tp := func(name string, dt graph.DataType, dims []int64, set func(*onnxpb.TensorProto)) *onnxpb.TensorProto {
		p := &onnxpb.TensorProto{Name: pstr(name), DataType: proto.Int32(int32(dt)), Dims: dims}
		set(p)
		return p
	}
	return []typedCase{
		{"float_data", tp("f", graph.Float, []int64{2}, func(p *onnxpb.TensorProto) { p.FloatData = []float32{1.5, -2} }),
			le(float32(1.5), float32(-2)), []float32{1.5, -2}, nil},
		{"int32_data int8", tp("i8", graph.Int8, []int64{3}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{-3, 127, -128} }),
			[]byte{0xFD, 0x7F, 0x80}, []float32{-3, 127, -128}, []int64{-3, 127, -128}},
		{"int32_data uint8", tp("u8", graph.Uint8, []int64{2}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{200, 0} }),
			[]byte{200, 0}, []float32{200, 0}, []int64{200, 0}},
		{"int32_data bool", tp("b", graph.Bool, []int64{3}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{1, 0, 1} }),
			[]byte{1, 0, 1}, []float32{1, 0, 1}, []int64{1, 0, 1}},
		{"int32_data float16", tp("h", graph.Float16, []int64{2}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{0x3C00, 0xC000} }),
			le(uint16(0x3C00), uint16(0xC000)), []float32{1, -2}, nil},
		{"int32_data bfloat16", tp("bf", graph.BFloat16, []int64{1}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{0x3F80} }),
			le(uint16(0x3F80)), []float32{1}, nil},
		{"int32_data int16", tp("i16", graph.Int16, []int64{2}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{-2, 300} }),
			le(int16(-2), int16(300)), []float32{-2, 300}, []int64{-2, 300}},
		{"int32_data int32", tp("i32", graph.Int32, []int64{2}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{-5, 7} }),
			le(int32(-5), int32(7)), []float32{-5, 7}, []int64{-5, 7}},
		{"int32_data int4 packed", tp("i4", graph.Int4, []int64{3}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{0xE1, 0x03} }),
			[]byte{0xE1, 0x03}, nil, nil},
		{"int32_data float8", tp("f8", graph.Float8E4M3FN, []int64{2}, func(p *onnxpb.TensorProto) { p.Int32Data = []int32{0x38, 0xB8} }),
			[]byte{0x38, 0xB8}, nil, nil},
		{"int64_data", tp("i64", graph.Int64, []int64{2}, func(p *onnxpb.TensorProto) { p.Int64Data = []int64{-1, 1 << 40} }),
			le(int64(-1), int64(1)<<40), []float32{-1, 1 << 40}, []int64{-1, 1 << 40}},
		{"double_data", tp("d", graph.Double, []int64{2}, func(p *onnxpb.TensorProto) { p.DoubleData = []float64{0.25, -1e10} }),
			le(0.25, -1e10), []float32{0.25, -1e10}, nil},
		{"uint64_data uint32", tp("u32", graph.Uint32, []int64{2}, func(p *onnxpb.TensorProto) { p.Uint64Data = []uint64{4000000000, 1} }),
			le(uint32(4000000000), uint32(1)), []float32{4e9, 1}, []int64{4000000000, 1}},
		{"uint64_data uint64", tp("u64", graph.Uint64, []int64{1}, func(p *onnxpb.TensorProto) { p.Uint64Data = []uint64{5} }),
			le(uint64(5)), []float32{5}, []int64{5}},
		{"float_data complex64", tp("c", graph.Complex64, []int64{1}, func(p *onnxpb.TensorProto) { p.FloatData = []float32{1, 2} }),
			le(float32(1), float32(2)), nil, nil},
		{"scalar", tp("s", graph.Float, nil, func(p *onnxpb.TensorProto) { p.FloatData = []float32{7} }),
			le(float32(7)), []float32{7}, nil},
	}
}

func typedModel(cases []typedCase) *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{Name: pstr("typed")}
	for _, c := range cases {
		g.Initializer = append(g.Initializer, c.tp)
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: c.tp.Name})
	}
	return pmodel(g)
}

func TestTypedStorage(t *testing.T) {
	cases := typedCases()
	orig := marshalProto(t, typedModel(cases))
	m, err := graph.Parse(orig, "")
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, m)
	for i, c := range cases {
		tn := m.Graph.Initializers[i].Const
		if tn.Name != c.tp.GetName() || tn.DType != graph.DataType(c.tp.GetDataType()) {
			t.Fatalf("%s: initializer %d is %q %s", c.name, i, tn.Name, tn.DType)
		}
		b, err := tn.Bytes()
		if err != nil || !bytes.Equal(b, c.bytes) {
			t.Errorf("%s: Bytes = %x, %v; want %x", c.name, b, err, c.bytes)
		}
		if got := tn.ByteSize(); got != int64(len(c.bytes)) {
			t.Errorf("%s: ByteSize = %d, want %d", c.name, got, len(c.bytes))
		}
		f, err := tn.Float32s()
		if c.f32 == nil {
			if err == nil {
				t.Errorf("%s: Float32s = %v, want an error", c.name, f)
			}
		} else if err != nil || !eqFloat32s(f, c.f32) {
			t.Errorf("%s: Float32s = %v, %v; want %v", c.name, f, err, c.f32)
		}
		n, err := tn.Int64s()
		if c.i64 == nil {
			if err == nil {
				t.Errorf("%s: Int64s = %v, want an error", c.name, n)
			}
		} else if err != nil || !slices.Equal(n, c.i64) {
			t.Errorf("%s: Int64s = %v, %v; want %v", c.name, n, err, c.i64)
		}
		if tn.IsExternal() || tn.External() != nil {
			t.Errorf("%s: typed tensor reported as external", c.name)
		}
	}

	// Untouched, every tensor is written back in its typed field.
	out := mustMarshal(t, m)
	sameModel(t, orig, out)
	for _, tp := range unmarshalModel(t, out).Graph.Initializer {
		if tp.RawData != nil {
			t.Errorf("%s: re-encoded with raw_data", tp.GetName())
		}
	}

	// SetBytes switches a tensor to raw_data and drops the typed field.
	f := m.Graph.Value("f").Const
	wantErr(t, f.SetBytes(make([]byte, 4)), `"f"`, "4 bytes")
	if b, _ := f.Bytes(); !bytes.Equal(b, le(float32(1.5), float32(-2))) {
		t.Fatalf("failed SetBytes changed the data to %x", b)
	}
	if err := f.SetBytes(le(float32(3), float32(4))); err != nil {
		t.Fatal(err)
	}
	i8 := m.Graph.Value("i8").Const
	if err := i8.SetBytes([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	re := unmarshalModel(t, mustMarshal(t, m))
	for _, tp := range re.Graph.Initializer {
		switch tp.GetName() {
		case "f":
			if len(tp.FloatData) != 0 || !bytes.Equal(tp.RawData, le(float32(3), float32(4))) {
				t.Errorf("f after SetBytes: float_data %v raw %x", tp.FloatData, tp.RawData)
			}
		case "i8":
			if len(tp.Int32Data) != 0 || !bytes.Equal(tp.RawData, []byte{1, 2, 3}) {
				t.Errorf("i8 after SetBytes: int32_data %v raw %x", tp.Int32Data, tp.RawData)
			}
		case "i64":
			if len(tp.Int64Data) != 2 || tp.RawData != nil {
				t.Errorf("untouched i64 changed storage")
			}
		}
	}
	r, err := graph.Parse(mustMarshal(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Graph.Value("f").Const.Float32s(); !slices.Equal(got, []float32{3, 4}) {
		t.Errorf("reloaded f = %v", got)
	}
}

func TestTypedStorageWrongCount(t *testing.T) {
	// float_data with 3 values for dims [2]: the views refuse, no panic.
	tp := f32Proto("bad", []int64{2}, 1, 2, 3)
	m := parseProto(t, typedModel([]typedCase{{tp: tp}}))
	tn := m.Graph.Value("bad").Const
	_, err := tn.Float32s()
	wantErr(t, err, `"bad"`, "12 bytes")
	i := &onnxpb.TensorProto{Name: pstr("short"), DataType: proto.Int32(int32(graph.Int64)), Dims: []int64{3}, Int64Data: []int64{1}}
	m = parseProto(t, typedModel([]typedCase{{tp: i}}))
	_, err = m.Graph.Value("short").Const.Int64s()
	wantErr(t, err, `"short"`)
}

func TestStringTensor(t *testing.T) {
	tp := &onnxpb.TensorProto{Name: pstr("s"), DataType: proto.Int32(int32(graph.String)), Dims: []int64{2},
		StringData: [][]byte{[]byte("hello"), []byte("")}}
	orig := marshalProto(t, typedModel([]typedCase{{tp: tp}}))
	m, err := graph.Parse(orig, "")
	if err != nil {
		t.Fatal(err)
	}
	tn := m.Graph.Value("s").Const
	ss, err := tn.Strings()
	if err != nil || len(ss) != 2 || string(ss[0]) != "hello" || len(ss[1]) != 0 {
		t.Errorf("Strings = %q, %v", ss, err)
	}
	if _, err := tn.Bytes(); err == nil {
		t.Errorf("Bytes of a string tensor gave no error")
	}
	if _, err := tn.Float32s(); err == nil {
		t.Errorf("Float32s of a string tensor gave no error")
	}
	wantErr(t, tn.SetBytes(nil), `"s"`)
	sameModel(t, orig, mustMarshal(t, m))
	_, err = mustF32(t, "f", []int64{1}, []float32{1}).Strings()
	wantErr(t, err, `"f"`)
}

func TestRawStorageRoundTrip(t *testing.T) {
	// raw_data, including an empty tensor, is written back as it was.
	mp := typedModel(nil)
	mp.Graph.Initializer = []*onnxpb.TensorProto{
		{Name: pstr("r"), DataType: proto.Int32(int32(graph.Float)), Dims: []int64{2}, RawData: le(float32(1), float32(2))},
		{Name: pstr("empty"), DataType: proto.Int32(int32(graph.Float)), Dims: []int64{0}, RawData: []byte{}},
	}
	orig := marshalProto(t, mp)
	m, err := graph.Parse(orig, "")
	if err != nil {
		t.Fatal(err)
	}
	out := mustMarshal(t, m)
	sameModel(t, orig, out)
	if !bytes.Equal(orig, out) {
		t.Errorf("raw tensors not byte-identical after round trip")
	}
	b, err := m.Graph.Value("empty").Const.Bytes()
	if err != nil || len(b) != 0 {
		t.Errorf("empty tensor Bytes = %x, %v", b, err)
	}
}

func TestNumElements(t *testing.T) {
	for _, tc := range []struct {
		dims []int64
		want int64
		err  string
	}{
		{nil, 1, ""},
		{[]int64{0}, 0, ""},
		{[]int64{2, 3, 4}, 24, ""},
		{[]int64{math.MaxInt64}, math.MaxInt64, ""},
		{[]int64{0, math.MaxInt64, math.MaxInt64}, 0, ""},
		{[]int64{-1}, 0, "negative"},
		{[]int64{3, -2}, 0, "negative"},
		{[]int64{1 << 32, 1 << 32}, 0, "overflow"},
		{[]int64{math.MaxInt64, 2}, 0, "overflow"},
		{[]int64{1 << 21, 1 << 21, 1 << 21}, 0, "overflow"},
	} {
		tn := &graph.Tensor{Name: "n", DType: graph.Float, Dims: tc.dims}
		got, err := tn.NumElements()
		if tc.err != "" {
			if err == nil {
				t.Errorf("dims %v: NumElements = %d, want an error", tc.dims, got)
				continue
			}
			wantErr(t, err, tc.err, `"n"`)
			if tn.ByteSize() != 0 {
				t.Errorf("dims %v: ByteSize = %d for bad dims, want 0", tc.dims, tn.ByteSize())
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("dims %v: NumElements = %d, %v; want %d", tc.dims, got, err, tc.want)
		}
	}
	// ByteSize of an overflowing byte count is 0, not a wrapped number.
	big := &graph.Tensor{Name: "big", DType: graph.Double, Dims: []int64{math.MaxInt64}}
	if got := big.ByteSize(); got != 0 {
		t.Errorf("ByteSize of float64[MaxInt64] = %d, want 0", got)
	}
}

func TestNewTensorChecksSize(t *testing.T) {
	for _, tc := range []struct {
		dt   graph.DataType
		dims []int64
		n    int
		ok   bool
	}{
		{graph.Float, []int64{2, 2}, 16, true},
		{graph.Float, []int64{2, 2}, 15, false},
		{graph.Float, []int64{2, 2}, 17, false},
		{graph.Float, nil, 4, true},
		{graph.Float, []int64{0}, 0, true},
		{graph.Float, []int64{-1}, 0, false},
		{graph.Int4, []int64{3}, 2, true},
		{graph.Int4, []int64{3}, 3, false},
		{graph.Uint2, []int64{5}, 2, true},
		{graph.String, []int64{1}, 0, false},
		{graph.DataType(99), []int64{1}, 1, false},
	} {
		_, err := graph.NewTensor("t", tc.dt, tc.dims, make([]byte, tc.n))
		if (err == nil) != tc.ok {
			t.Errorf("NewTensor(%s%v, %d bytes): err = %v, want ok=%v", tc.dt, tc.dims, tc.n, err, tc.ok)
		}
	}
	_, err := graph.NewFloat32Tensor("v", []int64{3}, []float32{1, 2})
	wantErr(t, err, `"v"`)
	// The dims are copied.
	dims := []int64{2}
	tn := mustTensor(t, graph.Uint8, dims, []byte{1, 2})
	dims[0] = 5
	if tn.Dims[0] != 2 {
		t.Errorf("NewTensor kept the caller's dims slice")
	}
}

func TestSetBytes(t *testing.T) {
	tn := mustF32(t, "w", []int64{2}, []float32{1, 2})
	for _, n := range []int{0, 4, 12} {
		wantErr(t, tn.SetBytes(make([]byte, n)), `"w"`)
	}
	if got, _ := tn.Float32s(); !slices.Equal(got, []float32{1, 2}) {
		t.Fatalf("refused SetBytes changed the data: %v", got)
	}
	if err := tn.SetBytes(le(float32(5), float32(6))); err != nil {
		t.Fatal(err)
	}
	if got, _ := tn.Float32s(); !slices.Equal(got, []float32{5, 6}) {
		t.Fatalf("after SetBytes: %v", got)
	}
	// New dims first, then data of the new size.
	tn.Dims = []int64{3}
	if err := tn.SetBytes(le(float32(1), float32(2), float32(3))); err != nil {
		t.Fatal(err)
	}
	tn.Dims = []int64{-3}
	wantErr(t, tn.SetBytes(nil), "negative")
}

func TestDataTypeByteSize(t *testing.T) {
	for _, tc := range []struct {
		dt   graph.DataType
		n    int64
		want int64
		ok   bool
	}{
		{graph.Float, 3, 12, true},
		{graph.Float, 0, 0, true},
		{graph.Double, 2, 16, true},
		{graph.Bool, 5, 5, true},
		{graph.Float16, 3, 6, true},
		{graph.Complex64, 2, 16, true},
		{graph.Complex128, 2, 32, true},
		{graph.Float8E5M2, 3, 3, true},
		{graph.Int4, 0, 0, true},
		{graph.Int4, 1, 1, true},
		{graph.Int4, 2, 1, true},
		{graph.Int4, 3, 2, true},
		{graph.Uint4, 4, 2, true},
		{graph.Float4E2M1, 5, 3, true},
		{graph.Int2, 1, 1, true},
		{graph.Int2, 4, 1, true},
		{graph.Int2, 5, 2, true},
		{graph.Uint2, 9, 3, true},
		{graph.Int4, math.MaxInt64, 1 << 62, true},
		{graph.Int2, math.MaxInt64, 1 << 61, true},
		{graph.Uint4, math.MaxInt64 - 1, 1<<62 - 1, true},
		{graph.Float, 1 << 60, 1 << 62, true},
		{graph.Float, 1<<60 + 1, 0, false},
		{graph.Complex128, math.MaxInt64, 0, false},
		{graph.Float, -1, 0, false},
		{graph.Int4, -1, 0, false},
		{graph.String, 1, 0, false},
		{graph.Undefined, 1, 0, false},
		{graph.DataType(99), 1, 0, false},
	} {
		got, ok := tc.dt.ByteSize(tc.n)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s.ByteSize(%d) = %d, %v; want %d, %v", tc.dt, tc.n, got, ok, tc.want, tc.ok)
		}
	}
	for dt, bits := range map[graph.DataType]int{
		graph.Int4: 4, graph.Uint4: 4, graph.Int2: 2, graph.Uint2: 2, graph.Bool: 8,
		graph.BFloat16: 16, graph.Complex128: 128, graph.String: 0, graph.DataType(99): 0,
	} {
		if got := dt.BitSize(); got != bits {
			t.Errorf("%s.BitSize() = %d, want %d", dt, got, bits)
		}
	}
}

func TestParseDataType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want graph.DataType
	}{
		{"float32", graph.Float}, {"float", graph.Float}, {"FLOAT", graph.Float},
		{"double", graph.Double}, {"DOUBLE", graph.Double}, {"float64", graph.Double},
		{"INT64", graph.Int64}, {"int8", graph.Int8}, {"UINT8", graph.Uint8},
		{"float16", graph.Float16}, {"FLOAT16", graph.Float16}, {"bfloat16", graph.BFloat16},
		{"BOOL", graph.Bool}, {"string", graph.String}, {"INT4", graph.Int4}, {"uint2", graph.Uint2},
		{"FLOAT8E4M3FN", graph.Float8E4M3FN}, {"float4e2m1", graph.Float4E2M1},
	} {
		got, err := graph.ParseDataType(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDataType(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "float33", "int", "dtype(99)", " float"} {
		if got, err := graph.ParseDataType(bad); err == nil {
			t.Errorf("ParseDataType(%q) = %v, want an error", bad, got)
		}
	}
	// Every known type's name parses back to it.
	for dt := graph.DataType(1); dt <= graph.Int2; dt++ {
		if !dt.Known() {
			t.Errorf("%d is not Known", dt)
			continue
		}
		got, err := graph.ParseDataType(dt.String())
		if err != nil || got != dt {
			t.Errorf("ParseDataType(%q) = %v, %v; want %d", dt.String(), got, err, dt)
		}
	}
	if graph.Undefined.Known() || graph.DataType(99).Known() {
		t.Errorf("Undefined or 99 reported as known")
	}
	if got := graph.DataType(99).String(); got != "dtype(99)" {
		t.Errorf("String of an unknown type = %q", got)
	}
}
