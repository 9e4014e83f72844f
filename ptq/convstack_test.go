package ptq_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"optc/calibrate"
	"optc/data"
	"optc/graph"
	"optc/internal/ortenv"
	"optc/ort"
	"optc/ptq"
	"optc/quantize"
)

// convStack builds a ResNet-style stack of eight 3x3 convolutions with
// Relu at c channels on h x h inputs, with seeded He-initialised weights:
// the kind of model INT8 should speed up (FACTS.md measured 1.7-2.0x).
func convStack(tb testing.TB, c, h int64) *graph.Model {
	r := rand.New(rand.NewPCG(1, 2))
	g := graph.NewGraph("convstack")
	x, _ := g.NewValue("x")
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(c), graph.StaticDim(h), graph.StaticDim(h)})
	g.Inputs = []*graph.Value{x}
	cur := x
	for i := range 8 {
		w := make([]float32, c*c*9)
		for k := range w {
			w[k] = float32(r.NormFloat64() * 0.7 / float64(3*c))
		}
		wt, _ := graph.NewFloat32Tensor(fmt.Sprint("w", i), []int64{c, c, 3, 3}, w)
		wv, _ := g.AddInitializer(wt)
		conv, _ := g.NewValue(fmt.Sprint("conv", i))
		n, err := g.AddNode("Conv", []*graph.Value{cur, wv}, []*graph.Value{conv})
		if err != nil {
			tb.Fatal(err)
		}
		n.Name = fmt.Sprint("conv", i)
		n.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
		relu, _ := g.NewValue(fmt.Sprint("relu", i))
		g.AddNode("Relu", []*graph.Value{conv}, []*graph.Value{relu})
		cur = relu
	}
	cur.Type = x.Type
	g.Outputs = []*graph.Value{cur}
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 13}}, Graph: g}
}

// BenchmarkConvStackInt8 quantizes the conv stack (128 channels, 28x28)
// for ort-cpu and reports float/INT8 p50 at batch 1 and 8, level all,
// measured by optc quantize itself.
//
//	go test -run='^$' -bench=ConvStackInt8 -benchtime=1x ./ptq
func BenchmarkConvStackInt8(b *testing.B) {
	ortenv.Require(b)
	dir := b.TempDir()
	in := filepath.Join(dir, "convstack.onnx")
	if err := graph.Save(convStack(b, 128, 28), in, graph.SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		for _, threads := range []int{1, 0} {
			sess := ort.DefaultOptions()
			sess.IntraOpThreads = threads
			res, err := ptq.Run(ptq.Options{Input: in, Output: filepath.Join(dir, "q.onnx"),
				CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 32, Batch: 8},
				Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORTCPU},
				Session: sess})
			if err != nil {
				b.Fatal(err)
			}
			for _, l := range res.Latency {
				b.ReportMetric(l.FloatP50/l.Int8P50, fmt.Sprintf("speedup-b%d-t%d", l.Batch, threads))
				b.ReportMetric(l.FloatP50, fmt.Sprintf("float-p50-ms-b%d-t%d", l.Batch, threads))
			}
			if a := res.Accuracy; a != nil {
				b.ReportMetric(a.Outputs[0].Cosine, fmt.Sprintf("cosine-t%d", threads))
			}
		}
	}
}
