package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestDecodeReadsEveryKey(t *testing.T) {
	src := `
model: m.onnx
output: out
force: true
targets: [ort, tensorrt]
opt_level: 1
budget: 3m
shapes:
  x: [1, 3, 48, 192]
batch_axes: {h0: 1}
values: {sr: 16000}
ranges: {ids: [0, 30522]}
int8: true
image: {resize: 256, size: [224, 224], layout: NHWC, color: bgr, scale: 0.5, mean: [1, 2, 3], std: [4, 5, 6]}
calibration: {data: c.npy, samples: 100, batch: 4, seed: 7, method: entropy, percentile: 99.9, moving_average: 0.1, cache: c.json}
prune: {methods: ["channels:auto", "2:4"], reconstruct: false, exclude: [fc], max_accuracy_drop: 2, min_cosine: 0.98, scope: global}
quantize: {reduce_range: "on", format: qoperator, per_channel: false, exclude: [Gemm], keep_first_last: true, max_accuracy_drop: 0.5, min_cosine: 0.99,
  placement: p.json, placement_budget: 30s, weights: int3, block_size: 64, weight_rounding: gptq}
eval: {data: e.npy, labels: l.npy, samples: 10, batch: 2}
runtime: {level: extended, threads: 2, ort_lib: /x.so, nchwc: "8"}
latency: {batches: [1, 4], duration: 500ms, threads: [1, 2], p99_budget_ms: 12.5, repeats: 3}
tensorrt:
  version: "10100"
  profiles:
    x: {min: [1, 3, 48, 32], opt: [8, 3, 48, 192], max: [32, 3, 48, 512]}
triton: {name: cls, batch: 8, threads: 2, max_batch_size: 16, instances: 2, max_queue_delay_us: 500}
gates: {max_accuracy_drop: 1, min_cosine: 0.99, max_latency_regression: 10, percentile: p99, min_speedup: 1.2, max_size: 1000}
`
	c := Default()
	if err := Decode(strings.NewReader(src), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Model: "m.onnx", Output: "out", Force: true, Targets: []string{"ort", "tensorrt"}, OptLevel: 1, Budget: Duration{3 * time.Minute},
		Shapes: map[string][]int64{"x": {1, 3, 48, 192}}, INT8: true,
		BatchAxes: map[string]int{"h0": 1}, Values: map[string]float64{"sr": 16000}, Ranges: map[string][]float64{"ids": {0, 30522}},
		Image: Image{Resize: 256, Size: []int{224, 224}, Layout: "NHWC", Color: "bgr", Scale: 0.5,
			Mean: []float64{1, 2, 3}, Std: []float64{4, 5, 6}},
		Calibration: Calibration{Data: "c.npy", Samples: 100, Batch: 4, Seed: 7, Method: "entropy",
			Percentile: 99.9, MovingAverage: 0.1, Cache: "c.json"},
		Prune: Prune{Methods: []string{"channels:auto", "2:4"}, Reconstruct: false, Exclude: []string{"fc"}, MaxAccuracyDrop: 2, MinCosine: 0.98, Scope: "global"},
		Quantize: Quantize{ReduceRange: "on", Format: "qoperator", PerChannel: false, Exclude: []string{"Gemm"}, KeepFirstLast: true,
			MaxAccuracyDrop: 0.5, MinCosine: 0.99, Placement: "p.json", PlacementBudget: Duration{30 * time.Second},
			Weights: "int3", BlockSize: 64, WeightRounding: "gptq"},
		Eval:    Eval{Data: "e.npy", Labels: "l.npy", Samples: 10, Batch: 2},
		Runtime: Runtime{Level: "extended", Threads: 2, ORTLib: "/x.so", NCHWc: "8"},
		Latency: Latency{Batches: []int{1, 4}, Duration: Duration{500 * time.Millisecond}, Threads: []int{1, 2}, P99BudgetMs: 12.5, Repeats: 3},
		Gates:   Gates{MaxAccuracyDrop: 1, MinCosine: 0.99, MaxLatencyRegression: 10, Percentile: "p99", MinSpeedup: 1.2, MaxSize: 1000},
	}
	// The targets' own sections, of their packages' types (which this
	// package cannot import), as JSON.
	for name, js := range map[string]string{
		"tensorrt": `{"version":"10100","profiles":{"x":{"min":[1,3,48,32],"opt":[8,3,48,192],"max":[32,3,48,512]}}}`,
		"triton":   `{"name":"cls","batch":8,"threads":2,"max_batch_size":16,"instances":2,"max_queue_delay_us":500}`,
	} {
		got, err := json.Marshal(c.section(name))
		if err != nil || string(got) != js {
			t.Errorf("section %s decoded as %s (%v), want %s", name, got, err, js)
		}
	}
	want.sections = c.sections
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// What --print-config writes reads back to the same configuration.
	back, b, err := roundTrip(t, c)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s", b)
	}
}

// roundTrip writes c as --print-config does and decodes what it wrote
// over the defaults, returning what it read, the bytes and Decode's error.
func roundTrip(t *testing.T, c Config) (back Config, written []byte, err error) {
	t.Helper()
	written, err = Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back = Default()
	err = Decode(strings.NewReader(string(written)), &back)
	return back, written, err
}

func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"calibraton:\n  data: x\n", "line 1: unknown key calibraton at the top level"},
		{"calibration:\n  data: x\n  sampels: 3\n", "line 3: unknown key sampels in calibration"},
		{"calibration:\n  samples: many\n", "line 2: cannot unmarshal !!str `many` into a whole number"},
		{"latency:\n  duration: soon\n", `line 2: "soon" is not a duration`},
		{"shapes:\n  x: 5\n", "line 2: cannot unmarshal !!int `5` into a list"},
		{"tensorrt:\n  profiles:\n    x: {min: [1], mid: [2]}\n", "line 3: unknown key mid in a tensorrt profile"},
		{"int8: true\n---\nint8: false\n", "more than one YAML document"},
		{"model: [\n", "yaml: line"},
	} {
		c := Default()
		err := Decode(strings.NewReader(tc.src), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: message is not one line: %q", tc.src, err)
		}
	}
}

// Paths in a config resolve against its folder; an absolute path, a word
// that is not a path, and a path given by a flag stay as they are; a
// missing input path is an error naming the file, line and key.
func TestLoadResolvesPaths(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(sub, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "abs.onnx")
	for _, f := range []string{abs, filepath.Join(sub, "data", "labels.npy")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(sub, "optc.yaml")
	doc := "model: " + abs + "\noutput: ../out\ncalibration:\n  data: random\nquantize:\n  placement: auto\neval:\n  data: data/eval.npy\n  labels: data/labels.npy\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != abs || c.Output != filepath.Join(dir, "out") || c.Calibration.Data != "random" || c.Quantize.Placement != "auto" ||
		c.Eval.Data != filepath.Join(sub, "data", "eval.npy") || c.Eval.Labels != filepath.Join(sub, "data", "labels.npy") {
		t.Errorf("resolved: model %s, output %s, calibration %s, placement %s, eval %s, labels %s",
			c.Model, c.Output, c.Calibration.Data, c.Quantize.Placement, c.Eval.Data, c.Eval.Labels)
	}
	err = c.CheckPaths()
	want := "config " + p + ": line 8: eval.data: stat " + filepath.Join(sub, "data", "eval.npy") + ": no such file or directory (relative paths in a config resolve against its folder)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckPaths: %v\nwant %s", err, want)
	}
	c.Eval.Data = "elsewhere.npy" // a flag's value is the stage's to check
	if err := c.CheckPaths(); err != nil {
		t.Errorf("CheckPaths with eval.data from a flag: %v", err)
	}
}

func TestLoadKeepsDefaultsAndNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "optc.yaml")
	if err := os.WriteFile(p, []byte("int8: true\ncalibration:\n  data: c.npy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !c.INT8 || c.Calibration.Data != filepath.Join(dir, "c.npy") || c.Calibration.Method != "percentile" || c.Calibration.Batch != 8 {
		t.Fatalf("unset keys lost their defaults: %+v", c.Calibration)
	}
	if err := os.WriteFile(p, []byte("bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p+": line 1") {
		t.Fatalf("got %v, want the file and line", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("got %v", err)
	}
}

// setSection sets keys of c's section name, a type of a target's package,
// from JSON.
func setSection(t *testing.T, c *Config, name, js string) {
	t.Helper()
	if err := json.Unmarshal([]byte(js), c.section(name)); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Targets = []string{"onnx"} }, `targets: unknown target "onnx"`},
		{func(c *Config) { c.OptLevel = 3 }, "opt_level: 3"},
		{func(c *Config) { c.Calibration.Method = "kl" }, `calibration.method: "kl"`},
		{func(c *Config) { c.Calibration.Percentile = 0 }, "calibration.percentile"},
		{func(c *Config) { c.Quantize.ReduceRange = "yes" }, "quantize.reduce_range"},
		{func(c *Config) { c.Quantize.Exclude = []string{"("} }, "quantize.exclude"},
		{func(c *Config) { c.Quantize.Format = "qlinear" }, "quantize.format"},
		{func(c *Config) { c.Quantize.MaxAccuracyDrop = 1 }, "needs eval.labels"},
		{func(c *Config) { c.INT8 = true }, "int8 needs calibration.data"},
		{func(c *Config) { c.Prune.Methods = []string{"channels:1.5"} }, `prune.methods: "channels:1.5"`},
		{func(c *Config) { c.Prune.Methods = []string{"channels:auto"} }, "channels:auto needs a budget"},
		{func(c *Config) { c.Prune.Methods, c.Prune.MaxAccuracyDrop = []string{"2:4"}, 1 }, "prune.max_accuracy_drop needs"},
		{func(c *Config) { c.Prune.MinCosine = 2 }, "prune.min_cosine: 2"},
		{func(c *Config) { c.Runtime.Level = "max" }, "runtime.level"},
		{func(c *Config) { c.Latency.Batches = []int{0} }, "latency.batches: 0"},
		{func(c *Config) { c.Latency.Duration = Duration{} }, "latency.duration"},
		{func(c *Config) { c.Latency.Repeats = 0 }, "latency.repeats: 0"},
		{func(c *Config) { c.Gates.Percentile = "p95" }, `gates.percentile: "p95"`},
		{func(c *Config) { c.Gates.MinCosine = 2 }, "gates.min_cosine: 2"},
		{func(c *Config) { setSection(t, c, "tensorrt", `{"version": "10.3"}`) }, "tensorrt.version"},
		{func(c *Config) {
			setSection(t, c, "tensorrt", `{"profiles": {"x": {"min": [4], "opt": [2], "max": [8]}}}`)
		}, "tensorrt.profiles.x"},
		{func(c *Config) { setSection(t, c, "triton", `{"batch": 8}`) }, "triton: batch and threads"},
		{func(c *Config) { c.Image.Layout = "CHW" }, `image layout "CHW"`},
		{func(c *Config) { c.Image.Std = []float64{1, 0, 1} }, "image std"},
		{func(c *Config) { c.Image.Size = []int{224} }, "image.size"},
	} {
		c := Default()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}

func TestExpandTargets(t *testing.T) {
	c := Default()
	c.Targets = []string{"triton,ort", "ort"}
	got, err := c.ExpandTargets()
	if err != nil || !reflect.DeepEqual(got, []string{"ort", "triton"}) {
		t.Fatalf("got %v %v", got, err)
	}
	// all: every registered target, in registration (build) order.
	c.Targets = []string{"all"}
	if got, _ := c.ExpandTargets(); !reflect.DeepEqual(got, Targets) || !reflect.DeepEqual(got[:3], []string{"ort", "tensorrt", "triton"}) {
		t.Fatalf("all gave %v (registered: %v)", got, Targets)
	}
}

// TestJSONKeysAreYAMLKeys: the configuration in manifest.json uses the
// config file's snake_case keys (not Go field names), and reads back.
func TestJSONKeysAreYAMLKeys(t *testing.T) {
	c := Default()
	c.Model, c.Output, c.Shapes = "m.onnx", "out", map[string][]int64{"x": {1, 3}}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(ys, &fromYAML); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, j, y map[string]any)
	walk = func(path string, j, y map[string]any) {
		for k, v := range j {
			yv, ok := y[k]
			if !ok {
				t.Errorf("JSON key %s%s is not a config key", path, k)
				continue
			}
			if jm, ok := v.(map[string]any); ok {
				ym, _ := yv.(map[string]any)
				if path+k != "shapes" {
					walk(path+k+".", jm, ym)
				}
			}
		}
	}
	walk("", fromJSON, fromYAML)
	if _, ok := fromJSON["opt_level"]; !ok {
		t.Errorf("no opt_level in %s", js)
	}
	if fromJSON["latency"].(map[string]any)["duration"] != "1s" {
		t.Errorf("latency.duration is not written as 1s: %s", js)
	}
	var back Config
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Latency.Duration != c.Latency.Duration || back.OptLevel != c.OptLevel || back.Output != "out" {
		t.Errorf("read back %+v", back)
	}
	// A target's own section reads back into its type, in a zero Config
	// too (manifest.json's options).
	setSection(t, &c, "triton", `{"batch": 4, "threads": 2}`)
	js, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back = Config{}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(back.section("triton")); !strings.Contains(string(got), `"batch":4,"threads":2`) {
		t.Errorf("triton section read back as %s from %s", got, js)
	}
}

// TestDecodeLMKeys reads the language-model keys (left out of
// TestDecodeReadsEveryKey, whose labels and accuracy drop they exclude),
// validates them, and round-trips them through --print-config's YAML.
func TestDecodeLMKeys(t *testing.T) {
	src := "model: m.onnx\noutput: out\neval: {data: h.npy, task: lm, logits: out}\nquantize: {max_perplexity_increase: 2.5}\nlatency: {seq_lengths: [32, 128]}\n"
	c := Default()
	if err := Decode(strings.NewReader(src), &c); err != nil {
		t.Fatal(err)
	}
	if c.Eval.Task != "lm" || c.Eval.Logits != "out" || c.Quantize.MaxPerplexityIncrease != 2.5 || !reflect.DeepEqual(c.Latency.SeqLengths, []int{32, 128}) {
		t.Fatalf("decoded eval %+v, quantize.max_perplexity_increase %v, latency.seq_lengths %v", c.Eval, c.Quantize.MaxPerplexityIncrease, c.Latency.SeqLengths)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	back, b, err := roundTrip(t, c)
	if err != nil || !reflect.DeepEqual(back.Eval, c.Eval) ||
		back.Quantize.MaxPerplexityIncrease != 2.5 || !reflect.DeepEqual(back.Latency.SeqLengths, c.Latency.SeqLengths) {
		t.Fatalf("round trip changed the config (%v):\n%s", err, b)
	}
	c.Eval.Labels = "l.npy"
	c.Eval.Data = "random"
	err = c.Validate()
	for _, want := range []string{"eval.labels does not apply to eval.task lm", "eval.task lm needs token ids"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}

// TestDecodeTechniquesAndTaskParams reads quantize.techniques,
// quantize.smoothquant_alpha and eval.params, and validates them.
func TestDecodeTechniquesAndTaskParams(t *testing.T) {
	src := "model: m.onnx\noutput: out\nint8: true\ncalibration: {data: c.npy}\n" +
		"quantize: {techniques: [gptq, bias-correction], smoothquant_alpha: 0.6}\n" +
		"eval: {data: e.npy, task: text-detection, labels: b.json, params: {thresh: 0.4, min_size: 2}}\n"
	c := Default()
	if err := Decode(strings.NewReader(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Quantize.Techniques, []string{"gptq", "bias-correction"}) || c.Quantize.SmoothAlpha != 0.6 ||
		!reflect.DeepEqual(c.Eval.Params, map[string]string{"thresh": "0.4", "min_size": "2"}) {
		t.Fatalf("decoded quantize %+v, eval %+v", c.Quantize, c.Eval)
	}
	c.Quantize.Techniques = []string{"adaround"}
	c.Eval.Params = map[string]string{"thresh": "2"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `quantize.techniques: unknown technique "adaround"`) || !strings.Contains(err.Error(), "eval.params: task text-detection: thresh 2 is not in (0, 1)") {
		t.Errorf("validate: %v", err)
	}
}
