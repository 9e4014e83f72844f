package data

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testgraph"
)

// addInput adds graph input name, declared an elem tensor of the shape.
func addInput(b *testgraph.Builder, name string, elem graph.DataType, shape graph.Shape) *graph.Value {
	b.T.Helper()
	v := b.Value(name)
	v.Type = graph.TensorType(elem, shape)
	b.Graph.Inputs = append(b.Graph.Inputs, v)
	return v
}

// seqModel declares inputs the way sequence models do: token ids into an
// embedding of 100 rows and a mask, both [batch, seq]; recurrent state
// [layers, batch, hidden]; a scalar sample rate.
func seqModel(t *testing.T) *graph.Graph {
	b := testgraph.New(t, "seq", 17)
	ids := addInput(b, "ids", graph.Int64, graph.Shape{dyn("batch"), dyn("seq")})
	addInput(b, "attention_mask", graph.Int64, graph.Shape{dyn("batch"), dyn("seq")})
	addInput(b, "h0", graph.Float, graph.Shape{st(2), dyn("batch"), st(16)})
	addInput(b, "sr", graph.Int64, graph.Shape{})
	table := b.Floats("table", []int64{100, 4}, make([]float32, 400)...)
	emb := b.Node("emb", "Gather", table, ids)
	b.Output(emb.Output(0), 1, 1, 4)
	return b.Graph
}

func TestInferInputs(t *testing.T) {
	in := GraphInputs(seqModel(t))
	want := []struct {
		axis int
		feed Feed
		rng  bool
	}{{0, FeedRandom, true}, {0, FeedOnes, false}, {1, FeedZeros, false}, {NoBatchAxis, FeedZeros, false}}
	for i, w := range want {
		if in[i].BatchAxis != w.axis || in[i].Feed != w.feed || (in[i].Range != nil) != w.rng {
			t.Errorf("input %q: axis %d feed %s range %v, want axis %d feed %s range %v", in[i].Name, in[i].BatchAxis, in[i].Feed, in[i].Range, w.axis, w.feed, w.rng)
		}
	}
	if r := in[0].Range; r == nil || *r != [2]float64{0, 100} {
		t.Errorf("ids range %v, want [0, 100)", r)
	}
	lines := Describe(in, Options{Spec: Spec{Values: map[string]float64{"sr": 16000}}})
	if len(lines) != 4 || !strings.Contains(lines[3], "the value 16000") || !strings.Contains(lines[2], "batch on axis 1") {
		t.Errorf("Describe: %q", lines)
	}
}

func TestRandomSequenceInputs(t *testing.T) {
	inputs := GraphInputs(seqModel(t))
	opts := Options{Batch: 3, Samples: 3, Spec: Spec{Shapes: map[string][]int64{"ids": {-1, 7}}, Values: map[string]float64{"sr": 16000}}}
	b := firstBatch(t, "random", inputs, opts)
	wantDims := [][]int64{{3, 7}, {3, 7}, {2, 3, 16}, {}}
	for i, w := range wantDims {
		if !slices.Equal(b.Tensors[i].Dims, w) {
			t.Errorf("input %q dims %v, want %v", inputs[i].Name, b.Tensors[i].Dims, w)
		}
	}
	ids, _ := b.Tensors[0].Int64s()
	if slices.Min(ids) < 0 || slices.Max(ids) >= 100 || slices.Max(ids) == 0 {
		t.Errorf("ids %v: want random ids in [0, 100)", ids)
	}
	mask, _ := b.Tensors[1].Int64s()
	if slices.Min(mask) != 1 || slices.Max(mask) != 1 {
		t.Errorf("mask %v, want ones", mask)
	}
	h0, _ := b.Tensors[2].Float32s()
	if slices.Min(h0) != 0 || slices.Max(h0) != 0 {
		t.Errorf("state not zeros")
	}
	sr, _ := b.Tensors[3].Int64s()
	if len(sr) != 1 || sr[0] != 16000 {
		t.Errorf("sr %v, want 16000", sr)
	}
	// A dynamic dim nothing fixes names the flag to give.
	_, err := Open("random", inputs, Options{Batch: 2})
	wantErr(t, err, `input "ids"`, "dim 1 (seq) is dynamic", "--shape ids:?,<seq>")
	// --value and --batch-axis for inputs the model lacks are errors.
	_, err = Open("random", inputs, Options{Spec: Spec{Values: map[string]float64{"rate": 1}}})
	wantErr(t, err, "--value rate", `no input "rate"`)
}

// A --range named for a mask draws it at random (padded masks) instead of
// the ones a mask gets by default.
func TestRangeMakesAMaskRandom(t *testing.T) {
	inputs := GraphInputs(seqModel(t))
	opts := Options{Batch: 4, Samples: 4, Spec: Spec{Shapes: map[string][]int64{"ids": {-1, 16}},
		Values: map[string]float64{"sr": 16000}, Ranges: map[string][2]float64{"attention_mask": {0, 2}}}}
	b := firstBatch(t, "random", inputs, opts)
	mask, _ := b.Tensors[1].Int64s()
	if slices.Min(mask) != 0 || slices.Max(mask) != 1 {
		t.Errorf("mask %v, want 0s and 1s", mask)
	}
	if lines := Describe(inputs, opts); !strings.Contains(strings.Join(lines, "\n"), `"attention_mask" int64[batch,seq]: integers in [0, 2)`) {
		t.Errorf("Describe: %q", lines)
	}
}

func TestNpyFeedsOneInputAndFillsState(t *testing.T) {
	b := testgraph.New(t, "rnn", 17)
	addInput(b, "x", graph.Float, graph.Shape{dyn("batch"), st(5)})
	addInput(b, "h0", graph.Float, graph.Shape{st(1), dyn("batch"), st(4)})
	inputs := GraphInputs(b.Graph)

	p := writeNpyFile(t, t.TempDir(), "x.npy", graph.Float, []int64{6, 5}, make([]byte, 6*5*4))
	src, err := Open(p, inputs, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 2 || !slices.Equal(bs[1].Tensors[1].Dims, []int64{1, 2, 4}) || bs[1].Samples != 2 {
		t.Fatalf("batches %d, last state dims %v", len(bs), bs[1].Tensors[1].Dims)
	}
	// A second per-sample input cannot be made up.
	addInput(b, "y", graph.Float, graph.Shape{dyn("batch"), st(5)})
	_, err = Open(p, GraphInputs(b.Graph), Options{})
	wantErr(t, err, "feeds one input")
}

func TestStaticBatchFilesDropTheRemainder(t *testing.T) {
	inputs := []Input{{Name: "x", DType: graph.Float, Shape: graph.StaticShape(4, 5)}}
	p := writeNpyFile(t, t.TempDir(), "x.npy", graph.Float, []int64{10, 5}, make([]byte, 10*5*4))
	src, err := Open(p, inputs, Options{Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 2 || bs[0].Samples != 4 || bs[1].Samples != 4 {
		t.Fatalf("%d batches", len(bs))
	}
	_, err = Open(p, []Input{{Name: "x", DType: graph.Float, Shape: graph.StaticShape(16, 5)}}, Options{})
	wantErr(t, err, "10 samples do not fill one batch of 16")
}

// kvDecoderInputs are a decoder's inputs with a KV cache: ids [batch,
// seq], a mask over past and new tokens [batch, past + seq] and one cache
// [batch, 2, past, 4].
func kvDecoderInputs(t *testing.T) []Input {
	b := testgraph.New(t, "kv", 17)
	addInput(b, "input_ids", graph.Int64, graph.Shape{dyn("batch_size"), dyn("sequence_length")})
	addInput(b, "attention_mask", graph.Int64, graph.Shape{dyn("batch_size"), dyn("past_sequence_length + sequence_length")})
	past := addInput(b, "past_key_values.0.key", graph.Float, graph.Shape{dyn("batch_size"), st(2), dyn("past_sequence_length"), st(4)})
	b.Output(b.Node("n", "Identity", past).Output(0), 1, 2, 0, 4)
	inputs := GraphInputs(b.Graph)
	return inputs
}

// TestShapesFromDataKVCache: data that gives every input of a decoder
// with a KV cache (ids [4, 8], a cache of past length 4, a mask over 12)
// shapes random data as it is: the cache's past length comes from the
// data too, not the 0 it resolves to on its own, so the mask and the ids
// agree (the pass check's random inputs used to make an 8-long sequence,
// a 12-long mask and an empty cache); and with --shape on the ids alone,
// the rest still follows the data.
func TestShapesFromDataKVCache(t *testing.T) {
	inputs := kvDecoderInputs(t)
	npz := writeZip(t, filepath.Join(t.TempDir(), "kv.npz"),
		zipMember{name: "input_ids.npy", data: npyBytes(t, graph.Int64, []int64{4, 8}, make([]byte, 4*8*8))},
		zipMember{name: "attention_mask.npy", data: npyBytes(t, graph.Int64, []int64{4, 12}, make([]byte, 4*12*8))},
		zipMember{name: "past_key_values.0.key.npy", data: npyBytes(t, graph.Float, []int64{4, 2, 4, 4}, make([]byte, 4*2*4*4*4))})
	want := map[string][]int64{"input_ids": {-1, 8}, "attention_mask": {-1, 12}, "past_key_values.0.key": {-1, 2, 4, 4}}
	for _, given := range []map[string][]int64{nil, {"input_ids": {-1, 8}}} {
		shapes, _, err := ShapesFromData(npz, inputs, Options{Spec: Spec{Shapes: given}})
		if err != nil || !maps.EqualFunc(shapes, want, slices.Equal) {
			t.Fatalf("--shape %v: shapes %v, %v; want %v", given, shapes, err, want)
		}
		got, err := ResolveShapes(inputs, Options{Batch: 2, Spec: Spec{Shapes: shapes}})
		if err != nil || !slices.EqualFunc(got, [][]int64{{2, 8}, {2, 12}, {2, 2, 4, 4}}, slices.Equal) {
			t.Errorf("random data shaped by it: %v, %v", got, err)
		}
	}
}

// TestKVCacheFirstStep: a decoder with a KV cache declares the cache's
// length as past_sequence_length and the mask over past and new tokens as
// their sum. Unless --shape says otherwise, random data is the first step:
// an empty cache and a mask as long as the ids; a length given on one
// input is the length of every input sharing its symbol.
func TestKVCacheFirstStep(t *testing.T) {
	inputs := kvDecoderInputs(t)
	for _, c := range []struct {
		shapes map[string][]int64
		want   [][]int64
	}{
		{map[string][]int64{"input_ids": {-1, 5}}, [][]int64{{3, 5}, {3, 5}, {3, 2, 0, 4}}},
		{map[string][]int64{"input_ids": {-1, 1}, "past_key_values.0.key": {-1, 2, 9, 4}}, [][]int64{{3, 1}, {3, 10}, {3, 2, 9, 4}}},
	} {
		got, err := ResolveShapes(inputs, Options{Batch: 3, Spec: Spec{Shapes: c.shapes}})
		if err != nil || !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("--shape %v: %v, %v; want %v", c.shapes, got, err, c.want)
		}
	}
	if _, err := ResolveShapes(inputs, Options{Batch: 1}); err == nil || !strings.Contains(err.Error(), "sequence_length") {
		t.Errorf("no --shape: %v, want the sequence length asked for", err)
	}
	batch := firstBatch(t, "random", inputs, Options{Batch: 2, Samples: 2, Spec: Spec{Shapes: map[string][]int64{"input_ids": {-1, 4}}}})
	if p := batch.Tensors[2]; !slices.Equal(p.Dims, []int64{2, 2, 0, 4}) || p.ByteSize() != 0 {
		t.Errorf("past: %v with %d bytes, want an empty [2 2 0 4]", p.Dims, p.ByteSize())
	}
}

// TestIntegerDivisor: an integer input that divides (Mod, Div) gets
// random values from [1, 10), and a data file with a zero there is
// refused by name before ONNX Runtime would fault (SIGFPE) on it.
func TestIntegerDivisor(t *testing.T) {
	b := testgraph.New(t, "mod", 17)
	x := b.TypedValue("x", graph.Int32, 4)
	y := b.TypedValue("y", graph.Int32, 4)
	b.Graph.Inputs = append(b.Graph.Inputs, x, y)
	b.Output(b.Node("m", "Mod", x, y).Output(0), 4)
	inputs := GraphInputs(b.Graph)
	if inputs[0].Divisor || !inputs[1].Divisor {
		t.Fatalf("divisor flags %v %v, want y only", inputs[0].Divisor, inputs[1].Divisor)
	}
	src, err := Open("random", inputs, Options{High: 1, Samples: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range readAll(t, src) {
		if k, zero := firstZero(batch.Tensors[1]); zero {
			t.Fatalf("random divisor holds 0 at %d", k)
		}
	}
	le := func(vs ...int32) []byte {
		out := make([]byte, 0, 4*len(vs))
		for _, v := range vs {
			out = append(out, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
		return out
	}
	npz := writeZip(t, filepath.Join(t.TempDir(), "d.npz"),
		zipMember{name: "x.npy", data: npyBytes(t, graph.Int32, []int64{4}, le(1, 2, 3, 4))},
		zipMember{name: "y.npy", data: npyBytes(t, graph.Int32, []int64{4}, le(1, 2, 0, 4))})
	src, err = Open(npz, inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Next()
	wantErr(t, err, `input "y" holds 0 at element 2`)
}
