package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export"
	exportort "github.com/optc-dev/optc/export/ort"
	"github.com/optc-dev/optc/export/tensorrt"
	"github.com/optc-dev/optc/export/triton"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/lint"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// mnistConfig is an INT8 build of the committed MNIST CNN: calibration on
// training digits, checks on 500 held-out digits with labels.
func mnistConfig(t *testing.T, out string) config.Config {
	ortenv.Require(t)
	c := config.Default()
	c.Model = testenv.Model("mnist_cnn.onnx")
	c.Output = out
	c.INT8 = true
	c.Calibration.Data = testenv.Data(t, "mnist/train_images.npy")
	c.Calibration.Samples = 128
	c.Eval.Data = testenv.Data(t, "mnist/test_images.npy")
	c.Eval.Labels = testenv.Data(t, "mnist/test_labels.npy")
	c.Eval.Samples = 500
	c.Latency.Duration = config.Duration{Duration: 50 * time.Millisecond}
	c.Targets = []string{"all"}
	ts := triton.SectionOf(&c)
	ts.Batch, ts.Threads = 8, 1
	// Every region INT8, unmeasured: the placement search's own test is
	// TestBuildPlacement.
	c.Quantize.Placement = "all-int8"
	return c
}

func run(t *testing.T, c config.Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), Options{Config: c, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBuildMNISTInt8(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	c := mnistConfig(t, out)
	inputSum := fileSHA(t, c.Model)
	res := run(t, c)

	byPath := map[string]*Artifact{}
	for _, a := range res.Artifacts {
		byPath[a.Path] = a
	}
	for _, p := range []string{"model.fp32.onnx", "model.int8.onnx", "ort/model.ort", "ort/session.json", "calibration.json"} {
		if byPath[p] == nil {
			t.Fatalf("no artifact %s in %v", p, res.Artifacts)
		}
	}
	// The optimized float model computes what the input does; INT8 keeps
	// accuracy within half a point; the .ort twin runs like its source.
	fp32, int8, ortm := byPath["model.fp32.onnx"].Check, byPath["model.int8.onnx"].Check, byPath["ort/model.ort"].Check
	if fp32.MinCosine < 0.99999 || fp32.Accuracy.DropPoints != 0 {
		t.Errorf("fp32 artifact: cosine %v, drop %v", fp32.MinCosine, fp32.Accuracy.DropPoints)
	}
	if int8.Accuracy == nil || int8.Accuracy.DropPoints > 0.5 || int8.MinCosine < 0.999 || int8.Samples != 500 {
		t.Errorf("int8 artifact: %+v accuracy %+v", int8, int8.Accuracy)
	}
	if ortm.Accuracy.B != int8.Accuracy.B || ortm.MinCosine < 0.99999*int8.MinCosine {
		t.Errorf(".ort artifact %+v differs from the model it was written from %+v", ortm.Accuracy, int8.Accuracy)
	}
	if res.Baseline == nil || len(res.Baseline.Batches) != 2 || byPath["model.int8.onnx"].Timing.Batches[1].Batch != 8 {
		t.Errorf("timings missing: %+v", res.Baseline)
	}
	if !res.EvalHeldOut {
		t.Error("eval data given but reported as not held out")
	}

	// The manifest lists every file with its digest, and the input's.
	var man Manifest
	readJSON(t, filepath.Join(out, "manifest.json"), &man)
	if man.Input.SHA256 != inputSum || len(man.Data) != 3 {
		t.Errorf("manifest input %+v data %+v", man.Input, man.Data)
	}
	listed := map[string]bool{}
	for _, e := range man.Artifacts {
		listed[e.Path] = true
		if got := fileSHA(t, filepath.Join(out, e.Path)); got != e.SHA256 {
			t.Errorf("%s: manifest sha256 %s, file %s", e.Path, e.SHA256, got)
		}
	}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		r, _ := filepath.Rel(out, p)
		if !d.IsDir() && !listed[filepath.ToSlash(r)] && !slices.Contains(reportFiles, r) {
			t.Errorf("%s is in the folder but not in the manifest", r)
		}
		return nil
	})
	if man.Options.Output != "" || man.Accuracy["model.int8.onnx"] == nil {
		t.Errorf("manifest options/accuracy: %+v", man.Options)
	}
	var settings exportort.SessionSettings
	readJSON(t, filepath.Join(out, "ort/session.json"), &settings)
	if settings.GraphOptimization != "all" || settings.Model != "model.int8.onnx" || settings.Portable {
		t.Errorf("session settings %+v", settings)
	}
	if fileSHA(t, c.Model) != inputSum {
		t.Fatal("the input model was modified")
	}
	checkTensorRT(t, out, res)
	checkTriton(t, out)
	var table bytes.Buffer
	if err := WriteTable(&table, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model.int8.onnx", "ort/model.ort", "(input)", "p99 b8 ms", "held out"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// checkTensorRT: the Q/DQ and fp16 models were checked in ORT, the legacy
// cache holds optc's ranges as TensorRT reads them, lint is clean and the
// scripts are valid sh.
func checkTensorRT(t *testing.T, out string, res *Result) {
	t.Helper()
	byPath := map[string]*Artifact{}
	for _, a := range res.Artifacts {
		byPath[a.Path] = a
	}
	qdq, fp16 := byPath["tensorrt/model.int8.qdq.onnx"], byPath["tensorrt/model.fp16.onnx"]
	if qdq == nil || fp16 == nil || qdq.Check.Accuracy.DropPoints > 0.5 || fp16.Check.MinCosine < 0.9999 || fp16.Check.MinTop1 < 0.999 {
		t.Fatalf("tensorrt models: %+v %+v", qdq, fp16)
	}
	// Checked in ORT, not timed there: ORT only emulates TensorRT.
	if qdq.Timing != nil || fp16.Timing != nil || !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.HasPrefix(n, "not timed: tensorrt/model.int8.qdq.onnx, tensorrt/model.fp16.onnx:")
	}) {
		t.Errorf("tensorrt models timed in ORT (%v, %v) or no note saying they are not: %q", qdq.Timing, fp16.Timing, res.Notes)
	}
	f, err := os.Open(filepath.Join(out, "tensorrt", "calibration.cache"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	version, amax, err := export.ReadTRTCalibCache(f)
	if err != nil || version != "100300" {
		t.Fatalf("cache: %v %q", err, version)
	}
	cache, err := calibrate.ReadCache(filepath.Join(out, "calibration.json"))
	if err != nil {
		t.Fatal(err)
	}
	ranges := cache.Ranges()
	if len(amax) != len(ranges) || len(amax) == 0 {
		t.Fatalf("%d tensors in the TensorRT cache, %d calibrated", len(amax), len(ranges))
	}
	for name, r := range ranges {
		want := math.Max(math.Abs(r.Min), math.Abs(r.Max))
		if math.Abs(amax[name]-want) > 1e-6*want {
			t.Errorf("%s: amax %v in the cache, range %v", name, amax[name], r)
		}
	}
	if trt, _ := res.TargetReports["tensorrt"].(*tensorrt.Result); trt == nil || lint.Errors(trt.Lint) != 0 || trt.EngineSkipped == "" {
		t.Errorf("tensorrt result %+v", res.TargetReports["tensorrt"])
	}
	for _, s := range []string{"build_engine.sh", "build_engine_fp16.sh", "build_engine_calib_cache.sh"} {
		p := filepath.Join(out, "tensorrt", s)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o100 == 0 {
			t.Errorf("%s: %v (want an executable script)", s, err)
		}
		if b, err := exec.Command("sh", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("%s: %v %s", s, err, b)
		}
	}
}

// checkTriton: the repository layout, and a config serving the pinned
// profile.
func checkTriton(t *testing.T, out string) {
	t.Helper()
	repo := filepath.Join(out, "triton", "model_repository", "mnist_cnn")
	cfg, err := os.ReadFile(filepath.Join(repo, "config.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name: "mnist_cnn"`, "max_batch_size: 8", "preferred_batch_size: [ 8 ]", `string_value: "1"`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.pbtxt lacks %q:\n%s", want, cfg)
		}
	}
	if fileSHA(t, filepath.Join(repo, "1", "model.onnx")) != fileSHA(t, filepath.Join(out, "model.int8.onnx")) {
		t.Error("the Triton model is not the ORT INT8 model")
	}
}

// --placement auto measures, at the deployment's batch sizes
// (latency.batches), and writes placement.json; the ORT artifact follows
// its recommendation; replaying the file rebuilds the same INT8 model
// without measuring.
func TestBuildPlacement(t *testing.T) {
	dir := t.TempDir()
	c := mnistConfig(t, filepath.Join(dir, "auto"))
	c.Targets = []string{"ort"}
	c.Quantize.Placement = "auto"
	c.Quantize.PlacementBudget = config.Duration{Duration: 10 * time.Second}
	c.Latency.Batches = []int{1, 4}
	auto := run(t, c)
	var file schema.Placement
	readJSON(t, filepath.Join(c.Output, "placement.json"), &file)
	if file.Mode != schema.ModeAuto || len(file.Regions) != 5 || len(file.Timings) == 0 || file.CPU == "" {
		t.Errorf("placement.json: %+v", file)
	}
	batches := map[int]bool{}
	for _, tm := range file.Timings {
		batches[tm.Batch] = true
	}
	if !maps.Equal(batches, map[int]bool{1: true, 4: true}) {
		t.Errorf("placement timed batch sizes %v, latency.batches are 1 and 4", slices.Sorted(maps.Keys(batches)))
	}
	wantFrom := "model.int8.onnx"
	if file.Recommended == schema.RecommendFP32 {
		wantFrom = "model.fp32.onnx"
	}
	for _, a := range auto.Artifacts {
		if a.Path == "ort/model.ort" && a.From != wantFrom {
			t.Errorf("placement recommends %s, ort/model.ort is made from %s", file.Recommended, a.From)
		}
	}
	var table bytes.Buffer
	if err := WriteTable(&table, auto); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "ort artifact: ") || !strings.Contains(table.String(), file.Reason) {
		t.Errorf("the table does not give the recommendation %q:\n%s", file.Reason, table.String())
	}

	replay := c
	replay.Output = filepath.Join(dir, "replay")
	replay.Quantize.Placement = filepath.Join(c.Output, "placement.json")
	res := run(t, replay)
	if res.Placed().PlacementFrom != replay.Quantize.Placement || res.Placed().Placement.Recommended != file.Recommended {
		t.Errorf("replay: from %q, %+v", res.Placed().PlacementFrom, res.Placed().Placement)
	}
	if fileSHA(t, filepath.Join(c.Output, "placement.json")) != fileSHA(t, filepath.Join(replay.Output, "placement.json")) {
		t.Error("the replayed build's placement.json is not the file it replayed")
	}
	if fileSHA(t, filepath.Join(c.Output, "model.int8.onnx")) != fileSHA(t, filepath.Join(replay.Output, "model.int8.onnx")) {
		t.Error("replaying placement.json made another INT8 model")
	}
}

// Two builds of the same inputs give the same bytes for everything but the
// timings (the reports), the manifest that digests the .ort files, and the
// .ort files themselves, which ONNX Runtime does not serialize deterministically
// (the two files are still checked to compute the same thing).
func TestBuildIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	var sums [2]map[string]string
	for i := range 2 {
		out := filepath.Join(dir, []string{"a", "b"}[i])
		run(t, mnistConfig(t, out))
		sums[i] = map[string]string{}
		filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if !d.IsDir() {
				r, _ := filepath.Rel(out, p)
				sums[i][filepath.ToSlash(r)] = fileSHA(t, p)
			}
			return nil
		})
	}
	if len(sums[0]) != len(sums[1]) || len(sums[0]) < 16 {
		t.Fatalf("different files: %v vs %v", sums[0], sums[1])
	}
	var a, b Manifest
	readJSON(t, filepath.Join(dir, "a", "manifest.json"), &a)
	readJSON(t, filepath.Join(dir, "b", "manifest.json"), &b)
	ortFiles := map[string]bool{} // every target's .ort (ort, ort-mobile)
	for i := range a.Artifacts {
		if a.Artifacts[i].Kind == "ort-model" {
			ortFiles[a.Artifacts[i].Path] = true
			a.Artifacts[i].SHA256, b.Artifacts[i].SHA256 = "", ""
		}
	}
	if len(ortFiles) != 2 {
		t.Errorf(".ort files %v, want ort's and ort-mobile's", ortFiles)
	}
	for p, s := range sums[0] {
		if slices.Contains(reportFiles, p) || ortFiles[p] {
			continue
		}
		if sums[1][p] != s {
			t.Errorf("%s differs between two builds of the same inputs", p)
		}
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("manifests differ beyond the .ort digest:\n%s\n%s", ja, jb)
	}
}

func TestBuildRefusesToOverwrite(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(out, "keep.txt")
	os.WriteFile(keep, []byte("x"), 0o644)
	c := config.Default()
	c.Model, c.Output = testenv.Model("mnist_cnn.onnx"), out
	c.Latency.Duration = config.Duration{Duration: 20 * time.Millisecond}
	_, err := Run(context.Background(), Options{Config: c})
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("got %v, want a refusal naming --force", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("the existing folder was touched")
	}
	c.Force = true
	run(t, c)
	if _, err := os.Stat(keep); !os.IsNotExist(err) {
		t.Error("--force kept the old folder's files")
	}
	if _, err := os.Stat(filepath.Join(out, "ort", "model.ort")); err != nil {
		t.Error(err)
	}
	assertNoTemp(t, dir)

	// An output folder that holds the input is refused even with --force.
	in := filepath.Join(dir, "in")
	os.Mkdir(in, 0o755)
	copyTo(t, c.Model, filepath.Join(in, "m.onnx"))
	c.Model, c.Output = filepath.Join(in, "m.onnx"), in
	if _, err := Run(context.Background(), Options{Config: c}); err == nil || !strings.Contains(err.Error(), "holds the input model") {
		t.Fatalf("got %v", err)
	}
	// No output folder at all is named as such, not as an empty name.
	c.Output = ""
	if _, err := Run(context.Background(), Options{Config: c}); err == nil || !strings.Contains(err.Error(), "no output folder") {
		t.Fatalf("without an output folder: got %v", err)
	}
}

// A failing stage names itself and leaves neither the output folder nor
// the working folder behind.
func TestBuildFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	c := mnistConfig(t, out)
	bad := filepath.Join(dir, "nan.npy")
	x := make([]float32, 4*28*28)
	x[5] = float32(math.NaN())
	tensor, _ := graph.NewFloat32Tensor("x", []int64{4, 1, 28, 28}, x)
	if err := data.WriteNpy(bad, tensor); err != nil {
		t.Fatal(err)
	}
	c.Calibration.Data, c.Calibration.Samples = bad, 0
	_, err := Run(context.Background(), Options{Config: c})
	if err == nil || !strings.HasPrefix(err.Error(), "quantize: ") || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("got %v, want a quantize-stage error about NaN", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a failed build left its output folder")
	}
	assertNoTemp(t, dir)

	// A broken model fails at load, named once ("load trunc.onnx: ...",
	// not "load: load trunc.onnx: ...").
	trunc := filepath.Join(dir, "trunc.onnx")
	b, _ := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	os.WriteFile(trunc, b[:len(b)/2], 0o644)
	c = mnistConfig(t, out)
	c.Model = trunc
	if _, err := Run(context.Background(), Options{Config: c}); err == nil || !strings.HasPrefix(err.Error(), "load ") || strings.Contains(err.Error(), "load: load") || !strings.Contains(err.Error(), "trunc.onnx") {
		t.Fatalf("got %v", err)
	}
	assertNoTemp(t, dir)
}

// Cancelling (what Ctrl-C does) returns at once and leaves nothing.
func TestBuildInterrupted(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	c := mnistConfig(t, out)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the working folder has something in it.
		for {
			if m, _ := filepath.Glob(filepath.Join(dir, ".out.tmp-*", "model.fp32.onnx")); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := Run(ctx, Options{Config: c})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("got %v", err)
	}
	// The abandoned stage may still be running: it must not recreate
	// anything.
	time.Sleep(2 * time.Second)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("an interrupted build left its output folder")
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("working folder %s left behind", e.Name())
		}
	}
}

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	if err := copyFile(from, to); err != nil {
		t.Fatal(err)
	}
}

// Without eval data, a build that calibrates on a subset checks on the
// rest of the same data: held out.
func TestBuildChecksOnHeldOutCalibrationSamples(t *testing.T) {
	c := mnistConfig(t, filepath.Join(t.TempDir(), "out"))
	c.Eval.Data, c.Eval.Labels, c.Eval.Samples = "", "", 0
	c.Targets = []string{"ort"}
	c.Calibration.Data = filepath.Join(testenv.RepoRoot(), "testdata", "mnist", "calib")
	c.Image.Color = "gray"
	c.Calibration.Samples = 150
	res := run(t, c)
	if !res.EvalHeldOut || !strings.Contains(res.EvalData, "did not draw") || res.Placed() == nil || !res.Placed().HeldOut {
		t.Fatalf("eval %q held out %v", res.EvalData, res.EvalHeldOut)
	}
	for _, a := range res.Artifacts {
		if a.Check != nil && a.Check.Samples != 50 {
			t.Errorf("%s checked on %d samples, want the 50 of 200 calibration left", a.Path, a.Check.Samples)
		}
	}
	// Without a sample count calibration still leaves a quarter out, and
	// every check runs on it: no check runs on a sample calibration saw.
	c.Calibration.Samples = 0
	c.Output = filepath.Join(t.TempDir(), "out2")
	res = run(t, c)
	if !res.EvalHeldOut || res.Caveats.OnCalibrationData || res.Placed().Calibration.Samples != 150 || !res.Placed().HeldOut ||
		!strings.Contains(strings.Join(res.Notes, "\n"), "calibration draws 150 samples of "+c.Calibration.Data+" and every artifact is checked on the other 50") {
		t.Fatalf("held out %v, calibrated on %d, notes %v", res.EvalHeldOut, res.Placed().Calibration.Samples, res.Notes)
	}
	for _, a := range res.Artifacts {
		if a.Check != nil && a.Check.Samples != 50 {
			t.Errorf("%s checked on %d samples, want the 50 calibration left out", a.Path, a.Check.Samples)
		}
	}
}

// TestBuildFP16MeasuredRanges is issue 17's audio front-end built for
// TensorRT without INT8: calibration clips in ±3000 (the deployment's
// range), eval clips in ±1. The float16 variant keeps float32 what the
// calibration clips take beyond 65504/4, the build says which, and the
// variant is checked, float16 emulated, on both: finite and close.
func TestBuildFP16MeasuredRanges(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "audio.onnx")
	if err := graph.Save(testgraph.Audio(t).Model, model, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	calib, eval := filepath.Join(dir, "calib.npy"), filepath.Join(dir, "eval.npy")
	for _, f := range []struct {
		path      string
		seed      uint64
		amplitude float64
	}{{calib, 1, 3000}, {eval, 2, 1}} {
		if err := data.WriteNpy(f.path, testgraph.AudioClips(t, f.seed, 4, f.amplitude)); err != nil {
			t.Fatal(err)
		}
	}
	c := config.Default()
	c.Model, c.Output = model, filepath.Join(dir, "out")
	c.Calibration.Data, c.Eval.Data = calib, eval
	c.Targets = []string{"tensorrt"}
	c.Latency.Duration = config.Duration{Duration: 20 * time.Millisecond}
	c.Latency.Batches = []int{1} // the model's batch is static
	res := run(t, c)
	r, _ := res.TargetReports["tensorrt"].(*tensorrt.Result)
	if r == nil || r.FP16 == nil || r.FP16Ranges != calib {
		t.Fatalf("tensorrt result %+v", r)
	}
	var out []string
	for _, v := range r.FP16.OutOfRange {
		out = append(out, v.Value)
	}
	if strings.Join(out, " ") != "power_out floor_out energy_out" || r.FP16.KeptForRange != 2 {
		t.Errorf("out of range %v, %d nodes kept for it; want power_out floor_out energy_out, 2 (floor, magnitude)", out, r.FP16.KeptForRange)
	}
	note := ""
	for _, n := range res.Notes {
		if strings.HasPrefix(n, "tensorrt fp16: 3 tensor(s) stay float32") {
			note = n
		}
	}
	if note == "" {
		t.Errorf("no note on the tensors kept float32: %q", res.Notes)
	}
	t.Log(note)
	for _, a := range res.Artifacts {
		if a.Path != "tensorrt/model.fp16.onnx" {
			continue
		}
		if a.Check == nil || a.CheckCalibration == nil || !a.CheckCalibration.Float16Emulated {
			t.Fatalf("fp16 checks %+v %+v", a.Check, a.CheckCalibration)
		}
		for _, ch := range []*Check{a.Check, a.CheckCalibration} {
			t.Logf("%d samples: min cosine %.7f, max abs error %.3g, %d not finite", ch.Samples, float64(ch.MinCosine), float64(ch.Outputs[0].MaxAbs), ch.NonFinite)
			if ch.NonFinite > 0 || !(ch.MinCosine > 0.999) {
				t.Errorf("fp16 artifact: cosine %.7f, %d not finite", float64(ch.MinCosine), ch.NonFinite)
			}
		}
		return
	}
	t.Fatal("no tensorrt/model.fp16.onnx")
}

// TestBuildGuard: INT8 artifacts that miss the accuracy guard (every
// activation range forced to +-0.01 through the calibration cache) fail
// the build at the quantize stage, naming the metric, limit and value,
// and leave nothing; with allow_accuracy_loss the build keeps them, says
// so, and deploys FP32 for ORT.
func TestBuildGuard(t *testing.T) {
	dir := t.TempDir()
	c := mnistConfig(t, filepath.Join(dir, "good"))
	c.Targets = []string{"ort"}
	res := run(t, c)
	if g := res.Placed().Guard; g == nil || !g.Pass || !g.HeldOut || len(g.Checks) != 1 || g.Checks[0].Metric != "accuracy drop" {
		t.Fatalf("guard %+v", res.Placed().Guard)
	}
	var cache map[string]any
	readJSON(t, filepath.Join(dir, "good", "calibration.json"), &cache)
	for _, e := range cache["tensors"].([]any) {
		e := e.(map[string]any)
		e["min"], e["max"] = math.Max(e["min"].(float64), -0.01), math.Min(e["max"].(float64), 0.01)
	}
	bad := filepath.Join(dir, "bad.json")
	b, _ := json.Marshal(cache)
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// A refused INT8 model takes nothing else down: the build writes,
	// checks and times the FP32 deployment, records the refusal with its
	// figures, and leaves model.int8.onnx out.
	c.Calibration.Cache = bad
	c.Output = filepath.Join(dir, "bad")
	res = run(t, c)
	if len(res.Refused) != 1 || res.Refused[0].Artifact != "model.int8.onnx" || res.Refused[0].Guard.Pass ||
		!strings.Contains(schema.FailedChecks(res.Refused[0].Guard.Checks), "over the 1.00 allowed") {
		t.Fatalf("refused %+v", res.Refused)
	}
	if _, err := os.Stat(filepath.Join(c.Output, "model.int8.onnx")); !os.IsNotExist(err) {
		t.Error("the refused INT8 model was written")
	}
	for _, a := range res.Artifacts {
		if a.Precision == "int8" {
			t.Errorf("%s is INT8 after the guard refused INT8", a.Path)
		}
		if a.Path == "ort/model.ort" && (a.Check == nil || a.Timing == nil) {
			t.Errorf("the FP32 deployment was not checked and timed")
		}
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "INT8 REFUSED by the accuracy guard") {
		t.Errorf("notes %q", res.Notes)
	}
	assertNoTemp(t, dir)
	// The report names the files the user has, not the working folder.
	if js, err := os.ReadFile(filepath.Join(c.Output, "report.json")); err != nil || strings.Contains(string(js), ".tmp-") {
		t.Errorf("report.json names a temporary folder (or %v)", err)
	}

	c.Quantize.AllowAccuracyLoss = true
	c.Output = filepath.Join(dir, "allowed")
	res = run(t, c)
	if !slices.Contains(res.NotRecommended, "model.int8.onnx") {
		t.Errorf("not recommended: %q", res.NotRecommended)
	}
	if g := res.Placed().Guard; !g.Allowed || g.Pass || g.Fallback == "" {
		t.Errorf("guard %+v", g)
	}
	if len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, "\n"), "misses the accuracy guard (accuracy drop") {
		t.Errorf("notes %q", res.Notes)
	}
	for _, a := range res.Artifacts {
		if a.Path == "ort/model.ort" && a.Precision != "fp32" {
			t.Errorf("the ORT artifact is %s, want fp32 when INT8 misses the guard", a.Precision)
		}
	}
}

// TestBuildRunsPassesOnce: an INT8 build runs the pass pipeline once, in
// its passes stage at the build's -O, and quantizes that model: -O0
// --int8 leaves BatchNormalization unfused. It also bounds how many times
// one build decodes a model (each parse is a copy of the graph). The nchwc
// stage, which runs a pipeline of its own (TestBuildNCHWc), is off.
func TestBuildRunsPassesOnce(t *testing.T) {
	for _, level := range []int{0, 2} {
		out := filepath.Join(t.TempDir(), "out")
		c := mnistConfig(t, out)
		c.OptLevel = level
		c.Runtime.NCHWc = "off"
		runs, parses := passes.Runs(), graph.Parses()
		res := run(t, c)
		runs, parses = passes.Runs()-runs, graph.Parses()-parses
		if runs != 1 || res.Placed().Passes != nil || res.INT8[quantize.TargetTensorRT].Passes != nil {
			t.Errorf("-O%d: the pass pipeline ran %d times in one build, want 1", level, runs)
		}
		t.Logf("-O%d --int8 --target all: %d model parses", level, parses)
		bn := testgraph.OpCounts(testgraph.LoadFile(t, filepath.Join(out, "model.int8.onnx")).Graph)["BatchNormalization"]
		if (level == 0) != (bn > 0) {
			t.Errorf("-O%d: the INT8 model has %d BatchNormalization nodes", level, bn)
		}
	}
}

// A stage's error names a file of the working folder as the artifact it
// would have been, never by the temporary path a failed build removes,
// and still unwraps to what the stage returned.
func TestStageErrorNamesNoTemporaryFolder(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), ".out.tmp-123")
	cause := ptq.ErrNothingToQuantize
	err := inBuild{fmt.Errorf("%s: placement: %w", filepath.Join(tmp, "model.fp32.onnx"), cause), tmp}
	if got := err.Error(); strings.Contains(got, ".tmp-") || !strings.HasPrefix(got, "model.fp32.onnx: placement: ") {
		t.Errorf("%q", got)
	}
	if !errors.Is(err, cause) {
		t.Error("the error no longer unwraps to its cause")
	}
}
