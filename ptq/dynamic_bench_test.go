package ptq

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// BenchmarkDynamicZoo is the table of docs/quantize.md's "Dynamic INT8":
// the zoo's bert_tiny (sequence 16 and 128) and vit_tiny as FP32 (the
// input), static INT8 (`optc quantize`, all-INT8, calibrated on the zoo's
// calibration data) and dynamic INT8 (`optc quantize --dynamic`): cosine
// and top-1 agreement of every output with FP32, file bytes, and latency
// at batch 1 and 8, one thread, ORT level all, as rounds in which every
// variant runs once in rotating order (bench.Run, a 300 ms window per
// variant); medians and ranges over the rounds (OPTC_BENCH_ROUNDS,
// default 7).
func BenchmarkDynamicZoo(b *testing.B) {
	ortenv.Require(b)
	rounds := 7
	if s := os.Getenv("OPTC_BENCH_ROUNDS"); s != "" {
		fmt.Sscan(s, &rounds)
	}
	bert, bertCalib := testenv.Data(b, "zoo/bert_tiny/dynamic.onnx"), testenv.Data(b, "zoo/bert_tiny/calib.npz")
	vit, vitCalib := testenv.Data(b, "zoo/vit_tiny/dynbatch.onnx"), testenv.Data(b, "zoo/vit_tiny/calib.npy")
	seq := func(n int64) data.Spec {
		return data.Spec{Shapes: map[string][]int64{"input_ids": {1, n}, "attention_mask": {1, n}},
			Ranges: map[string][2]float64{"input_ids": {0, 1000}}, Values: map[string]float64{"attention_mask": 1}}
	}
	cases := []struct {
		name, model, calib string
		spec               data.Spec // timing inputs
		eval               string    // what cosine is measured on
	}{
		{"bert_tiny seq 16", bert, bertCalib, seq(16), bertCalib},
		{"bert_tiny seq 128", bert, bertCalib, seq(128), "random"},
		{"vit_tiny", vit, vitCalib, data.Spec{Ranges: map[string][2]float64{"input": {-2, 2}}}, vitCalib},
	}
	level := ort.DefaultOptions()
	level.Level, level.IntraOpThreads = ort.LevelAll, 1
	var sb strings.Builder
	fmt.Fprintf(&sb, "ORT level all, 1 thread; %d rounds; GOMAXPROCS %d\n\n", rounds, runtime.GOMAXPROCS(0))
	sb.WriteString("| model | variant | quantized layers | min cosine to FP32 (output) | top-1 agreement | file bytes | p50 b1 ms (range) | p50 b8 ms (range) | b1 / b8 vs FP32 |\n|---|---|---|---|---|---|---|---|---|\n")
	dir := b.TempDir()
	for _, c := range cases {
		calibOpts := data.Options{Batch: 8}
		static, dynamic := filepath.Join(dir, "static.onnx"), filepath.Join(dir, "dynamic.onnx")
		sres, err := Run(Options{Input: c.model, Output: static, CalibData: c.calib, CalibOpts: calibOpts,
			Method: calibrate.Percentile, Session: level, Inputs: c.spec, NoLatency: true, AllowAccuracyLoss: true})
		if err != nil {
			b.Fatalf("%s static: %v", c.name, err)
		}
		dres, err := Run(Options{Input: c.model, Output: dynamic, Dynamic: true, Session: level, Inputs: c.spec, NoLatency: true,
			EvalData: c.eval, EvalOpts: data.Options{Batch: 8, Spec: c.spec, Samples: 32, Seed: 1}, AllowAccuracyLoss: true})
		if err != nil {
			b.Fatalf("%s dynamic: %v", c.name, err)
		}
		variants := []struct{ name, path string }{{"fp32", c.model}, {"static int8", static}, {"dynamic int8", dynamic}}
		layers := []string{"-", fmt.Sprint(len(sres.Quantize.Quantized)), fmt.Sprint(len(dres.Quantize.Quantized))}
		// p50s[variant][batch] over rounds
		p50s := make([][2][]float64, len(variants))
		serialized := make([]graph.Serialized, len(variants))
		for i, v := range variants {
			bs, err := os.ReadFile(v.path)
			if err != nil {
				b.Fatal(err)
			}
			serialized[i] = graph.Serialized{Bytes: bs}
		}
		for r := 0; r < rounds; r++ {
			for j := range variants {
				i := (j + r) % len(variants)
				res, err := bench.Run(bench.Options{Model: variants[i].name, InMemory: serialized[i], Data: "random",
					DataOpts: data.Options{High: 1, Spec: c.spec}, Batches: []int{1, 8}, Session: level, Duration: 300 * time.Millisecond})
				if err != nil {
					b.Fatalf("%s %s: %v", c.name, variants[i].name, err)
				}
				for k := range 2 {
					p50s[i][k] = append(p50s[i][k], res.Batches[k].Latency.P50)
				}
			}
		}
		med := func(xs []float64) (float64, float64, float64) {
			s := slices.Clone(xs)
			slices.Sort(s)
			return s[len(s)/2], s[0], s[len(s)-1]
		}
		for i, v := range variants {
			cos, agree := "1", "100%"
			if i > 0 {
				r, err := compare.Models(compare.Options{ModelA: "fp32", ModelB: v.name, AInMemory: serialized[0], BInMemory: serialized[i],
					Data: c.eval, DataOpts: data.Options{Batch: 8, Spec: c.spec, Samples: 32, Seed: 1}, Atol: map[string]float64{"": 1e9}, Session: level})
				if err != nil {
					b.Fatal(err)
				}
				worst := r.Outputs[0]
				for _, o := range r.Outputs {
					if o.Cosine < worst.Cosine {
						worst = o
					}
					if o.Classifier {
						agree = fmt.Sprintf("%.1f%% (%s)", 100*o.Top1Agree, o.Name)
					}
				}
				cos = fmt.Sprintf("%.5f (%s)", float64(worst.Cosine), worst.Name)
			}
			m1, lo1, hi1 := med(p50s[i][0])
			m8, lo8, hi8 := med(p50s[i][1])
			f1, _, _ := med(p50s[0][0])
			f8, _, _ := med(p50s[0][1])
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %d | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.2fx / %.2fx |\n",
				c.name, v.name, layers[i], cos, agree, len(serialized[i].Bytes), m1, lo1, hi1, m8, lo8, hi8, f1/m1, f8/m8)
		}
	}
	fmt.Print(sb.String())
}
