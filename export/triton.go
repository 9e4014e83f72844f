package export

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/ort"
)

// TritonOptions say what to write into a Triton model repository.
type TritonOptions struct {
	Name      string // the model's name and folder; default: the model file's name without .onnx
	ModelPath string // the .onnx written as 1/model.onnx
	// Profile is the high-throughput profile config.pbtxt serves: its batch
	// sets max_batch_size and the preferred batch, its threads ORT's.
	Profile Profile
	// LowLatency, when set, is written as configs/low_latency.pbtxt, which
	// Triton serves instead with --model-config-name=low_latency.
	LowLatency Profile
	// MaxBatchSize is the largest batch clients and the batcher may send;
	// default the profile's batch rounded up to a power of two. Ignored
	// (0) when the model cannot batch.
	MaxBatchSize int
	// MaxQueueDelayUs is how long the dynamic batcher waits to fill a
	// batch; default half the profile's p50, between 100 µs and 10 ms, so
	// waiting adds at most half a batch's run time.
	MaxQueueDelayUs int
	// InstanceCount is the number of model instances; default Cores
	// divided by the profile's threads, so the instances fill the cores.
	InstanceCount int
	Cores         int // the server's cores (default runtime.NumCPU())
}

// TritonServing is how the configs of a model repository serve their
// profiles: the values TritonOptions leaves to be derived (from the
// profiles, the model and the cores) as they were written.
type TritonServing struct {
	// MaxBatchSize is config.pbtxt's max_batch_size (0: the model cannot
	// batch, and there is no dynamic batcher).
	MaxBatchSize int `json:"max_batch_size"`
	// MaxQueueDelayUs is the dynamic batcher's delay in config.pbtxt (0:
	// no batcher).
	MaxQueueDelayUs int `json:"max_queue_delay_us,omitempty"`
	// Instances is config.pbtxt's instance count, LowLatencyInstances
	// configs/low_latency.pbtxt's (0: not written).
	Instances           int `json:"instances"`
	LowLatencyInstances int `json:"low_latency_instances,omitempty"`
	// Cores is the server's cores the instance counts were derived from.
	Cores int `json:"cores"`
}

// Queue delay bounds: below 100 µs a batch hardly gathers; past 10 ms the
// wait dominates the latency of a CPU model.
const (
	minQueueDelayUs = 100
	maxQueueDelayUs = 10_000
)

// tritonDataTypes maps ONNX element types to the Triton types the ONNX
// Runtime backend supports (Triton's model_configuration.md, "Datatypes";
// TYPE_BF16 has no ONNX Runtime entry there).
var tritonDataTypes = map[graph.DataType]string{
	graph.Bool: "TYPE_BOOL", graph.Uint8: "TYPE_UINT8", graph.Uint16: "TYPE_UINT16",
	graph.Uint32: "TYPE_UINT32", graph.Uint64: "TYPE_UINT64", graph.Int8: "TYPE_INT8",
	graph.Int16: "TYPE_INT16", graph.Int32: "TYPE_INT32", graph.Int64: "TYPE_INT64",
	graph.Float16: "TYPE_FP16", graph.Float: "TYPE_FP32", graph.Double: "TYPE_FP64",
	graph.String: "TYPE_STRING",
}

// tritonTensor is one input or output as config.pbtxt declares it.
type tritonTensor struct {
	name, dataType string
	dims           []int64 // without the batch dim when the model batches
	reshape        bool    // the model's shape is empty ([] after the batch dim): dims [1], reshape to []
}

// tritonModel is what both configs of a model share.
type tritonModel struct {
	opts            TritonOptions
	maxBatch        int
	inputs, outputs []tritonTensor
}

// TritonConfig returns the config.pbtxt for m served with opts.Profile.
func TritonConfig(m *graph.Model, opts TritonOptions) ([]byte, error) {
	t, err := newTritonModel(m, opts)
	if err != nil {
		return nil, err
	}
	return t.config(opts.Profile, true), nil
}

// WriteTriton writes dir/model_repository/<name>/1/model.onnx and its
// config.pbtxt (and configs/low_latency.pbtxt when opts.LowLatency is set),
// each file atomically, the model first so a config never names a missing
// model. It returns how the configs serve the profiles.
func WriteTriton(dir string, opts TritonOptions) (TritonServing, error) {
	m, err := graph.LoadFile(opts.ModelPath)
	if err != nil {
		return TritonServing{}, err
	}
	defer m.Close()
	t, err := newTritonModel(m, opts)
	if err != nil {
		return TritonServing{}, err
	}
	serving := TritonServing{MaxBatchSize: t.maxBatch, Instances: t.instances(opts.Profile), Cores: t.opts.Cores}
	if t.maxBatch > 1 {
		serving.MaxQueueDelayUs = t.queueDelayUs(opts.Profile)
	}
	if opts.LowLatency.Batch > 0 {
		serving.LowLatencyInstances = t.instances(opts.LowLatency)
	}
	if err := t.write(dir, m); err != nil {
		return TritonServing{}, err
	}
	return serving, nil
}

// write writes the model and its configs under dir.
func (t *tritonModel) write(dir string, m *graph.Model) error {
	opts := t.opts
	modelDir := filepath.Join(dir, "model_repository", t.opts.Name)
	configs := map[string][]byte{filepath.Join(modelDir, "config.pbtxt"): t.config(opts.Profile, true)}
	if opts.LowLatency.Batch > 0 {
		configs[filepath.Join(modelDir, "configs", "low_latency.pbtxt")] = t.config(opts.LowLatency, false)
	}
	modelPath := filepath.Join(modelDir, "1", "model.onnx")
	if err := os.MkdirAll(filepath.Dir(modelPath), 0o755); err != nil {
		return err
	}
	if err := graph.Save(m, modelPath, graph.SaveOptions{}); err != nil {
		return fmt.Errorf("%s: %w", modelPath, err)
	}
	for _, path := range slices.Sorted(maps.Keys(configs)) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(path, configs[path]); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

func newTritonModel(m *graph.Model, opts TritonOptions) (*tritonModel, error) {
	if opts.Name == "" && opts.ModelPath != "" {
		opts.Name = strings.TrimSuffix(filepath.Base(opts.ModelPath), ".onnx")
	}
	if opts.Name == "" || opts.Name == "." || opts.Name == ".." || strings.ContainsAny(opts.Name, `/\`+"\x00") {
		return nil, fmt.Errorf("triton model name %q: it names the model's folder, so it must be a plain file name", opts.Name)
	}
	if opts.Profile.Batch < 1 {
		return nil, fmt.Errorf("triton model %q: no high-throughput profile (batch %d); run Sweep and ChooseProfiles", opts.Name, opts.Profile.Batch)
	}
	if opts.MaxBatchSize != 0 && opts.MaxBatchSize < opts.Profile.Batch {
		return nil, fmt.Errorf("triton model %q: max batch size %d is below the profile's batch %d", opts.Name, opts.MaxBatchSize, opts.Profile.Batch)
	}
	if opts.Cores <= 0 {
		opts.Cores = runtime.NumCPU()
	}
	ins, outs := ort.Interface(m)
	t := &tritonModel{opts: opts}
	if batchable(ins) && batchable(outs) {
		t.maxBatch = opts.MaxBatchSize
		if t.maxBatch == 0 {
			t.maxBatch = nextPowerOfTwo(opts.Profile.Batch)
		}
	}
	var err error
	if t.inputs, err = t.tensors("input", ins); err != nil {
		return nil, err
	}
	if t.outputs, err = t.tensors("output", outs); err != nil {
		return nil, err
	}
	return t, nil
}

// batchable reports whether every tensor has a dynamic dim 0, which
// Triton's batchers need: they batch along it.
func batchable(ios []ort.IO) bool {
	for _, io := range ios {
		if len(io.Shape) == 0 || io.Shape[0] >= 0 {
			return false
		}
	}
	return len(ios) > 0
}

func nextPowerOfTwo(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

func (t *tritonModel) tensors(kind string, ios []ort.IO) ([]tritonTensor, error) {
	var out []tritonTensor
	for _, io := range ios {
		dt, ok := tritonDataTypes[io.DType]
		if !ok {
			return nil, fmt.Errorf("triton model %q: %s %q has data type %s, which Triton's ONNX Runtime backend does not support", t.opts.Name, kind, io.Name, io.DType)
		}
		if io.Shape == nil {
			return nil, fmt.Errorf("triton model %q: %s %q has no declared shape; Triton needs its rank (run optc optimize to infer shapes)", t.opts.Name, kind, io.Name)
		}
		dims := io.Shape
		if t.maxBatch > 0 {
			dims = dims[1:]
		}
		tt := tritonTensor{name: io.Name, dataType: dt, dims: dims}
		if len(dims) == 0 { // Triton refuses empty dims
			tt.dims, tt.reshape = []int64{1}, true
		}
		out = append(out, tt)
	}
	return out, nil
}

// config renders config.pbtxt in protobuf text format. Field names and
// layout follow Triton's model_configuration.md; the ONNX Runtime thread
// parameter is the onnxruntime_backend README's ("Model Config Options":
// parameters { key: "intra_op_thread_count" value: { string_value: "N" } }).
func (t *tritonModel) config(p Profile, dynamicBatching bool) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if t.opts.ModelPath != "" {
		w("# Written by optc for %s.", filepath.Base(t.opts.ModelPath))
	}
	for _, q := range []Profile{t.opts.Profile, t.opts.LowLatency} {
		reason := strings.Join(strings.Fields(q.Reason), " ")
		switch {
		case q.Batch > 0 && q.Throughput > 0:
			p99 := fmt.Sprintf("%.3f ms", q.P99Ms)
			if q.P99Unreported {
				p99 = "- (too few runs)"
			}
			w("# %s: batch %d, %s: p50 %.3f ms, p99 %s, %.0f samples/s (%s)",
				q.Name, q.Batch, threadsText(q.Threads), q.P50Ms, p99, q.Throughput, reason)
		case q.Batch > 0: // not measured: pinned by the caller
			w("# %s: batch %d, %s (%s)", q.Name, q.Batch, threadsText(q.Threads), reason)
		}
	}
	w("# This file serves %s.", p.Name)
	w("name: %s", quote(t.opts.Name))
	w(`platform: "onnxruntime_onnx"`)
	w(`backend: "onnxruntime"`)
	w("max_batch_size: %d", t.maxBatch)
	for _, group := range []struct {
		field   string
		tensors []tritonTensor
	}{{"input", t.inputs}, {"output", t.outputs}} {
		w("%s [", group.field)
		for i, tt := range group.tensors {
			w("  {")
			w("    name: %s", quote(tt.name))
			w("    data_type: %s", tt.dataType)
			w("    dims: %s", dimsText(tt.dims))
			if tt.reshape {
				w("    reshape: { shape: [ ] }")
			}
			if i < len(group.tensors)-1 {
				w("  },")
			} else {
				w("  }")
			}
		}
		w("]")
	}
	if dynamicBatching && t.maxBatch > 1 {
		w("dynamic_batching {")
		w("  preferred_batch_size: [ %d ]", p.Batch)
		w("  max_queue_delay_microseconds: %d", t.queueDelayUs(p))
		w("}")
	}
	w("instance_group [")
	w("  {")
	w("    count: %d", t.instances(p))
	w("    kind: KIND_CPU")
	w("  }")
	w("]")
	if p.Threads > 0 {
		w("parameters {")
		w(`  key: "intra_op_thread_count"`)
		w("  value: { string_value: %s }", quote(strconv.Itoa(p.Threads)))
		w("}")
	}
	return []byte(b.String())
}

// queueDelayUs is the dynamic batcher's delay serving p: the option, else
// half p's p50 within the bounds.
func (t *tritonModel) queueDelayUs(p Profile) int {
	if t.opts.MaxQueueDelayUs > 0 {
		return t.opts.MaxQueueDelayUs
	}
	return min(max(int(p.P50Ms*1000/2), minQueueDelayUs), maxQueueDelayUs)
}

// instances is the instance count serving p: the option, else as many as
// p's threads fit in the cores.
func (t *tritonModel) instances(p Profile) int {
	if t.opts.InstanceCount > 0 {
		return t.opts.InstanceCount
	}
	if p.Threads <= 0 {
		return 1 // ORT's default threads use every core
	}
	return max(t.opts.Cores/p.Threads, 1)
}

func dimsText(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[ " + strings.Join(parts, ", ") + " ]"
}

// quote writes s as a protobuf text-format string: UTF-8 passes through,
// quotes, backslashes and control bytes are escaped (octal for the rest).
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
