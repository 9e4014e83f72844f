package placement_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// placementCase is one model of the acceptance table: how to calibrate and
// check it, and the sample shape its random timing inputs take.
type placementCase struct {
	name               string
	model              string
	calib, eval, label string
	samples            int
	shape              []int64
}

// BenchmarkPlacement is the acceptance table of docs/placement.md: for
// each model, --placement auto with the artifact at 1 thread (the search
// also times all cores), then an independent re-measurement, interleaved
// (placement.TimeInterleaved, about 3 s per batch size), of the FP32 input
// at level all, the all-INT8 model and the chosen INT8 placement at batch 1
// and 8, at 1 thread and all cores; the artifact column is whichever of
// FP32 and the chosen placement was recommended. It prints one
// markdown row per model and thread count.
//
//	go test -run='^$' -bench=Placement -benchtime=1x -timeout=60m ./placement
//
// PLACEMENT_MODELS=cls,convstack limits the models.
func BenchmarkPlacement(b *testing.B) {
	ortenv.Require(b)
	dir := b.TempDir()
	stack, err := convstack.Model(128, 28)
	if err != nil {
		b.Fatal(err)
	}
	stackPath := filepath.Join(dir, "convstack.onnx")
	if err := graph.Save(stack, stackPath, graph.SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	ocr := func(f string) string { return filepath.Join(testenv.Data(b, "ocr-models"), f) }
	tl := func(f string) string { return testenv.Data(b, "textlines/"+f) }
	cases := []placementCase{
		{"mnist", testenv.Model("mnist_cnn.onnx"), testenv.Data(b, "mnist/train_images.npy"),
			testenv.Data(b, "mnist/test_images.npy"), testenv.Data(b, "mnist/test_labels.npy"), 128, []int64{1, 1, 28, 28}},
		{"cls", ocr("ch_ppocr_mobile_v2.0_cls_infer.onnx"), tl("cls_calib.npy"), tl("cls_images.npy"), tl("cls_labels.npy"), 0, []int64{1, 3, 48, 192}},
		{"det", ocr("ch_PP-OCRv4_det_infer.onnx"), randomNpy(b, dir, "det", 8, 3, 160, 160), "", "", 0, []int64{1, 3, 160, 160}},
		{"rec", ocr("ch_PP-OCRv4_rec_infer.onnx"), randomNpy(b, dir, "rec", 8, 3, 48, 160), "", "", 0, []int64{1, 3, 48, 160}},
		{"convstack", stackPath, randomNpy(b, dir, "convstack", 32, 128, 28, 28), "", "", 0, []int64{1, 128, 28, 28}},
	}
	if only := os.Getenv("PLACEMENT_MODELS"); only != "" {
		cases = slices.DeleteFunc(cases, func(c placementCase) bool { return !slices.Contains(strings.Split(only, ","), c.name) })
	}
	fmt.Println("| model | threads | FP32 b1 ms | all-INT8 b1 | chosen INT8 b1 | artifact b1 | FP32 b8 ms | all-INT8 b8 | chosen INT8 b8 | artifact b8 | artifact | regions int8 | accuracy | search s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for range b.N {
		for _, c := range cases {
			placementRow(b, dir, c)
		}
	}
}

func placementRow(b *testing.B, dir string, c placementCase) {
	shapes := map[string][]int64{}
	m, err := graph.LoadFile(c.model)
	if err != nil {
		b.Fatal(err)
	}
	in := data.GraphInputs(m.Graph)[0].Name
	shapes[in] = c.shape
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	cache := filepath.Join(dir, c.name+".calib.json")
	opts := func(placementMode, out string) ptq.Options {
		o := ptq.Options{Input: c.model, Output: out, CalibData: c.calib, CalibCache: cache,
			CalibOpts: data.Options{Batch: 8, Samples: c.samples, Seed: 1, Shuffle: c.samples > 0},
			Method:    calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
			EvalData: c.eval, EvalOpts: data.Options{Batch: 8, Samples: 500}, EvalLabels: c.label,
			Session: sess, Inputs: data.Spec{Shapes: shapes}, NoLatency: true, Placement: placementMode, PlacementBudget: time.Minute}
		return o
	}
	allPath, autoPath := filepath.Join(dir, c.name+".all.onnx"), filepath.Join(dir, c.name+".auto.onnx")
	all, err := ptq.Run(opts(schema.ModeAllINT8, allPath))
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	auto, err := ptq.Run(opts(schema.ModeAuto, autoPath))
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	p := auto.Placement
	acc := "-"
	if a := auto.Accuracy; a != nil {
		acc = fmt.Sprintf("INT8 cosine %.4f", a.Outputs[0].Cosine)
		if a.Accuracy != nil {
			acc = fmt.Sprintf("FP32 %.2f%%, all-INT8 %.2f%%, chosen INT8 %.2f%%", a.Accuracy.A, all.Accuracy.Accuracy.B, a.Accuracy.B)
		}
	}
	var models []graph.Serialized
	for _, path := range []string{c.model, allPath, autoPath} {
		bs, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		models = append(models, graph.Serialized{Bytes: bs})
	}
	what := "INT8"
	if p.Recommended == schema.RecommendFP32 {
		what = "FP32"
	}
	for _, threads := range []int{1, 0} {
		s := sess
		s.IntraOpThreads = threads
		var cells []string
		for _, batch := range []int{1, 8} {
			p50, err := placement.TimeInterleaved(models, s, data.Spec{Shapes: shapes}, batch, time.Now().Add(3*time.Second))
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			artifact := p50[2]
			if p.Recommended == schema.RecommendFP32 {
				artifact = p50[0]
			}
			cells = append(cells, fmt.Sprintf("%.3f | %.3f | %.3f | %.3f", p50[0], p50[1], p50[2], artifact))
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %d of %d | %s | %.1f |\n", c.name, threads, cells[0], cells[1],
			what, len(p.Regions)-len(p.KeepFloat()), len(p.Regions), acc, p.SearchSeconds)
	}
	fmt.Printf("<!-- %s: %s -->\n", c.name, p.Reason)
}

// randomNpy writes samples uniform [0, 1) samples of shape dims to an
// .npy: the calibration and check data of the models without a data set
// here (few for det and rec: optc quantize's per-tensor SQNR holds every
// activation of one batch in memory).
func randomNpy(b *testing.B, dir, name string, samples int64, dims ...int64) string {
	shape := append([]int64{samples}, dims...)
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = r.Float32()
	}
	t, err := graph.NewFloat32Tensor("x", shape, vals)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, name+".npy")
	if err := data.WriteNpy(path, t); err != nil {
		b.Fatal(err)
	}
	return path
}
