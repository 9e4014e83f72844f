package calibrate

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

func loadMNIST(t testing.TB) *graph.Model {
	t.Helper()
	m, err := graph.LoadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func collectMNIST(t testing.TB, m *graph.Model, file string, batch, samples int, tensors []string, opts Options) *Stats {
	t.Helper()
	src, err := data.Open(testenv.Data(t, file), data.GraphInputs(m.Graph), data.Options{Batch: batch, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s, err := Collect(m, src, tensors, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDefaultTensorsMNIST(t *testing.T) {
	m := loadMNIST(t)
	got := DefaultTensors(m)
	var ops []string
	for _, n := range got {
		v := m.Graph.Value(n)
		if v == nil {
			t.Fatalf("%q is not a value", n)
		}
		if v.Const != nil {
			t.Errorf("constant %q listed", n)
		}
		op := "input"
		if p := v.Producer(); p != nil {
			op = p.OpType
		}
		ops = append(ops, op)
	}
	// input -> Conv, its output (BN follows), Relu -> Conv ..., Flatten -> Gemm.
	want := "input Conv Relu Conv Relu Conv Relu Flatten Gemm"
	if strings.Join(ops, " ") != want {
		t.Errorf("DefaultTensors producers %v, want %s (%v)", ops, want, got)
	}
	again := DefaultTensors(m)
	if strings.Join(again, ",") != strings.Join(got, ",") {
		t.Error("DefaultTensors is not deterministic")
	}
}

func TestCollectMNIST(t *testing.T) {
	ortenv.Require(t)
	m := loadMNIST(t)
	tensors := DefaultTensors(m)
	s64 := collectMNIST(t, m, "mnist/train_images.npy", 64, 512, tensors, Options{})
	s128 := collectMNIST(t, m, "mnist/train_images.npy", 128, 512, tensors, Options{})
	if s64.Samples != 512 || s64.Batches != 8 || s128.Batches != 4 {
		t.Fatalf("samples %d batches %d/%d", s64.Samples, s64.Batches, s128.Batches)
	}
	r64, err := s64.Ranges(MinMax, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r128, err := s128.Ranges(MinMax, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tensors {
		r, ok := r64[n]
		if !ok {
			t.Errorf("no range for %q", n)
			continue
		}
		if r != r128[n] {
			t.Errorf("%q: batch 64 %v, batch 128 %v", n, r, r128[n])
		}
		if !(r.Min < r.Max) {
			t.Errorf("%q: degenerate range %v", n, r)
		}
		if p := m.Graph.Value(n).Producer(); p != nil && p.OpType == "Relu" && r.Min < 0 {
			t.Errorf("Relu output %q: min %v < 0", n, r.Min)
		}
		sum, _ := s64.Summary(n)
		if sum.Batches != 8 || sum.Count == 0 {
			t.Errorf("%q: %+v", n, sum)
		}
	}
	if in := r64["input"]; in.Min != 0 || in.Max > 1 || in.Max < 0.9 {
		t.Errorf("input range %v, want [0, ~1]", in)
	}
	for _, method := range Methods[1:] {
		rs, err := s64.Ranges(method, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range tensors {
			r, mm := rs[n], r64[n]
			if r.Min < mm.Min || r.Max > mm.Max || r.Min > 0 || r.Max <= 0 {
				t.Errorf("%s %q: %v not within minmax %v or excludes 0", method, n, r, mm)
			}
		}
		t.Logf("%s: %v", method, rs)
	}
	if s64.ModelDigest == "" || s64.ModelDigest != s128.ModelDigest {
		t.Errorf("model digests %q %q", s64.ModelDigest, s128.ModelDigest)
	}
	if len(s64.DataDigest) != 64 || s64.DataDigest != s128.DataDigest {
		t.Errorf("the data digest depends on batching: %q %q", s64.DataDigest, s128.DataDigest)
	}
	other := collectMNIST(t, m, "mnist/test_images.npy", 64, 512, tensors, Options{})
	if other.DataDigest == s64.DataDigest {
		t.Error("the data digest did not change with the data")
	}
	fewer := collectMNIST(t, m, "mnist/train_images.npy", 64, 448, tensors, Options{})
	if fewer.DataDigest == s64.DataDigest {
		t.Error("the data digest did not change with the sample count")
	}
	// The model given is not changed.
	if len(m.Graph.Outputs) != 1 {
		t.Errorf("Collect changed the model's outputs: %d", len(m.Graph.Outputs))
	}
}

type emptySource struct{}

func (emptySource) Next() (*data.Batch, error) { return nil, io.EOF }
func (emptySource) Close() error               { return nil }

type nanSource struct{ n int }

func (s *nanSource) Next() (*data.Batch, error) {
	if s.n == 2 {
		return nil, io.EOF
	}
	s.n++
	vals := make([]float32, 2*28*28)
	if s.n == 2 {
		vals[100] = float32(nan())
	}
	t, err := graph.NewFloat32Tensor("input", []int64{2, 1, 28, 28}, vals)
	return &data.Batch{Tensors: []*graph.Tensor{t}, Samples: 2}, err
}
func (s *nanSource) Close() error { return nil }

func nan() float64 { var z float64; return z / z }

func TestCollectErrors(t *testing.T) {
	ortenv.Require(t)
	m := loadMNIST(t)
	tensors := DefaultTensors(m)
	if _, err := Collect(m, emptySource{}, tensors, Options{}); err == nil || err.Error() != "calibration data is empty" {
		t.Errorf("empty data: %v", err)
	}
	_, err := Collect(m, &nanSource{}, tensors, Options{})
	if err == nil || !strings.Contains(err.Error(), `"input"`) || !strings.Contains(err.Error(), "batch 1") {
		t.Errorf("NaN input: %v, want an error naming input and batch 1", err)
	}
	if _, err := Collect(m, emptySource{}, []string{"no_such_value"}, Options{}); err == nil || !strings.Contains(err.Error(), "no_such_value") {
		t.Errorf("unknown tensor: %v", err)
	}
}

// TestCollectProgress: the progress callback sees 0 once the session is
// ready, then every batch with the running sample count.
func TestCollectProgress(t *testing.T) {
	ortenv.Require(t)
	m := loadMNIST(t)
	var seen []int64
	opts := Options{Progress: func(n int64) { seen = append(seen, n) }}
	s := collectMNIST(t, m, "mnist/train_images.npy", 64, 200, DefaultTensors(m), opts)
	if len(seen) != s.Batches+1 || seen[0] != 0 || seen[1] != 64 || seen[len(seen)-1] != 200 {
		t.Errorf("progress %v over %d batches", seen, s.Batches)
	}
}

// A tensor the model itself makes infinite (an attention mask's -Inf;
// here Log of a ReLU's zeros) gets no range, so its readers stay float:
// clamping -Inf to a finite int8 range changes what Softmax computes (a
// BERT-like encoder's cosine fell to 0.90). The tensors around it keep
// theirs.
func TestCollectModelInfinities(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "loginf", 13)
	x := b.Input("x", 4, 8)
	r := b.Node("relu", "Relu", x)
	l := b.Node("log", "Log", r.Output(0))
	b.Output(l.Output(0), 4, 8)
	src, err := data.Open("random", data.GraphInputs(b.Graph), data.Options{Low: -1, High: 1, Samples: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s, err := Collect(b.Model, src, []string{"x", "relu_out", "log_out"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Ranges(MinMax, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rs["log_out"]; ok {
		t.Error("log_out holds -Inf but got a range")
	}
	if _, ok := rs["relu_out"]; !ok {
		t.Error("relu_out got no range")
	}
	if s.NonFinite == 0 {
		t.Error("the infinities were not counted")
	}
}

// TestCollectStop: Stop is asked before every batch after the first with
// the samples so far; collection ends where it says so, only between
// batches, and Stopped says so. A Stop that never fires leaves Stopped
// false even at the data's end.
func TestCollectStop(t *testing.T) {
	ortenv.Require(t)
	m := loadMNIST(t)
	var asked []int64
	opts := Options{Stop: func(n int64) bool { asked = append(asked, n); return n >= 100 }}
	s := collectMNIST(t, m, "mnist/train_images.npy", 64, 512, DefaultTensors(m), opts)
	if !s.Stopped || s.Samples != 128 || s.Batches != 2 || !slices.Equal(asked, []int64{64, 128}) {
		t.Errorf("stopped %v after %d samples, %d batches; asked at %v", s.Stopped, s.Samples, s.Batches, asked)
	}
	full := collectMNIST(t, m, "mnist/train_images.npy", 64, 128, DefaultTensors(m), Options{Stop: func(int64) bool { return false }})
	if full.Stopped || full.Samples != 128 {
		t.Errorf("a stop that never fired: stopped %v after %d samples", full.Stopped, full.Samples)
	}
	// The first 128 samples, stopped or read to the end, give the same
	// statistics.
	a, _ := s.Cache(MinMax, Options{})
	b, _ := full.Cache(MinMax, Options{})
	if a.Data != b.Data || !slices.Equal(a.Tensors, b.Tensors) {
		t.Errorf("a stopped collection differs from one over the same samples")
	}
}
