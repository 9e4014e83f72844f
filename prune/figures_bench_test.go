package prune

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/textlines"
)

// BenchmarkPruneFigures measures docs/prune.md's table (make bench-prune):
// each model × method × ratio pruned without and with calibration data
// (512 samples, no retraining), scored against the unpruned -O2 model on
// held-out data, and for cls channels:0.25 the ORT latency at level all,
// batch 8, in alternating repeated runs. OPTC_PRUNE_MODELS=mnist,cls,rec
// picks models (default all); it takes about 15 minutes on 2 cores.
func BenchmarkPruneFigures(b *testing.B) {
	want := strings.Split(os.Getenv("OPTC_PRUNE_MODELS"), ",")
	pick := func(name string) bool { return want[0] == "" || slices.Contains(want, name) }
	dir := b.TempDir()
	var rows []string
	row := func(model, meth string, plain, recon *compare.Result, params string) {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", model, meth, figure(plain), figure(recon), params))
		b.Log(rows[len(rows)-1])
	}
	if pick("mnist") {
		path := optimized(b, testenv.Model("mnist_cnn.onnx"), data.Options{})
		calib := &Data{Spec: testenv.Data(b, "mnist/train_images.npy"),
			Opts: data.Options{Batch: 64, Samples: 512, Shuffle: true, Seed: 1}, Session: ort.DefaultOptions()}
		images, labels := testenv.Data(b, "mnist/test_images.npy"), testenv.Data(b, "mnist/test_labels.npy")
		for _, spec := range []string{"channels:0.125", "channels:0.25", "channels:0.5", "2:4", "magnitude:0.5", "magnitude:0.75"} {
			meth, _ := ParseMethod(spec)
			var res [2]*compare.Result
			var rep *schema.PruneReport
			for i, d := range []*Data{nil, calib} {
				var m []byte
				rep, m = pruneWith(b, path, meth, Options{}, d)
				res[i] = scored(b, path, m, images, labels, data.Options{Batch: 64})
			}
			row("MNIST", spec, res[0], res[1], fmt.Sprintf("%d -> %d", rep.ParamsBefore, rep.ParamsAfter))
		}
	}
	if pick("cls") || pick("rec") {
		lines, err := textlines.Generate(textlines.CalibSeed, 512)
		if err != nil {
			b.Fatal(err)
		}
		writeLines(b, filepath.Join(dir, "calib.npy"), lines)
	}
	tl := func(f string) string { return testenv.Data(b, "textlines/"+f) }
	calibLines := &Data{Spec: filepath.Join(dir, "calib.npy"), Opts: data.Options{Batch: 16}, Session: ort.DefaultOptions()}
	if pick("cls") {
		path, _ := clsModel(b)
		for _, spec := range []string{"channels:0.25", "2:4"} {
			meth, _ := ParseMethod(spec)
			var res [2]*compare.Result
			var models [2][]byte
			var rep *schema.PruneReport
			for i, d := range []*Data{nil, calibLines} {
				rep, models[i] = pruneWith(b, path, meth, Options{}, d)
				res[i] = scored(b, path, models[i], tl("cls_images.npy"), tl("cls_labels.npy"), data.Options{Batch: 8})
			}
			row("PaddleOCR cls", spec, res[0], res[1], fmt.Sprintf("%d -> %d", rep.ParamsBefore, rep.ParamsAfter))
			if meth.Kind == "channels" {
				clsLatency(b, dir, path, models[1])
			}
		}
	}
	if pick("rec") {
		ocr := testenv.Data(b, "ocr-models")
		path := optimized(b, filepath.Join(ocr, "ch_PP-OCRv4_rec_infer.onnx"),
			data.Options{High: 1, Spec: data.Spec{Shapes: map[string][]int64{"x": {1, 3, 48, 192}}}})
		meth := Method{Kind: "channels", Ratio: 0.125}
		var res [2]*compare.Result
		var rep *schema.PruneReport
		for i, d := range []*Data{nil, calibLines} {
			var m []byte
			rep, m = pruneWith(b, path, meth, Options{}, d)
			res[i] = scored(b, path, m, tl("cls_images.npy"), "", data.Options{Batch: 8, Samples: 200})
		}
		row("PaddleOCR rec", meth.String(), res[0], res[1], fmt.Sprintf("%d -> %d", rep.ParamsBefore, rep.ParamsAfter))
	}
	b.Log("\n| model | method | without calibration data | with (reconstruction / OBS) | parameters |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n"))
}

// figure is accuracy (with labels) or the worst cosine, and top-1
// agreement.
func figure(r *compare.Result) string {
	cos := 1.0
	for _, o := range r.Outputs {
		cos = math.Min(cos, float64(o.Cosine))
	}
	if a := r.Accuracy; a != nil {
		return fmt.Sprintf("%.2f%% (drop %.2f; cosine %.4f)", a.B, a.DropPoints, cos)
	}
	return fmt.Sprintf("cosine %.4f", cos)
}

func writeLines(b *testing.B, path string, s *textlines.Set) {
	buf := make([]byte, 4*len(s.Images))
	for i, v := range s.Images {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	t, err := graph.NewTensor("x", graph.Float, []int64{int64(s.Len()), textlines.Channels, textlines.Height, textlines.Width}, buf)
	if err != nil {
		b.Fatal(err)
	}
	if err := data.WriteNpy(path, t); err != nil {
		b.Fatal(err)
	}
}

// clsLatency times the unpruned and the reconstructed cls in ORT (level
// all, batch 8, default threads), alternating, 5 runs of 1 s each, and
// logs the medians and ranges of the ratio.
func clsLatency(b *testing.B, dir, unpruned string, pruned []byte) {
	p := filepath.Join(dir, "cls_pruned.onnx")
	if err := os.WriteFile(p, pruned, 0o644); err != nil {
		b.Fatal(err)
	}
	var ratios, before, after []float64
	for range 5 {
		var p50 [2]float64
		for i, m := range []string{unpruned, p} {
			r, err := bench.Run(bench.Options{Model: m, Data: "random", DataOpts: data.Options{High: 1,
				Spec: data.Spec{Shapes: map[string][]int64{"x": {8, 3, 48, 192}}}}, Batches: []int{8},
				Session: ort.DefaultOptions(), Duration: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			p50[i] = r.Batches[0].Latency.P50
		}
		before, after, ratios = append(before, p50[0]), append(after, p50[1]), append(ratios, p50[1]/p50[0])
	}
	b.Logf("cls channels:0.25 reconstructed, ORT level all, batch 8: p50 unpruned %s ms, pruned %s ms, ratio %s",
		medianRange(before), medianRange(after), medianRange(ratios))
}

func medianRange(v []float64) string {
	s := slices.Clone(v)
	sort.Float64s(s)
	return fmt.Sprintf("%.3f [%.3f-%.3f]", s[len(s)/2], s[0], s[len(s)-1])
}

// pruneWith prunes the model at path with meth, data-driven when d is set,
// and returns the report and the pruned model's bytes (after Verify).
func pruneWith(t testing.TB, path string, meth Method, opts Options, d *Data) (*schema.PruneReport, []byte) {
	t.Helper()
	opts.Data = d
	return pruneLoaded(t, path, func(m *graph.Model) (*schema.PruneReport, error) { return Apply(m, meth, opts) })
}

// scored compares the pruned model with the unpruned one at path on
// images (and labels, when given).
func scored(t testing.TB, path string, pruned []byte, images, labels string, dopts data.Options) *compare.Result {
	t.Helper()
	res, err := compare.Models(compare.Options{ModelA: path, ModelB: "pruned", BInMemory: graph.Serialized{Bytes: pruned},
		Data: images, DataOpts: dopts, Labels: labels, Atol: map[string]float64{"": 1e9}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
