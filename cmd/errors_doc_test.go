package cmd

// docs/errors.md, reproduced: every row of its tables of messages is run
// here, through the command line, and must fail with the exit status the
// row documents and one stderr line holding the row's message fragments.
// A row without a reproduction, or a fragment the row does not show,
// fails the test, so the page and the code cannot drift apart. (The exit
// statuses 130 and 143 are TestInterruptedRuns'.)

import (
	"archive/zip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// docRow is one row of a message table in docs/errors.md.
type docRow struct {
	section, text string
	status        int
}

// errorDocRows reads the tables whose second column is the exit status,
// keyed by the first code span of the row.
func errorDocRows(t *testing.T) map[string]docRow {
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]docRow{}
	section := ""
	span := regexp.MustCompile("`([^`]+)`")
	for _, l := range strings.Split(string(b), "\n") {
		if s, ok := strings.CutPrefix(l, "## "); ok {
			section = s
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) < 5 || !strings.HasPrefix(l, "|") {
			continue
		}
		status, err := strconv.Atoi(strings.TrimSpace(cells[2]))
		if err != nil {
			continue // a header, a rule, or the exit-code table
		}
		m := span.FindStringSubmatch(cells[1])
		if m == nil {
			t.Errorf("docs/errors.md (%s): a row without a message in code: %s", section, l)
			continue
		}
		rows[m[1]] = docRow{section, l, status}
	}
	if len(rows) < 20 {
		t.Fatalf("docs/errors.md: only %d rows with an exit status", len(rows))
	}
	return rows
}

// docCase reproduces one row: runs are the invocations (each with the
// fragments its line must hold); setup writes what they read into dir.
type docCase struct {
	runs func(t *testing.T, dir string) []docRun
}

type docRun struct {
	args []string
	want []string
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// docInspect is one inspect of the model bytes written to dir/m/model.onnx
// (with side files next to it).
func docInspect(t *testing.T, dir string, model []byte, files map[string][]byte, want ...string) docRun {
	p := writeFile(t, filepath.Join(dir, "m", "model.onnx"), model)
	for name, b := range files {
		writeFile(t, filepath.Join(dir, "m", name), b)
	}
	return docRun{[]string{"inspect", p}, want}
}

func TestErrorsDocumented(t *testing.T) {
	ortenv.Require(t)
	rows := errorDocRows(t)
	mnist := testenv.Model("mnist_cnn.onnx")
	mnistBytes, err := os.ReadFile(mnist)
	if err != nil {
		t.Fatal(err)
	}
	conv1 := mnistProto(t).Graph.Initializer[0]
	mnistData := testenv.Data(t, "mnist")
	noise := func(i int) float32 { return float32(i%255) / 255 }
	// quantizeCache quantizes MNIST once with a calibration cache and
	// returns the cache's path.
	quantizeCache := func(t *testing.T, dir string, extra ...string) string {
		cache := filepath.Join(dir, "cache.json")
		args := append([]string{"quantize", mnist, "-o", filepath.Join(dir, "first.onnx"), "--calib-cache", cache}, extra...)
		if status, _, stderr := run(t, args...); status != 0 {
			t.Fatalf("making a calibration cache: %s", stderr)
		}
		os.Remove(filepath.Join(dir, "first.onnx"))
		return cache
	}
	editCache := func(t *testing.T, path string, edit func(map[string]any)) {
		var c map[string]any
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		edit(c)
		if b, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, b)
	}

	cases := map[string]docCase{
		// Usage.
		"build: give MODEL (or model: in a --config file)": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"build"}, []string{"give MODEL"}},
				{[]string{"build", mnist}, []string{"-o DIR is required"}},
				{[]string{"quantize", mnist}, []string{"-o OUT is required"}}}
		}},
		"unknown flag: --batch; build takes --calib-batch, --eval-batch and --latency-batches": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"build", mnist, "-o", filepath.Join(dir, "b"), "--batch", "8"}, []string{"unknown flag: --batch; build takes --calib-batch, --eval-batch and --latency-batches"}},
				{[]string{"inspect", "--no-such-flag", mnist}, []string{"unknown flag: --no-such-flag"}}}
		}},
		"--remeasure times the median only: give --percentile p50, not p99": {func(t *testing.T, dir string) []docRun {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			return []docRun{{[]string{"diff", a, b, "--remeasure", "--percentile", "p99"}, []string{"--remeasure times the median only: give --percentile p50, not p99"}},
				{[]string{"diff", a, b, "--remeasure", "--remeasure-time", "0s"}, []string{"--remeasure-time 0s: want a positive duration"}},
				{[]string{"diff", a, b, "--remeasure", "--undecided", "maybe"}, []string{`--undecided "maybe": want pass or fail`}},
				{[]string{"diff", a, b, "--undecided", "fail"}, []string{"--undecided is for --remeasure"}}}
		}},
		`build: --target: unknown target "foo" (want ` + choice.Or(config.TargetChoices()) + `)`: {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"build", mnist, "-o", filepath.Join(dir, "b"), "--target", "foo"}, []string{`build: --target: unknown target "foo" (want ` + choice.Or(config.TargetChoices()) + `)`}},
				{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--calib-data", "random", "--method", "foo"}, []string{`"foo"`}}}
		}},
		"--format is for INT8 quantization, not --weights": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--weights", "int4", "--format", "qoperator"}, []string{"--format is for INT8 quantization, not --weights"}}}
		}},
		"--method is for static INT8, not --dynamic": {func(t *testing.T, dir string) []docRun {
			q := []string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx")}
			return []docRun{{append(q, "--dynamic", "--method", "entropy"), []string{"--method is for static INT8, not --dynamic"}},
				{append(q, "--dynamic", "--weights", "int4"), []string{"--weights and --dynamic are two kinds of quantization: give one"}},
				{append(q, "--dynamic", "--target", "tensorrt"), []string{"--dynamic is for --target ort"}},
				{append(q, "--calib-data", "random", "--ort-contrib"), []string{"--ort-contrib is for --dynamic"}}}
		}},
		"no MatMul or Gemm with a constant float weight to quantize dynamically": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--dynamic", "--exclude", "Gemm|MatMul"},
				[]string{"no MatMul or Gemm with a constant float weight to quantize dynamically"}}}
		}},
		"accuracy guard refused the dynamic INT8 model: relative error of OUT 0.0123, over the 0.0001 allowed (...); nothing was written ...": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--dynamic", "--max-rel-error", "0.0001"},
				[]string{"accuracy guard refused the dynamic INT8 model: relative error of logits ", "over the 0.0001 allowed", "nothing was written"}}}
		}},
		"--prune-damp \"often\": want a number >= 0 or auto": {func(t *testing.T, dir string) []docRun {
			calib := writeFile(t, filepath.Join(dir, "x.npy"), nil)
			return []docRun{{[]string{"optimize", mnist, "-o", filepath.Join(dir, "o.onnx"), "--prune", "2:4", "--calib-data", calib, "--prune-damp", "often"}, []string{`--prune-damp "often": want a number >= 0 or auto`}}}
		}},
		"--weight-rounding gptq needs --calib-data": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--weights", "int4", "--weight-rounding", "gptq"}, []string{"--weight-rounding gptq needs --calib-data"}}}
		}},
		"no MatMul or Gemm weight could be quantized to int4: 1 skipped (/fc/Gemm: excluded by --exclude)": {func(t *testing.T, dir string) []docRun {
			relu := writeFile(t, filepath.Join(dir, "relu.onnx"), withProto([][3]string{{"Relu", "x", "y"}}, nil)(t))
			return []docRun{{[]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--weights", "int4", "--exclude", "Gemm"},
				[]string{"no MatMul or Gemm weight could be quantized to int4: 1 skipped (/fc/Gemm: excluded by --exclude)"}},
				{[]string{"quantize", relu, "-o", filepath.Join(dir, "q2.onnx"), "--weights", "int4"}, []string{"no MatMul or Gemm with a constant weight to quantize to int4"}}}
		}},
		"build: --eval-task lm needs token ids: eval.data (--eval-data) or calibration.data, not random data": {func(t *testing.T, dir string) []docRun {
			out := filepath.Join(dir, "b")
			return []docRun{{[]string{"build", mnist, "-o", out, "--eval-task", "lm", "--calib-data", "random"}, []string{"build: --eval-task lm needs token ids: eval.data (--eval-data) or calibration.data, not random data"}},
				{[]string{"build", mnist, "-o", out, "--max-perplexity-increase", "3"}, []string{"--max-perplexity-increase needs eval.task lm"}},
				{[]string{"build", mnist, "-o", out, "--latency-seq-lengths", "32"}, []string{"--latency-seq-lengths needs eval.task lm"}},
				{[]string{"compare", mnist, mnist, "--data", "random", "--task", "lm"}, []string{"--task lm needs --data token ids, not random data"}},
				{[]string{"compare", mnist, mnist, "--data", "random", "--logits", "y"}, []string{"--logits needs --task lm"}}}
		}},
		"M.onnx: task lm needs token ids: an int64 input of shape [batch, seq], and the model has none": {func(t *testing.T, dir string) []docRun {
			x := filepath.Join(dir, "x.npy")
			writeNpy(t, x, graph.Float, []int64{2, 1, 28, 28}, func(int) float32 { return 0.5 })
			return []docRun{{[]string{"compare", mnist, mnist, "--data", x, "--task", "lm"}, []string{"mnist_cnn.onnx: task lm needs token ids: an int64 input of shape [batch, seq], and the model has none"}}}
		}},
		"build M.onnx: budget 1ms is too short for this model on this machine: the least the build runs (31µs a sample: 16 calibration samples, the INT8 guard's checks, 4 artifact checks on 32 samples, 40 timing windows of 3 runs) takes 30ms; give --budget 1s or more (or --budget 0 for none)": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"build", mnist, "--int8", "-o", filepath.Join(dir, "b"), "--calib-data", filepath.Join(mnistData, "train_images.npy"),
				"--eval-data", filepath.Join(mnistData, "test_images.npy"), "--eval-labels", filepath.Join(mnistData, "test_labels.npy"), "--budget", "1ms", "-q"},
				[]string{"mnist_cnn.onnx: budget 1ms is too short for this model on this machine: the least the build runs (", "a sample: 16 calibration samples, the INT8 guard's checks,", "or more (or --budget 0 for none)"}}}
		}},
		`heldout.npy: input "ids": token id -1 outside the vocabulary of 256 logits`: {func(t *testing.T, dir string) []docRun {
			lm := testenv.Data(t, "zoo/lm_tiny/dynamic.onnx")
			ids, _ := graph.NewInt64Tensor("ids", []int64{1, 4}, []int64{1, -1, 2, 3})
			held := filepath.Join(dir, "heldout.npy")
			if err := data.WriteNpy(held, ids); err != nil {
				t.Fatal(err)
			}
			return []docRun{{[]string{"compare", lm, lm, "--data", held, "--task", "lm"}, []string{`heldout.npy: input "ids": token id -1 outside the vocabulary of 256 logits`}}}
		}},
		"perplexity guard failed: model.int3.onnx: perplexity P, +X% over float's Q on DATA (N tokens), over the 5% allowed (quantize.max_perplexity_increase); ...": {func(t *testing.T, dir string) []docRun {
			lm := testenv.Data(t, "zoo/lm_tiny")
			return []docRun{{[]string{"build", filepath.Join(lm, "dynamic.onnx"), "-o", filepath.Join(dir, "b"), "--target", "ort", "--shape", "ids:?,64",
				"--weights", "int3", "--block-size", "128", "--calib-data", filepath.Join(lm, "calib.npy"), "--eval-data", filepath.Join(lm, "heldout.npy"),
				"--eval-task", "lm", "--max-perplexity-increase", "0.01", "-q"}, []string{"perplexity guard failed: model.int3.onnx: perplexity", "over the 0.01% allowed (quantize.max_perplexity_increase)"}}}
		}},
		`config optc.yaml: targets: unknown target "foo"`: {func(t *testing.T, dir string) []docRun {
			cfg := writeFile(t, filepath.Join(dir, "optc.yaml"), []byte("model: m.onnx\noutput: out\ntargets: [foo]\n"))
			return []docRun{{[]string{"build", "--config", cfg}, []string{"optc.yaml: targets: unknown target \"foo\""}}}
		}},
		`unknown command "frobnicate" for "optc"`: {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`}}}
		}},

		// Models.
		"not a valid ONNX model: model: field N at byte B: unexpected EOF": {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, mnistBytes[:len(mnistBytes)/2], nil, "not a valid ONNX model: model: field", "unexpected EOF")}
		}},
		"is a folder, not a model file": {func(t *testing.T, dir string) []docRun {
			empty := writeFile(t, filepath.Join(dir, "empty.onnx"), nil)
			return []docRun{{[]string{"inspect", dir}, []string{"is a folder, not a model file"}},
				{[]string{"inspect", empty}, []string{"empty.onnx: the file is empty"}}}
		}},
		`initializer "W": 572 bytes of data, but float32[16 1 3 3] needs 576`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.RawData = tp.RawData[:len(tp.RawData)-4] })(t), nil,
				"572 bytes of data, but float32[16 1 3 3] needs 576")}
		}},
		"negative dimension in [...]": {func(t *testing.T, dir string) []docRun {
			return []docRun{
				docInspect(t, filepath.Join(dir, "a"), withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.Dims[0] = -16 })(t), nil, "negative dimension in ["),
				docInspect(t, filepath.Join(dir, "b"), withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.Dims = []int64{1 << 32, 1 << 32, 1 << 32} })(t), nil, "element count of [", "overflows int64"),
				docInspect(t, filepath.Join(dir, "c"), withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.Dims = []int64{math.MaxInt64} })(t), nil, "is too large to hold in memory"),
			}
		}},
		`external data "../x.bin": refused: the path leaves the model's folder`: {func(t *testing.T, dir string) []docRun {
			writeFile(t, filepath.Join(dir, "x.bin"), conv1.RawData)
			return []docRun{docInspect(t, dir, withMnistInitializer(func(tp *onnxpb.TensorProto) {
				tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("../x.bin", 0)
			})(t), nil, `external data "../x.bin": refused: the path leaves the model's folder`)}
		}},
		`external data "w.bin": N bytes at offset O run past the end of the file`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withMnistInitializer(func(tp *onnxpb.TensorProto) {
				tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("w.bin", 8)
			})(t), map[string][]byte{"w.bin": conv1.RawData}, `external data "w.bin": 576 bytes at offset 8 run past the end of the file`)}
		}},
		"external data: lstat .../w.bin: no such file or directory": {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withMnistInitializer(func(tp *onnxpb.TensorProto) {
				tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("w.bin", 0)
			})(t), nil, "external data: lstat ", "/w.bin: no such file or directory")}
		}},
		`graph "g" has a cycle: "a" (Relu) -> "b" (Relu)`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withProto([][3]string{{"Relu", "b", "a"}, {"Relu", "a", "b"}, {"Relu", "a", "y"}}, nil)(t), nil,
				`graph "g" has a cycle: "n0" (Relu) -> "n1" (Relu)`)}
		}},
		`node "n" (Relu): input 0 "v" is not defined by any node, input or initializer`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withProto([][3]string{{"Relu", "ghost", "y"}}, nil)(t), nil,
				`node "n0" (Relu): input 0 "ghost" is not defined by any node, input or initializer`)}
		}},
		`node "n" (com.x.Op): domain "com.x" is not imported by the model`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withProto([][3]string{{"Op", "x", "y"}}, func(mp *onnxpb.ModelProto) {
				mp.Graph.Node[0].Domain = proto.String("com.x")
			})(t), nil, `node "n0" (com.x.Op): domain "com.x" is not imported by the model`)}
		}},
		`node "n" (Cast): Cast needs attribute "to"`: {func(t *testing.T, dir string) []docRun {
			return []docRun{docInspect(t, dir, withProto([][3]string{{"Cast", "x", "y"}}, nil)(t), nil, `node "n0" (Cast): Cast needs attribute "to"`)}
		}},
		"ONNX Runtime cannot load the model: ...": {func(t *testing.T, dir string) []docRun {
			// Valid ONNX for optc (the domain is imported) but no operator
			// ORT has.
			m := withProto([][3]string{{"Op", "x", "y"}}, func(mp *onnxpb.ModelProto) {
				mp.Graph.Node[0].Domain = proto.String("com.x")
				mp.OpsetImport = append(mp.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("com.x"), Version: proto.Int64(1)})
			})(t)
			p := writeFile(t, filepath.Join(dir, "m.onnx"), m)
			return []docRun{{[]string{"run", p, "--data", "random", "-o", filepath.Join(dir, "out")}, []string{"ONNX Runtime cannot load the model: "}}}
		}},
		`export: openvino target: node "n" (com.microsoft.Gelu) is not a standard ONNX operator; the openvino target writes standard ONNX only ...`: {func(t *testing.T, dir string) []docRun {
			// ONNX Runtime runs its own Gelu; OpenVINO reads standard ONNX.
			m := withProto([][3]string{{"Gelu", "x", "y"}}, func(mp *onnxpb.ModelProto) {
				mp.Graph.Node[0].Domain = proto.String("com.microsoft")
				mp.OpsetImport = append(mp.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("com.microsoft"), Version: proto.Int64(1)})
			})(t)
			p := writeFile(t, filepath.Join(dir, "m.onnx"), m)
			return []docRun{{[]string{"build", p, "-o", filepath.Join(dir, "out"), "--target", "openvino"},
				[]string{"build " + p + `: export: openvino target: node "n0" (com.microsoft.Gelu) is not a standard ONNX operator; the openvino target writes standard ONNX only`}}}
		}},
		"ONNX Runtime crashed (SIGSEGV: segmentation violation) opening the model at level all; ...": {func(t *testing.T, dir string) []docRun {
			p := filepath.Join(dir, "crash.onnx")
			if err := graph.Save(testgraph.TransposeIntoHalfMatMul(t), p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			return []docRun{{[]string{"run", p, "--data", "random", "-o", filepath.Join(dir, "out")}, []string{"ONNX Runtime crashed (SIGSEGV: segmentation violation) opening the model at level all; "}}}
		}},

		// Data.
		"data.npy: input \"x\" expects float32[N,1,28,28], the data is float32[4,1,20,20] (4 samples): dim 2 is 20, want 28": {func(t *testing.T, dir string) []docRun {
			p := filepath.Join(dir, "data.npy")
			writeNpy(t, p, graph.Float, []int64{4, 1, 20, 20}, noise)
			return []docRun{{[]string{"run", mnist, "--data", p, "-o", filepath.Join(dir, "out")},
				[]string{"data.npy: input \"input\" expects float32[N,1,28,28], the data is float32[4,1,20,20] (4 samples): dim 2 is 20, want 28"}}}
		}},
		"data.npy: input \"x\": truncated: ... needs N data bytes, the file has M; the data stops in sample S of T": {func(t *testing.T, dir string) []docRun {
			p := filepath.Join(dir, "data.npy")
			writeNpy(t, p, graph.Float, []int64{4, 1, 28, 28}, noise)
			if err := os.Truncate(p, 4000); err != nil {
				t.Fatal(err)
			}
			return []docRun{{[]string{"run", mnist, "--data", p, "-o", filepath.Join(dir, "out")},
				[]string{"data.npy: input \"input\": truncated: ", "data bytes, the file has", "the data stops in sample 1 of 4"}}}
		}},
		"data.npy: the data holds no samples (axis 0 is 0)": {func(t *testing.T, dir string) []docRun {
			p := filepath.Join(dir, "data.npy")
			writeNpy(t, p, graph.Float, []int64{0, 1, 28, 28}, noise)
			return []docRun{{[]string{"run", mnist, "--data", p, "-o", filepath.Join(dir, "out")}, []string{"data.npy: the data holds no samples (axis 0 is 0)"}}}
		}},
		"calibrating on data.npy: calibrate: batch 0: tensor \"x\", ...: element 0 is NaN": {func(t *testing.T, dir string) []docRun {
			p := filepath.Join(dir, "data.npy")
			writeNpy(t, p, graph.Float, []int64{4, 1, 28, 28}, func(int) float32 { return float32(math.NaN()) })
			return []docRun{{[]string{"quantize", mnist, "--calib-data", p, "-o", filepath.Join(dir, "q.onnx")},
				[]string{"calibrating on ", "data.npy: calibrate: batch 0: tensor \"input\"", "element 0 is NaN"}}}
		}},
		`data.npz: no member "x.npy" for input "x"`: {func(t *testing.T, dir string) []docRun {
			npy := filepath.Join(t.TempDir(), "x.npy")
			writeNpy(t, npy, graph.Float, []int64{4, 1, 28, 28}, noise)
			b, err := os.ReadFile(npy)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "data.npz")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			z := zip.NewWriter(f)
			w, _ := z.Create("x.npy")
			w.Write(b)
			z.Close()
			f.Close()
			return []docRun{{[]string{"run", mnist, "--data", p, "-o", filepath.Join(dir, "out")}, []string{`data.npz: no member "input.npy" for input "input"`}}}
		}},
		"DIR: input \"x\" expects float32[N,1,28,28]: 1 channels on axis 1 (NCHW), but color rgb gives 3; for grayscale images use --image-color gray": {func(t *testing.T, dir string) []docRun {
			images := filepath.Join(testenv.RepoRoot(), "testdata", "mnist", "eval")
			return []docRun{{[]string{"run", mnist, "--data", images, "-o", filepath.Join(dir, "out")},
				[]string{"expects float32[N,1,28,28]: 1 channels on axis 1 (NCHW), but color rgb gives 3; for grayscale images use --image-color gray"}}}
		}},
		"accuracy guard refused the INT8 model: accuracy drop of OUT 40.00 points, over the 1.00 allowed; nothing was written ...": {func(t *testing.T, dir string) []docRun {
			args := []string{"--calib-data", filepath.Join(mnistData, "train_images.npy"), "--calib-samples", "64",
				"--eval-data", filepath.Join(mnistData, "test_images.npy"), "--eval-labels", filepath.Join(mnistData, "test_labels.npy"), "--eval-samples", "256"}
			cache := quantizeCache(t, t.TempDir(), args...)
			// Every range squeezed into +-0.01: INT8 loses the model.
			editCache(t, cache, func(c map[string]any) {
				for _, e := range c["tensors"].([]any) {
					e := e.(map[string]any)
					e["min"], e["max"] = math.Max(e["min"].(float64), -0.01), math.Min(e["max"].(float64), 0.01)
				}
			})
			return []docRun{{append([]string{"quantize", mnist, "-o", filepath.Join(dir, "q.onnx"), "--calib-cache", cache}, args...),
				[]string{"accuracy guard refused the INT8 model: accuracy drop of logits ", "over the 1.00 allowed; nothing was written"}}}
		}},

		// Files.
		"cache.json: not a calibration cache: ...": {func(t *testing.T, dir string) []docRun {
			notJSON := writeFile(t, filepath.Join(t.TempDir(), "cache.json"), []byte("\x00 not json"))
			inverted := writeFile(t, filepath.Join(t.TempDir(), "cache.json"), []byte(`{"version": 1, "method": "percentile", "tensors": [{"name": "x", "min": 1, "max": -1}]}`))
			return []docRun{
				{[]string{"quantize", mnist, "--calib-data", "random", "--calib-cache", notJSON, "-o", filepath.Join(dir, "q.onnx")}, []string{"cache.json: not a calibration cache: "}},
				{[]string{"quantize", mnist, "--calib-data", "random", "--calib-cache", inverted, "-o", filepath.Join(dir, "q.onnx")}, []string{`cache.json: tensor "x": min 1 > max -1`}},
			}
		}},
		"calibration cache ... was made for another model (or other passes)": {func(t *testing.T, dir string) []docRun {
			cache := quantizeCache(t, t.TempDir(), "--calib-data", "random")
			editCache(t, cache, func(c map[string]any) { c["model"] = strings.Repeat("0", 64) })
			return []docRun{{[]string{"quantize", mnist, "--calib-data", "random", "--calib-cache", cache, "-o", filepath.Join(dir, "q.onnx")},
				[]string{"calibration cache ", "was made for another model (or other passes)"}}}
		}},
		"config optc.yaml: line 2: unknown key calibraton at the top level": {func(t *testing.T, dir string) []docRun {
			cfg := writeFile(t, filepath.Join(dir, "optc.yaml"), []byte("model: m.onnx\ncalibraton: {data: x}\n"))
			return []docRun{{[]string{"build", "--config", cfg}, []string{"optc.yaml: line 2: unknown key calibraton at the top level"}}}
		}},
		"config optc.yaml: line 5: calibration.data: stat PATH: no such file or directory (relative paths in a config resolve against its folder)": {func(t *testing.T, dir string) []docRun {
			cfg := writeFile(t, filepath.Join(dir, "optc.yaml"), []byte("model: "+mnist+"\noutput: out\nint8: true\ncalibration:\n  data: calib.npy\n"))
			return []docRun{{[]string{"build", "--config", cfg}, []string{"optc.yaml: line 5: calibration.data: stat ", "calib.npy: no such file or directory (relative paths in a config resolve against its folder)"}}}
		}},
		"config optc.yaml: more than one YAML document; a config is one": {func(t *testing.T, dir string) []docRun {
			cfg := writeFile(t, filepath.Join(dir, "optc.yaml"), []byte("model: m.onnx\n---\nmodel: n.onnx\n"))
			return []docRun{{[]string{"build", "--config", cfg}, []string{"optc.yaml: more than one YAML document; a config is one"}}}
		}},
		"output folder DIR exists; use --force to replace it": {func(t *testing.T, dir string) []docRun {
			out := filepath.Join(dir, "out")
			writeFile(t, filepath.Join(out, "keep"), []byte("x"))
			return []docRun{{[]string{"build", mnist, "-o", out}, []string{"output folder " + out + " exists; use --force to replace it"}}}
		}},
		"new/ort/model.ort: missing from the build folder (its report.json times it)": {func(t *testing.T, dir string) []docRun {
			old := buildConvStack(t, dir, "old", convStackFile(t, dir, 8))
			new, copied := filepath.Join(dir, "new"), filepath.Join(dir, "copy")
			for _, d := range []string{new, copied} {
				if err := os.CopyFS(d, os.DirFS(old)); err != nil {
					t.Fatal(err)
				}
			}
			os.Remove(filepath.Join(new, "ort", "model.ort"))
			os.Remove(filepath.Join(copied, "manifest.json"))
			return []docRun{{[]string{"diff", old, new, "--remeasure"}, []string{"new/ort/model.ort: missing from the build folder (its report.json times it)"}},
				{[]string{"diff", copied, old, "--remeasure"}, []string{"copy/manifest.json: no such file: --remeasure needs the build folders (manifest.json, report.json and the artifacts)"}}}
		}},
		"save out/m.onnx: not a directory": {func(t *testing.T, dir string) []docRun {
			file := writeFile(t, filepath.Join(dir, "file"), []byte("a file"))
			runs := []docRun{{[]string{"convert", mnist, "-o", filepath.Join(file, "m.onnx")}, []string{"m.onnx: not a directory"}}}
			// A folder nobody may write to: /sys refuses even root.
			ro := "/sys"
			if os.Geteuid() != 0 {
				ro = filepath.Join(dir, "ro")
				if err := os.Mkdir(ro, 0o500); err != nil {
					t.Fatal(err)
				}
			}
			return append(runs, docRun{[]string{"convert", mnist, "-o", filepath.Join(ro, "m.onnx")}, []string{"m.onnx", "permission denied"}})
		}},
		"cannot write into /sys/out: permission denied": {func(t *testing.T, dir string) []docRun {
			return []docRun{{[]string{"run", mnist, "--data", "random", "-o", "/sys/out"}, []string{"cannot write into /sys/out: permission denied"}}}
		}},
		"cannot write out/q.onnx: permission denied": {func(t *testing.T, dir string) []docRun {
			missing := filepath.Join(dir, "missing", "q.onnx")
			return []docRun{{[]string{"quantize", mnist, "-o", missing, "--calib-data", "random"}, []string{"cannot write " + missing + ": no such file or directory"}},
				{[]string{"quantize", mnist, "-o", "/sys/q.onnx", "--weights", "int4"}, []string{"cannot write /sys/q.onnx: permission denied"}}}
		}},
		"save out/m.onnx: no space left on device": {func(t *testing.T, dir string) []docRun {
			disk := filepath.Join(dir, "disk")
			os.Mkdir(disk, 0o755)
			if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=64k"); err != nil {
				t.Skipf("cannot mount a tmpfs here (%v)", err)
			}
			t.Cleanup(func() { syscall.Unmount(disk, 0) })
			return []docRun{{[]string{"convert", mnist, "-o", filepath.Join(disk, "m.onnx")}, []string{"m.onnx", "no space left on device"}}}
		}},
	}

	for key, row := range rows {
		t.Run(row.section+"/"+key, func(t *testing.T) {
			c, ok := cases[key]
			if !ok {
				t.Fatalf("docs/errors.md documents %q (exit %d) but no test reproduces it: add a case to TestErrorsDocumented", key, row.status)
			}
			dir := t.TempDir()
			shown := false
			for _, r := range c.runs(t, dir) {
				// The accuracy guard prints its table before it fails.
				stdout := strings.HasPrefix(key, "accuracy guard refused")
				stderr := failsWithinOut(t, dir, row.status, r.want[0], stdout, r.args...)
				for _, w := range r.want[1:] {
					if !strings.Contains(stderr, w) {
						t.Errorf("optc %s: the error does not hold %q", strings.Join(r.args, " "), w)
					}
				}
				shown = shown || docMatches(key, stderr)
			}
			if !shown {
				t.Errorf("no reproduction prints what docs/errors.md shows: %q", key)
			}
		})
	}
	for key := range cases {
		if _, ok := rows[key]; !ok {
			t.Errorf("TestErrorsDocumented reproduces %q, which docs/errors.md no longer lists", key)
		}
	}
}

// placeholder is what docs/errors.md writes in place of a particular
// value: "...", a capital letter (N, B, OUT), a quoted name, a list of
// dims, a number, a file name.
var placeholder = regexp.MustCompile(`\.\.\.|\b[A-Z]+\b|"[^"]*"|\[[^\]]*\]|[0-9.]+|\S+\.(npy|npz|json|yaml|onnx|bin)\b`)

// docMatches reports whether the line holds the documented message: the
// pieces of it between placeholders, in order.
func docMatches(doc, line string) bool {
	at := 0
	for _, piece := range placeholder.Split(doc, -1) {
		piece = strings.TrimSpace(piece)
		if len(piece) < 4 {
			continue
		}
		i := strings.Index(line[at:], piece)
		if i < 0 {
			return false
		}
		at += i + len(piece)
	}
	return true
}
