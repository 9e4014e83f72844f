package calibrate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"runtime"
	"slices"
	"unsafe"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/parallel"
	"github.com/optc-dev/optc/ort"
)

// Collect runs m in ONNX Runtime over src, batch by batch, and gathers the
// statistics of the named values (see DefaultTensors). A copy of m with
// the values exposed as outputs is run (m is not changed); graph inputs are
// read from the batches themselves. src must yield the inputs of
// data.GraphInputs(m.Graph), in that order. ort.Init must have succeeded.
//
// Only the per-tensor statistics are kept between batches, so memory does
// not grow with the number of samples; a batch whose activations pass
// opts.MaxRunBytes is run more than once, each run fetching a part of
// them (Stats.Runs says how many), so memory does not grow with the
// model's activations either. Each tensor sees the same values in the
// same batches however they are split: the statistics are identical. A NaN or infinity in a tensor is an
// error naming it and the batch (left out and counted instead with
// opts.SkipNonFinite); no batches at all is the error "calibration data is
// empty".
func Collect(m *graph.Model, src data.Source, tensors []string, opts Options) (*Stats, error) {
	if len(tensors) == 0 {
		return nil, fmt.Errorf("no tensors to calibrate")
	}
	stats, err := NewStats(tensors, opts)
	if err != nil {
		return nil, err
	}
	if stats.ModelDigest, err = graph.Digest(m); err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}

	inputs, _ := ort.Interface(m)
	inputIndex := map[string]int{}
	for i, in := range inputs {
		inputIndex[in.Name] = i
	}
	expose, err := exposed(m, stats.names, inputIndex)
	if err != nil {
		return nil, err
	}

	// The first batch sizes the runs: a batch whose exposed activations
	// pass opts.MaxRunBytes is run several times, each run fetching some
	// of them (see planRuns).
	batch, err := src.Next()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("calibration data is empty")
	}
	if err != nil {
		return nil, fmt.Errorf("calibrate: batch 0: %w", err)
	}
	limit := opts.MaxRunBytes
	if limit <= 0 {
		limit = DefaultMaxRunBytes
	}
	groups, err := SplitByBytes(m, expose, batch.Tensors, limit)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	parts, err := OpenParts(m, groups, opts.Session)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	defer parts.Close()
	stats.Runs = len(groups)
	// fetched is where each exposed value comes from.
	fetched := map[string]place{}
	for i, g := range groups {
		for j, n := range g {
			fetched[n] = place{i, j}
		}
	}

	if opts.Progress != nil {
		opts.Progress(0)
	}
	digest := newDataDigest(inputs)
	for ; !errors.Is(err, io.EOF); batch, err = src.Next() {
		if err != nil {
			return nil, fmt.Errorf("calibrate: batch %d: %w", stats.Batches, err)
		}
		if stats.Batches > 0 && opts.Stop != nil && opts.Stop(stats.Samples) {
			stats.Stopped = true
			break
		}
		if err := digest.add(batch.Tensors); err != nil {
			return nil, fmt.Errorf("calibrate: batch %d: %w", stats.Batches, err)
		}
		// The inputs' statistics come with the first run, in the order
		// of stats.names as far as the runs allow.
		observed := 0
		for i := range groups {
			n, err := stats.observeRun(parts, i, batch, inputIndex, fetched)
			if err != nil {
				return nil, fmt.Errorf("calibrate: batch %d: %w", stats.Batches, err)
			}
			observed += n
		}
		if observed != len(stats.names) {
			return nil, fmt.Errorf("calibrate: batch %d: %d of %d tensors observed", stats.Batches, observed, len(stats.names))
		}
		stats.Batches++
		stats.Samples += int64(batch.Samples)
		if opts.Progress != nil {
			opts.Progress(stats.Samples)
		}
	}
	stats.DataDigest = digest.sum()
	return stats, nil
}

// exposed are the calibrated tensors that are not model inputs, each
// checked to be a floating-point value the model makes.
func exposed(m *graph.Model, names []string, inputIndex map[string]int) ([]string, error) {
	var expose []string
	for _, n := range names {
		if _, ok := inputIndex[n]; !ok {
			expose = append(expose, n)
		}
	}
	clone, carrier, err := exposedCopy(m, expose)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	for _, n := range expose {
		if v := clone.Graph.Value(carrier[n]); v != nil && v.Type != nil && v.Type.Elem != 0 && !v.Type.Elem.IsFloat() {
			return nil, fmt.Errorf("calibrate: value %q is %s, not a floating-point tensor", n, v.Type.Elem)
		}
	}
	return expose, nil
}

// observeRun runs group i of a batch and adds what it fetched (and, in
// the first run, the inputs) to the statistics; it returns how many
// tensors it observed.
func (s *Stats) observeRun(parts *Parts, i int, batch *data.Batch, inputIndex map[string]int, fetched map[string]place) (int, error) {
	outs, err := parts.Run(i, batch.Tensors)
	if err != nil {
		return 0, err
	}
	observed := 0
	var todo []observation
	for _, n := range s.names {
		in, isInput := inputIndex[n]
		at := fetched[n]
		if isInput && i > 0 || !isInput && at.group != i {
			continue
		}
		var t *graph.Tensor
		if isInput {
			t = batch.Tensors[in]
		} else {
			t = outs[at.index]
		}
		observed++
		if slices.Contains(t.Dims, 0) {
			continue // a subgraph that did not run this batch (the other If branch)
		}
		// Infinities the float model makes itself (an attention mask's
		// -Inf before Softmax) are its design, not bad data: they are left
		// out of the range. In the input data, and NaN anywhere, they are
		// errors.
		todo = append(todo, observation{name: n, t: t, skipInf: !isInput})
	}
	if err := observeAll(s, todo); err != nil {
		return 0, err
	}
	// A run's activations are the largest thing a build holds; collecting
	// them now, before the next run makes as many again, keeps the heap
	// near one run's worth instead of two. They hold no pointers, so the
	// collection costs little next to the run.
	outs, todo = nil, nil
	runtime.GC()
	return observed, nil
}

// place is where an exposed value comes from: its group, and its place
// in the group.
type place struct{ group, index int }

// observation is one tensor of a batch to add to the statistics.
type observation struct {
	name    string
	t       *graph.Tensor
	skipInf bool
}

// observeAll adds a run's tensors to the statistics, several at once
// (one goroutine per core): each touches only its own tensor's
// statistics, so the result is the one observing them in turn gives, and
// so is the error (the first in todo's order).
func observeAll(s *Stats, todo []observation) error {
	skipped := make([]int64, len(todo))
	err := parallel.For(len(todo), func(k int) (err error) {
		o := todo[k]
		skipped[k], err = observeTensor(s, o.name, o.t, o.skipInf)
		return err
	})
	if err != nil {
		return err
	}
	for _, n := range skipped {
		s.NonFinite += n
	}
	return nil
}

// observeTensor adds a batch of tensor t as values of name; float32 data
// is read in place, other float types through a converted copy. It
// returns the non-finite values left out (see Stats.observeValues).
func observeTensor(s *Stats, name string, t *graph.Tensor, skipInf bool) (int64, error) {
	if !t.DType.IsFloat() {
		return 0, fmt.Errorf("tensor %q is %s, not a floating-point tensor", name, t.DType)
	}
	if t.DType == graph.Float {
		b, err := t.Bytes()
		if err != nil {
			return 0, err
		}
		if vals, ok := float32View(b); ok {
			return s.observeValues(name, vals, skipInf)
		}
		return s.observe(name, len(b)/4, func(i int) float32 {
			return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}, skipInf)
	}
	vals, err := t.Float32s()
	if err != nil {
		return 0, err
	}
	return s.observeValues(name, vals, skipInf)
}

// float32View reads little-endian float32 bytes in place where the host is
// little-endian and the bytes are aligned for float32 (ORT's outputs are),
// which lets Observe loop over them directly.
func float32View(b []byte) ([]float32, bool) {
	if len(b) < 4 || !littleEndianHost || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), true
}

var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// dataDigest hashes the streamed input data per input, so that the result
// does not depend on how the samples were batched.
type dataDigest struct {
	inputs []ort.IO
	h      []hash.Hash
	dims   [][]int64
}

func newDataDigest(inputs []ort.IO) *dataDigest {
	d := &dataDigest{inputs: inputs, dims: make([][]int64, len(inputs))}
	for range inputs {
		d.h = append(d.h, sha256.New())
	}
	return d
}

func (d *dataDigest) add(ts []*graph.Tensor) error {
	if len(ts) != len(d.inputs) {
		return fmt.Errorf("%d input tensors for %d model inputs", len(ts), len(d.inputs))
	}
	for i, t := range ts {
		var sample []int64
		if len(t.Dims) > 0 {
			sample = t.Dims[1:]
		}
		if d.dims[i] == nil {
			d.dims[i] = append([]int64{int64(t.DType)}, sample...)
		} else if !slices.Equal(d.dims[i][1:], sample) || d.dims[i][0] != int64(t.DType) {
			// A change of per-sample shape is hashed in place.
			d.h[i].Write([]byte("shape"))
			writeInts(d.h[i], append([]int64{int64(t.DType)}, sample...))
		}
		b, err := t.Bytes()
		if err != nil {
			return err
		}
		d.h[i].Write(b)
	}
	return nil
}

func (d *dataDigest) sum() string {
	all := sha256.New()
	for i, in := range d.inputs {
		all.Write([]byte(in.Name))
		all.Write([]byte{0})
		writeInts(all, d.dims[i])
		all.Write(d.h[i].Sum(nil))
	}
	return hex.EncodeToString(all.Sum(nil))
}

func writeInts(h hash.Hash, v []int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(v)))
	h.Write(b[:])
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	}
}

// quantizedOps have their non-constant inputs and outputs calibrated.
var quantizedOps = map[string]bool{"Conv": true, "ConvTranspose": true, "Gemm": true, "MatMul": true}

// outputOps have their outputs calibrated.
var outputOps = map[string]bool{
	"Relu": true, "Clip": true, "Add": true, "Mul": true, "Concat": true,
	"MaxPool": true, "AveragePool": true, "GlobalAveragePool": true,
	"Resize": true, "HardSigmoid": true, "Sigmoid": true, "HardSwish": true, "LeakyRelu": true,
}

// DefaultTensors returns the values of m's main graph that quantization
// needs ranges for: the non-constant inputs and the outputs of
// Conv/ConvTranspose/Gemm/MatMul (default domain), and the outputs of
// Relu, Clip, Add, Mul, Concat, MaxPool, AveragePool, GlobalAveragePool,
// Resize, HardSigmoid, Sigmoid and HardSwish. Values declared with a
// non-float element type are left out. The order is that of the nodes
// (inputs before outputs), without duplicates.
func DefaultTensors(m *graph.Model) []string {
	var out []string
	seen := map[string]bool{}
	addValue := func(v *graph.Value) {
		if v == nil || v.Name == "" || seen[v.Name] || isConstant(v) {
			return
		}
		if v.Type != nil && v.Type.Elem != 0 && !v.Type.Elem.IsFloat() {
			return
		}
		seen[v.Name] = true
		out = append(out, v.Name)
	}
	var nodes []*graph.Node
	m.Graph.Walk(func(g *graph.Graph) { nodes = append(nodes, g.Nodes...) })
	for _, n := range nodes {
		if n.Domain != "" && n.Domain != "ai.onnx" {
			continue
		}
		if quantizedOps[n.OpType] {
			for _, v := range n.Inputs() {
				addValue(v)
			}
		}
		if quantizedOps[n.OpType] || outputOps[n.OpType] {
			for _, v := range n.Outputs() {
				addValue(v)
			}
		}
	}
	return out
}

// isConstant reports whether v is an initializer or a Constant's output.
func isConstant(v *graph.Value) bool {
	if v.Const != nil || v.Sparse != nil {
		return true
	}
	p := v.Producer()
	return p != nil && p.OpType == "Constant"
}
