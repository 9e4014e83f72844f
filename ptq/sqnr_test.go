package ptq

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
)

// The per-tensor SQNR in one run per batch and in one run per tensor (each
// part computing only what it exposes) is the same, figure for figure.
func TestTensorSQNRSplitIdentical(t *testing.T) {
	ortenv.Require(t)
	m, err := convstack.Model(8, 8)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "convstack.onnx")
	if err := graph.Save(m, in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(limit int64) []TensorSQNR {
		t.Helper()
		saved := sqnrRunBytes
		sqnrRunBytes = limit
		defer func() { sqnrRunBytes = saved }()
		res, err := Run(Options{Input: in, Output: filepath.Join(dir, "q.onnx"),
			CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 8, Seed: 1},
			EvalData: "random", EvalOpts: data.Options{High: 1, Seed: 2},
			Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
			Session: ort.DefaultOptions(), NoLatency: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.TensorSQNR
	}
	one, split := run(1<<40), run(1)
	if len(one) < 4 {
		t.Fatalf("SQNR of %d tensors, want the conv stack's activations", len(one))
	}
	if len(split) != len(one) {
		t.Fatalf("%d tensors split, %d in one run", len(split), len(one))
	}
	t.Logf("%d tensors, worst %+v", len(one), one[0])
	for i := range one {
		if one[i] != split[i] {
			t.Errorf("tensor %d: %+v in one run, %+v split", i, one[i], split[i])
		}
	}
}
