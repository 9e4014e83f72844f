package trtlint

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/lint"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// TestTensorRTOnQuantizedMNIST lints what optc's quantizer makes of the
// MNIST CNN (BN folded by -O2, min/max ranges from 256 training images):
// the tensorrt target passes without findings, the ort target (uint8
// activations, int32 biases) fails on its types.
func TestTensorRTOnQuantizedMNIST(t *testing.T) {
	ortenv.Require(t)
	train := testenv.Data(t, "mnist/train_images.npy")
	if _, err := ort.Init(""); err != nil {
		t.Fatal(err)
	}
	fp32 := filepath.Join(t.TempDir(), "mnist_o2.onnx")
	if _, err := optimize.Run(optimize.Options{Input: testenv.Model("mnist_cnn.onnx"), Output: fp32, Level: 2}); err != nil {
		t.Fatal(err)
	}
	base, err := graph.LoadFile(fp32)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	src, err := data.Open(train, data.GraphInputs(base.Graph), data.Options{Batch: 64, Samples: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	stats, err := calibrate.Collect(base, src, calibrate.DefaultTensors(base), calibrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := stats.Ranges(calibrate.MinMax, calibrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string][2]float64{}
	for name, r := range rs {
		ranges[name] = [2]float64{r.Min, r.Max}
	}
	if fs := Check(base); len(fs) != 0 {
		t.Errorf("the float model: %s", rules(fs))
	}
	for _, target := range []quantize.Target{quantize.TargetTensorRT, quantize.TargetORT} {
		m := testgraph.LoadFile(t, fp32)
		rep, err := quantize.Apply(m, ranges, quantize.Options{Target: target})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Quantized) < 4 {
			t.Fatalf("%s: quantized only %v", target, rep.Quantized)
		}
		fs := Check(m)
		t.Logf("%s: %d findings, %d errors: %s", target, len(fs), lint.Errors(fs), rules(fs))
		if target == quantize.TargetTensorRT {
			if len(fs) != 0 {
				t.Errorf("findings on the tensorrt target: %+v", fs)
			}
			continue
		}
		got := map[string]int{}
		for _, f := range fs {
			got[f.Rule]++
		}
		// Every activation Q and DQ is uint8 and every bias DQ int32.
		// (Their zero points are 0 here: MNIST's activations are >= 0.)
		if got[RuleQDQType] != 2*rep.QDQPairs+rep.Biases || rep.Biases == 0 {
			t.Errorf("ort (%d Q/DQ pairs, %d int32 biases): %v", rep.QDQPairs, rep.Biases, got)
		}
	}
}
