package export_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

var mnistHigh = export.Profile{Name: export.HighThroughput, Batch: 8, Threads: 1,
	P50Ms: 0.9, P99Ms: 1.4, Throughput: 8500, Reason: "the best throughput"}
var mnistLow = export.Profile{Name: export.LowLatency, Batch: 1, Threads: 2,
	P50Ms: 0.2, P99Ms: 0.5, Throughput: 4800, Reason: "the lowest p50"}

// The whole text for the MNIST CNN (input [N,1,28,28], output [N,10]),
// one field per line, so any change to the format shows here.
const mnistConfig = `# Written by optc for mnist_cnn.onnx.
# high-throughput: batch 8, 1 thread: p50 0.900 ms, p99 1.400 ms, 8500 samples/s (the best throughput)
# low-latency: batch 1, 2 threads: p50 0.200 ms, p99 0.500 ms, 4800 samples/s (the lowest p50)
# This file serves high-throughput.
name: "mnist_cnn"
platform: "onnxruntime_onnx"
backend: "onnxruntime"
max_batch_size: 8
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 1, 28, 28 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 10 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 8 ]
  max_queue_delay_microseconds: 450
}
instance_group [
  {
    count: 4
    kind: KIND_CPU
  }
]
parameters {
  key: "intra_op_thread_count"
  value: { string_value: "1" }
}
`

func TestTritonConfigMNIST(t *testing.T) {
	path := testenv.Model("mnist_cnn.onnx")
	m := testgraph.LoadFile(t, path)
	got, err := export.TritonConfig(m, export.TritonOptions{ModelPath: path, Profile: mnistHigh, LowLatency: mnistLow, Cores: 4})
	if err != nil {
		t.Fatal(err)
	}
	checkStructure(t, got)
	if string(got) != mnistConfig {
		t.Errorf("config.pbtxt:\n%s\nwant:\n%s", got, mnistConfig)
	}
	again, _ := export.TritonConfig(m, export.TritonOptions{ModelPath: path, Profile: mnistHigh, LowLatency: mnistLow, Cores: 4})
	if !bytes.Equal(got, again) {
		t.Error("two calls gave different text")
	}
}

// PaddleOCR cls: x [N,3,48,W] -> [N,2]; a batch of 6 rounds max_batch_size
// up to 8, and explicit options override the derived delay and count.
func TestTritonConfigCls(t *testing.T) {
	path := testenv.Data(t, "ocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
	m := testgraph.LoadFile(t, path)
	high := export.Profile{Name: export.HighThroughput, Batch: 6, Threads: 2, P50Ms: 40}
	got, err := export.TritonConfig(m, export.TritonOptions{Name: "cls", Profile: high, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkStructure(t, got)
	for _, want := range []string{
		`name: "cls"`, "max_batch_size: 8",
		"name: \"x\"\n    data_type: TYPE_FP32\n    dims: [ 3, -1, -1 ]",
		"name: \"softmax_0.tmp_0\"\n    data_type: TYPE_FP32\n    dims: [ 2 ]",
		"preferred_batch_size: [ 6 ]",
		"max_queue_delay_microseconds: 10000", // half of 40 ms, capped at 10 ms
		"count: 1\n", `value: { string_value: "2" }`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "low-latency") {
		t.Errorf("no low-latency profile was given, yet the config names one:\n%s", got)
	}

	got, err = export.TritonConfig(m, export.TritonOptions{Name: "cls", Profile: high, MaxBatchSize: 48, MaxQueueDelayUs: 321, InstanceCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max_batch_size: 48", "preferred_batch_size: [ 6 ]", "max_queue_delay_microseconds: 321", "count: 3\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

// A model whose batch dim is static 1 cannot batch: max_batch_size 0, the
// full shape in dims, no dynamic batcher.
func TestTritonConfigStaticBatch(t *testing.T) {
	m := identityModel(t, graph.Float, graph.StaticShape(1, 4))
	got, err := export.TritonConfig(m, export.TritonOptions{Name: "fixed", Profile: mnistHigh, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkStructure(t, got)
	for _, want := range []string{"max_batch_size: 0\n", "dims: [ 1, 4 ]"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "dynamic_batching") {
		t.Errorf("a model that cannot batch got a dynamic batcher:\n%s", got)
	}
}

// Triton refuses empty dims: a batched input of shape [N] is declared as
// [1] and reshaped to [].
func TestTritonConfigRankOneInput(t *testing.T) {
	m := identityModel(t, graph.Int64, graph.Shape{graph.SymbolicDim("N")})
	got, err := export.TritonConfig(m, export.TritonOptions{Name: "ids", Profile: mnistHigh, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkStructure(t, got)
	want := "data_type: TYPE_INT64\n    dims: [ 1 ]\n    reshape: { shape: [ ] }"
	if strings.Count(string(got), want) != 2 || !strings.Contains(string(got), "max_batch_size: 8") {
		t.Errorf("want input and output as %q with max_batch_size 8:\n%s", want, got)
	}
}

func TestTritonConfigErrors(t *testing.T) {
	dynamic := graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(4)}
	for _, tc := range []struct {
		name string
		m    *graph.Model
		opts export.TritonOptions
		want []string
	}{
		{"bfloat16", identityModel(t, graph.BFloat16, dynamic), export.TritonOptions{Name: "m", Profile: mnistHigh},
			[]string{`input "x"`, "bfloat16"}},
		{"complex", identityModel(t, graph.Complex64, dynamic), export.TritonOptions{Name: "m", Profile: mnistHigh},
			[]string{`input "x"`, "complex64"}},
		{"unknown rank", identityModel(t, graph.Float, nil), export.TritonOptions{Name: "m", Profile: mnistHigh},
			[]string{`input "x"`, "no declared shape"}},
		{"no profile", identityModel(t, graph.Float, dynamic), export.TritonOptions{Name: "m"},
			[]string{"no high-throughput profile"}},
		{"max batch below the profile", identityModel(t, graph.Float, dynamic), export.TritonOptions{Name: "m", Profile: mnistHigh, MaxBatchSize: 4},
			[]string{"max batch size 4", "batch 8"}},
		{"path as name", identityModel(t, graph.Float, dynamic), export.TritonOptions{Name: "a/b", Profile: mnistHigh},
			[]string{`"a/b"`, "plain file name"}},
		{"no name", identityModel(t, graph.Float, dynamic), export.TritonOptions{Profile: mnistHigh},
			[]string{`""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := export.TritonConfig(tc.m, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

func TestWriteTriton(t *testing.T) {
	ortenv.Require(t)
	src := testenv.Model("mnist_cnn.onnx")
	dir := t.TempDir()
	opts := export.TritonOptions{Name: "digits", ModelPath: src, Profile: mnistHigh, LowLatency: mnistLow, Cores: 4}
	serving, err := export.WriteTriton(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	want := []string{
		"model_repository/digits/1/model.onnx",
		"model_repository/digits/config.pbtxt",
		"model_repository/digits/configs/low_latency.pbtxt",
	}
	if !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	repo := filepath.Join(dir, "model_repository", "digits")

	config := testenv.ReadFile(t, filepath.Join(repo, "config.pbtxt"))
	// What WriteTriton says it served is what the configs hold.
	for _, want := range []string{fmt.Sprintf("max_batch_size: %d\n", serving.MaxBatchSize),
		fmt.Sprintf("max_queue_delay_microseconds: %d\n", serving.MaxQueueDelayUs), fmt.Sprintf("count: %d\n", serving.Instances)} {
		if !strings.Contains(string(config), want) || serving.Cores != 4 {
			t.Errorf("serving %+v, but config.pbtxt lacks %q:\n%s", serving, want, config)
		}
	}
	wantConfig, err := export.TritonConfig(testgraph.LoadFile(t, src), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(config, wantConfig) {
		t.Errorf("config.pbtxt differs from TritonConfig:\n%s", config)
	}
	low := testenv.ReadFile(t, filepath.Join(repo, "configs", "low_latency.pbtxt"))
	checkStructure(t, low)
	for _, want := range []string{"# This file serves low-latency.", `name: "digits"`, "max_batch_size: 8",
		fmt.Sprintf("count: %d\n", serving.LowLatencyInstances), "count: 2\n", `value: { string_value: "2" }`} {
		if !strings.Contains(string(low), want) {
			t.Errorf("low_latency.pbtxt lacks %q:\n%s", want, low)
		}
	}
	if strings.Contains(string(low), "dynamic_batching") {
		t.Errorf("the low-latency config waits to batch:\n%s", low)
	}

	// The model is the original, byte for byte (lossless save), and runs.
	model := filepath.Join(repo, "1", "model.onnx")
	if !testenv.SameFile(t, model, src) {
		t.Error("1/model.onnx differs from the original")
	}
	m := testgraph.LoadFile(t, model)
	ins, outs := ort.Interface(m)
	sess, err := ort.NewSession(ort.Source{Path: model, Inputs: ins, Outputs: outs}, ort.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	x, _ := graph.NewFloat32Tensor("input", []int64{2, 1, 28, 28}, make([]float32, 2*28*28))
	res, err := sess.Run([]*graph.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0].Dims, []int64{2, 10}) {
		t.Errorf("output dims %v, want [2 10]", res[0].Dims)
	}

	// Writing again gives the same bytes.
	if _, err := export.WriteTriton(dir, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(testenv.ReadFile(t, filepath.Join(repo, "config.pbtxt")), config) {
		t.Error("a second write changed config.pbtxt")
	}
}

func TestWriteTritonRefusesBadModel(t *testing.T) {
	dir := t.TempDir()
	m := identityModel(t, graph.BFloat16, graph.Shape{graph.SymbolicDim("N")})
	src := filepath.Join(dir, "bf16.onnx")
	if err := graph.Save(m, src, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	_, err := export.WriteTriton(out, export.TritonOptions{ModelPath: src, Profile: mnistHigh})
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("error %v, want one naming input x", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused model left %s behind (%v)", out, err)
	}
}

// pbtxtLine is every line form config.pbtxt uses: a comment, a scalar
// field, a field opening a message or list, a closing bracket, or a
// one-line message.
var pbtxtLine = regexp.MustCompile(`^ *(#.*|[a-z_]+: ("[^"]*"|-?\d+|[A-Z_0-9]+|\[ [-\d, ]*\])|[a-z_]+ [\[{]|[\]}],?|\{|[a-z_]+: \{ [a-z_]+: ("[^"]*"|\[ \]) \})$`)

// checkStructure checks the text without Triton's protobuf schema: every
// line has a known form, brackets balance and nest, and the top-level
// fields a config needs are there once.
func checkStructure(t *testing.T, text []byte) {
	t.Helper()
	var stack []byte
	top := map[string]int{}
	for i, line := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		if !pbtxtLine.MatchString(line) {
			t.Errorf("line %d has an unknown form: %q", i+1, line)
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if len(stack) == 0 {
			top[strings.FieldsFunc(line, func(r rune) bool { return r == ':' || r == ' ' })[0]]++
		}
		for _, c := range []byte(stripStrings(line)) {
			switch c {
			case '{', '[':
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != map[byte]byte{'}': '{', ']': '['}[c] {
					t.Fatalf("line %d: unbalanced %q", i+1, c)
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed %q at the end", stack)
	}
	for _, f := range []string{"name", "platform", "backend", "max_batch_size", "input", "output", "instance_group"} {
		if top[f] != 1 {
			t.Errorf("top-level field %s appears %d times, want once", f, top[f])
		}
	}
}

var quoted = regexp.MustCompile(`"(\\.|[^"\\])*"`)

func stripStrings(line string) string { return quoted.ReplaceAllString(line, `""`) }

// identityModel is y = Identity(x) with x and y of the given type.
func identityModel(t *testing.T, dt graph.DataType, shape graph.Shape) *graph.Model {
	t.Helper()
	g := graph.NewGraph("identity")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	x.Type, y.Type = graph.TensorType(dt, shape), graph.TensorType(dt, shape)
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	if _, err := g.AddNode("Identity", []*graph.Value{x}, []*graph.Value{y}); err != nil {
		t.Fatal(err)
	}
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g, ProducerName: "optc-test"}
}
