package optimize_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// BenchmarkOptimizedVsOriginal measures, in one run, each real model and
// its -O2 result in ORT at level disable (optc's passes do the work) and at
// level all (ORT's own optimizations on top), batch 1 and 8, one thread,
// and reports the optimized/original p50 ratio (below 1 is faster).
//
//	go test -run='^$' -bench=OptimizedVsOriginal -benchtime=1x ./optimize
func BenchmarkOptimizedVsOriginal(b *testing.B) {
	ortenv.Require(b)
	ocr := testenv.Data(b, "ocr-models")
	models := []struct {
		name, path string
		shape      []int64 // one sample; nil when the input is static but for N
	}{
		{"mnist", testenv.Model("mnist_cnn.onnx"), nil},
		{"cls", filepath.Join(ocr, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), []int64{1, 3, 48, 192}},
		{"det", filepath.Join(ocr, "ch_PP-OCRv4_det_infer.onnx"), []int64{1, 3, 320, 320}},
		{"rec", filepath.Join(ocr, "ch_PP-OCRv4_rec_infer.onnx"), []int64{1, 3, 48, 320}},
	}
	for _, m := range models {
		dopts := data.Options{High: 1}
		if m.shape != nil {
			dopts.Shapes = map[string][]int64{"x": m.shape}
		}
		out := filepath.Join(b.TempDir(), m.name+".onnx")
		if _, err := optimize.Run(optimize.Options{Input: m.path, Output: out, Level: 2, Check: true, DataOpts: dopts}); err != nil {
			b.Fatalf("%s: %v", m.name, err)
		}
		for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
			b.Run(fmt.Sprintf("%s/level=%s", m.name, level), func(b *testing.B) {
				for range b.N {
					for i, batch := range []int{1, 8} {
						// Alternate the two models three times and take the
						// median p50 of each, so a noisy second hurts both.
						var orig, opt []float64
						for range 3 {
							orig = append(orig, measure(b, m.path, level, batch, dopts))
							opt = append(opt, measure(b, out, level, batch, dopts))
						}
						b.ReportMetric(latency.Median(opt)/latency.Median(orig), fmt.Sprintf("p50-ratio-b%d", batch))
						if i == 0 {
							b.ReportMetric(latency.Median(orig), "orig-p50-ms-b1")
						}
					}
				}
			})
		}
	}
}

func measure(b *testing.B, model string, level ort.Level, batch int, dopts data.Options) float64 {
	sess := ort.DefaultOptions()
	sess.Level, sess.IntraOpThreads = level, 1
	r, err := bench.Run(bench.Options{Model: model, Data: "random", DataOpts: dopts, Batches: []int{batch},
		Session: sess, Duration: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return r.Batches[0].Latency.P50
}
