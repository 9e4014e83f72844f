package cmd

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/mnist"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

var imageArgs = []string{"--image-resize", "256", "--image-size", "224x200", "--image-layout", "NHWC", "--image-color", "bgr",
	"--image-scale", "1/127.5", "--image-mean", "1,1,1", "--image-std", "0.5, 0.25,2"}

var wantImage = data.ImageOptions{Resize: 256, Height: 224, Width: 200, Layout: "NHWC", Color: "bgr",
	Scale: 1 / 127.5, Mean: []float64{1, 1, 1}, Std: []float64{0.5, 0.25, 2}}

func TestImageFlags(t *testing.T) {
	g := &globals{}
	var run *RunOptions
	c := newCmdRun(StdIO(), g, func(o *RunOptions) error { run = o; return nil })
	c.SetArgs(append([]string{"m.onnx", "--data", "imgs", "-o", "out"}, imageArgs...))
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run.Infer.DataOpts.Image, wantImage) {
		t.Errorf("run: %+v, want %+v", run.Infer.DataOpts.Image, wantImage)
	}

	var bench *BenchOptions
	c = newCmdBench(StdIO(), g, func(o *BenchOptions) error { bench = o; return nil })
	c.SetArgs([]string{"m.onnx", "--data", "imgs", "--image-size", "28", "--image-color", "gray"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := (data.ImageOptions{Height: 28, Width: 28, Layout: "NCHW", Color: "gray", Scale: 1.0 / 255}); !reflect.DeepEqual(bench.Bench.DataOpts.Image, want) {
		t.Errorf("bench: %+v, want %+v", bench.Bench.DataOpts.Image, want)
	}

	// quantize: one set of flags for calibration and evaluation data.
	var q *QuantizeOptions
	c = newCmdQuantize(StdIO(), g, func(o *QuantizeOptions) error { q = o; return nil })
	c.SetArgs(append([]string{"m.onnx", "-o", "q.onnx", "--calib-data", "calib", "--eval-data", "eval"}, imageArgs...))
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.PTQ.CalibOpts.Image, wantImage) || !reflect.DeepEqual(q.PTQ.EvalOpts.Image, wantImage) {
		t.Errorf("quantize: calibration %+v, evaluation %+v, want %+v", q.PTQ.CalibOpts.Image, q.PTQ.EvalOpts.Image, wantImage)
	}
}

func TestImageFlagUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-size", "224x"}, `--image-size "224x"`},
		{[]string{"--image-size", "0x4"}, `--image-size "0x4"`},
		{[]string{"--image-scale", "1/0"}, `--image-scale "1/0"`},
		{[]string{"--image-scale", "0"}, `--image-scale "0"`},
		{[]string{"--image-mean", "0.5,x,1"}, `--image-mean "0.5,x,1": "x" is not a number`},
		{[]string{"--image-mean", "0.5,0.5"}, "image mean has 2 values; color rgb has 3 channels"},
		{[]string{"--image-color", "gray", "--image-std", "1,2,3"}, "image std has 3 values; color gray has 1 channels"},
		{[]string{"--image-std", "1,0,1"}, "channel 1 is 0"},
		{[]string{"--image-layout", "CHW"}, `image layout "CHW": want NCHW or NHWC`},
		{[]string{"--image-color", "rgba"}, `image color "rgba"`},
		{[]string{"--image-resize", "-1"}, "must not be negative"},
	} {
		for _, cmd := range [][]string{{"run", "m.onnx", "-o", "out", "--data", "imgs"}, {"quantize", "m.onnx", "-o", "q.onnx", "--calib-data", "imgs"}} {
			status, stdout, stderr := run(t, append(cmd, c.args...)...)
			failsCleanly(t, status, 2, stdout, stderr, c.want)
		}
	}
}

// mnistImageFolder writes the first n digits of an MNIST split (a .npy
// pair in the cache) as a PNG class folder, with labels.npy beside the
// images in the order the folder is read.
func mnistImageFolder(t *testing.T, split string, n int) (dir, labels string) {
	t.Helper()
	it, err := data.ReadNpy(testenv.Data(t, "mnist/"+split+"_images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := data.ReadNpy(testenv.Data(t, "mnist/"+split+"_labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	var s mnist.Split
	if s.Images, err = it.Float32s(); err != nil {
		t.Fatal(err)
	}
	if s.Labels, err = lt.Int64s(); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	order, err := mnist.WriteImages(dir, s, n, ".png")
	if err != nil {
		t.Fatal(err)
	}
	labs := make([]int64, len(order))
	for k, i := range order {
		labs[k] = s.Labels[i]
	}
	l, err := graph.NewInt64Tensor("labels", []int64{int64(n)}, labs)
	if err != nil {
		t.Fatal(err)
	}
	labels = filepath.Join(dir, "labels.npy") // not an image: the folder ignores it
	if err := data.WriteNpy(labels, l); err != nil {
		t.Fatal(err)
	}
	return dir, labels
}

// TestImageFolderCompareAndQuantizeMNIST runs the MNIST CNN from PNG
// folders through the CLI: compare scores the held-out digits, quantize
// calibrates on training digits and evaluates on the held-out ones.
func TestImageFolderCompareAndQuantizeMNIST(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Model("mnist_cnn.onnx")
	eval, labels := mnistImageFolder(t, "test", 400)
	calib, _ := mnistImageFolder(t, "train", 256)

	var cmp struct {
		Samples  int64 `json:"samples"`
		Accuracy struct {
			A float64 `json:"accuracy_a"`
		} `json:"accuracy"`
	}
	decode(t, run2json(t, "compare", model, model, "--data", eval, "--labels", labels, "--batch", "50", "--image-color", "gray", "--json"), &cmp)
	if cmp.Samples != 400 || cmp.Accuracy.A < 97 {
		t.Errorf("compare: %d samples, accuracy %.2f%%", cmp.Samples, cmp.Accuracy.A)
	}

	var q struct {
		Calibration struct {
			Samples int64 `json:"samples"`
		} `json:"calibration"`
		Accuracy int8AccuracyJSON
		HeldOut  bool `json:"eval_data_held_out"`
	}
	out := filepath.Join(t.TempDir(), "q.onnx")
	decode(t, run2json(t, "quantize", model, "-o", out, "--calib-data", calib, "--calib-samples", "128", "--image-color", "gray",
		"--eval-data", eval, "--eval-labels", labels, "--json"), &q)
	acc := q.Accuracy.Accuracy
	t.Logf("MNIST from PNG folders: float %.2f%%, int8 %.2f%% (%d calibration images)", acc.A, acc.B, q.Calibration.Samples)
	if q.Calibration.Samples != 128 || acc.A != cmp.Accuracy.A || acc.A-acc.B > 1 || !q.HeldOut {
		t.Errorf("quantize: %d calibration samples, float %.2f%% (compare said %.2f%%), int8 %.2f%%, held out %v",
			q.Calibration.Samples, acc.A, cmp.Accuracy.A, acc.B, q.HeldOut)
	}
}
