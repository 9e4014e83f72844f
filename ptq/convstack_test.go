package ptq_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
)

// BenchmarkConvStackInt8 quantizes the conv stack (128 channels, 28x28)
// for ort and reports float/INT8 p50 at batch 1 and 8, level all,
// measured by optc quantize itself.
//
//	go test -run='^$' -bench=ConvStackInt8 -benchtime=1x ./ptq
func BenchmarkConvStackInt8(b *testing.B) {
	ortenv.Require(b)
	dir := b.TempDir()
	in := filepath.Join(dir, "convstack.onnx")
	m, err := convstack.Model(128, 28)
	if err != nil {
		b.Fatal(err)
	}
	if err := graph.Save(m, in, graph.SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		for _, threads := range []int{1, 0} {
			sess := ort.DefaultOptions()
			sess.IntraOpThreads = threads
			res, err := ptq.Run(ptq.Options{Input: in, Output: filepath.Join(dir, "q.onnx"),
				CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 32, Batch: 8},
				Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
				Session: sess})
			if err != nil {
				b.Fatal(err)
			}
			for _, l := range res.Latency {
				b.ReportMetric(l.FloatP50/l.Int8P50, fmt.Sprintf("speedup-b%d-t%d", l.Batch, threads))
				b.ReportMetric(l.FloatP50, fmt.Sprintf("float-p50-ms-b%d-t%d", l.Batch, threads))
			}
			if a := res.Accuracy; a != nil {
				b.ReportMetric(float64(a.Outputs[0].Cosine), fmt.Sprintf("cosine-t%d", threads))
			}
		}
	}
}

// A model with a fixed batch size of 1 quantizes with its per-tensor SQNR
// and latency measured, and its INT8 placement searched, at that batch
// size (they used to ask for batches of 32 and 8).
func TestStaticBatchOne(t *testing.T) {
	ortenv.Require(t)
	m, err := convstack.Model(8, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range m.Graph.Inputs {
		in.Type.Shape[0] = graph.Dim{Kind: graph.DimStatic, Value: 1}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "static.onnx")
	if err := graph.Save(m, in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := ptq.Run(ptq.Options{Input: in, Output: filepath.Join(dir, "q.onnx"),
		CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 8, Seed: 1},
		Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT}, Session: ort.DefaultOptions(),
		Placement: "auto", PlacementBudget: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TensorSQNR) == 0 {
		t.Error("no per-tensor SQNR")
	}
	if p := res.Placement; p == nil || len(p.Timings) == 0 || p.Timings[0].Batch != 1 {
		t.Errorf("placement %+v, want timings at batch 1", p)
	}
	if len(res.Latency) != 1 || res.Latency[0].Batch != 1 {
		t.Errorf("latency rows %+v, want batch 1 only", res.Latency)
	}
}
