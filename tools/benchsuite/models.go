package benchsuite

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
)

// ModelRow is one artifact's speed against the original model, measured
// in the same rounds, with what the artifact costs in accuracy.
type ModelRow struct {
	Model   string `json:"model"`
	Variant string `json:"variant"` // original, optimized, int8, pruned
	Level   string `json:"ort_level"`
	Batch   int    `json:"batch"`
	// Medians over the repeats of the variant's own figures.
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Throughput float64 `json:"samples_per_s"`
	// Variant over original, per round (below 1 is faster for latency,
	// above 1 is faster for throughput).
	P50Ratio        Spread   `json:"p50_ratio"`
	P99Ratio        Spread   `json:"p99_ratio"`
	ThroughputRatio Spread   `json:"throughput_ratio"`
	Quality         *Quality `json:"quality,omitempty"`
}

// Quality is what a variant computes against the original model.
type Quality struct {
	Data    string `json:"data"`
	Samples int64  `json:"samples"`
	// Accuracy (percent) of the original and of the variant, with labels.
	OriginalAccuracy *float64 `json:"original_accuracy,omitempty"`
	Accuracy         *float64 `json:"accuracy,omitempty"`
	// Top1Agree is the share of samples whose class is the original's
	// (classifier outputs only; -1 when there is none).
	Top1Agree float64 `json:"top1_agreement"`
	// MinCosine is the worst cosine similarity over the outputs.
	MinCosine float64 `json:"min_cosine"`
	// TaskMetric names the task figure (percent) of the original
	// (OriginalTask) and of the variant (Task), when the data has ground
	// truth for a task.
	TaskMetric   string   `json:"task_metric,omitempty"`
	OriginalTask *float64 `json:"original_task,omitempty"`
	Task         *float64 `json:"task,omitempty"`
}

// benchModel is a model under test: where it is, the shape of one input
// sample it is timed at, and the data it is calibrated and judged on.
type benchModel struct {
	name, path string
	input      string  // the name of the model's image input
	shape      []int64 // one sample of it, for the timing runs
	// inputs, when set, replaces input and shape for models with several
	// inputs or token ids (shapes and value ranges of the timing data).
	inputs    *data.Spec
	calib     string
	calibOpts data.Options
	eval      string
	evalOpts  data.Options
	labels    string
	// randomData names .npy files (in the work folder) to fill with
	// this many uniform random samples of shape before use.
	randomData map[string]int
}

// benchModels lists the models: MNIST and cls in both suites, det and rec
// only in the full one.
func (s *suite) benchModels() []benchModel {
	cache := install.CacheDir()
	ocr := func(f string) string { return filepath.Join(cache, "ocr-models", f) }
	lines := func(f string) string { return filepath.Join(cache, "textlines", f) }
	models := []benchModel{
		{name: "mnist", path: filepath.Join(s.opts.Root, "testdata", "models", "mnist_cnn.onnx"), input: "input", shape: []int64{1, 1, 28, 28},
			calib: filepath.Join(cache, "mnist", "train_images.npy"), calibOpts: data.Options{Batch: 50, Samples: 200, Shuffle: true, Seed: 1},
			eval: filepath.Join(cache, "mnist", "test_images.npy"), evalOpts: data.Options{Batch: 100},
			labels: filepath.Join(cache, "mnist", "test_labels.npy")},
		{name: "cls", path: ocr("ch_ppocr_mobile_v2.0_cls_infer.onnx"), input: "x", shape: []int64{1, 3, 48, 192},
			calib: lines("cls_calib.npy"), calibOpts: data.Options{Batch: 8},
			eval: lines("cls_images.npy"), evalOpts: data.Options{Batch: 50}, labels: lines("cls_labels.npy")},
	}
	if s.opts.Quick {
		models[1].evalOpts.Samples = 500
		return models
	}
	return append(models,
		// det has no labelled page set here: calibrated and judged on
		// uniform random images (written as .npy files: ptq's per-tensor
		// SQNR reads 32-sample batches, which a --shape fixed at batch 1
		// refuses), so its agreement figure is weak.
		benchModel{name: "det", path: ocr("ch_PP-OCRv4_det_infer.onnx"), input: "x", shape: []int64{1, 3, 320, 320},
			calib: filepath.Join(s.opts.Work, "det-calib.npy"), calibOpts: data.Options{Batch: 4},
			eval: filepath.Join(s.opts.Work, "det-eval.npy"), evalOpts: data.Options{Batch: 4},
			randomData: map[string]int{"det-calib.npy": 32, "det-eval.npy": 16}},
		// rec reads the rendered text lines (48 high, like its training
		// crops; 192 wide here, 320 in the timing runs).
		benchModel{name: "rec", path: ocr("ch_PP-OCRv4_rec_infer.onnx"), input: "x", shape: []int64{1, 3, 48, 320},
			calib: lines("cls_calib.npy"), calibOpts: data.Options{Batch: 8, Samples: 64},
			eval: lines("cls_images.npy"), evalOpts: data.Options{Batch: 8, Samples: 200}},
	)
}

// timingSpec is the random data m is timed on: one sample of each input.
func (m benchModel) timingSpec() data.Spec {
	if m.inputs != nil {
		return *m.inputs
	}
	return data.Spec{Shapes: map[string][]int64{m.input: m.shape}}
}

// checkData is the random data the passes' results are checked on in
// ORT.
func (m benchModel) checkData() data.Options {
	return data.Options{Spec: m.timingSpec(), High: 1, Seed: 1}
}

// optimized writes optc's -O2 FP32 model of m to out, checked in ORT: the
// model `optc build` ships when INT8 does not pay.
func (s *suite) optimized(m benchModel, out string) error {
	s.progress("%s: optimize", m.name)
	if _, err := optimize.Run(optimize.Options{Input: m.path, Output: out, Level: 2, Check: true,
		CheckAtol: optimize.DefaultCheckAtol, CheckRtol: optimize.DefaultCheckRtol, DataOpts: m.checkData()}); err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	return nil
}

// The pruning the suite measures: a quarter of the channels of every
// prunable layer, rounded to ORT's channel blocks of 8.
var benchPrune = prune.Method{Kind: "channels", Ratio: 0.25}

// timingSession is how everything is timed: one intra-op thread, so that
// the other core absorbs the machine's other work.
func timingSession(level ort.Level) ort.Options {
	o := ort.DefaultOptions()
	o.Level, o.IntraOpThreads = level, 1
	return o
}

// modelSpeed builds each model's artifacts, judges them against the
// original, and times all of them round-robin at each ORT level.
func (s *suite) modelSpeed() error {
	return s.eachModel(s.benchModels(), s.measureModel)
}

// eachModel runs measure on each model, going on past a model that
// fails: the error lists every failure, each said as it happens.
func (s *suite) eachModel(models []benchModel, measure func(benchModel) error) error {
	var failed []string
	for _, m := range models {
		if err := measure(m); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", m.name, err))
			s.progress("%s failed: %v", m.name, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%v", failed)
	}
	return nil
}

type variant struct {
	name, path string
	quality    *Quality
}

func (s *suite) measureModel(m benchModel) error {
	vs, err := s.variants(m)
	if err != nil {
		return err
	}
	return s.timeVariants(m, vs, []ort.Level{ort.LevelAll, ort.LevelDisable})
}

// timeVariants times the variants (vs[0] the original) round-robin at
// batch 1 and 8 at each level and records one row per variant, level and
// batch.
func (s *suite) timeVariants(m benchModel, vs []variant, levels []ort.Level) error {
	window := time.Second
	if s.opts.Quick {
		window = 250 * time.Millisecond
	}
	batches := []int{1, 8}
	for _, level := range levels {
		// times[variant][batch] holds one bench.BatchResult per round.
		times := make([][][]bench.BatchResult, len(vs))
		for i := range times {
			times[i] = make([][]bench.BatchResult, len(batches))
		}
		for round := range s.opts.Repeats {
			for i, v := range vs {
				r, err := bench.Run(bench.Options{Model: v.path, Data: "random",
					DataOpts: data.Options{High: 1, Spec: m.timingSpec()},
					Batches:  batches, Session: timingSession(level), Duration: window, Warmup: 3})
				if err != nil {
					return fmt.Errorf("%s at level %s: %w", v.name, level, err)
				}
				for j := range batches {
					times[i][j] = append(times[i][j], r.Batches[j])
				}
			}
			s.progress("%s level %s round %d/%d", m.name, level, round+1, s.opts.Repeats)
		}
		for i, v := range vs {
			for j, b := range batches {
				s.res.Models = append(s.res.Models, modelRow(m.name, v, level.String(), b, times[0][j], times[i][j]))
			}
		}
	}
	return nil
}

// modelRow compares a variant's rounds with the original's rounds.
func modelRow(model string, v variant, level string, batch int, orig, got []bench.BatchResult) ModelRow {
	var p50, p99, tput, p50r, p99r, tputr []float64
	for k := range got {
		p50, p99, tput = append(p50, got[k].Latency.P50), append(p99, got[k].Latency.P99), append(tput, got[k].Throughput)
		p50r = append(p50r, got[k].Latency.P50/orig[k].Latency.P50)
		p99r = append(p99r, got[k].Latency.P99/orig[k].Latency.P99)
		tputr = append(tputr, got[k].Throughput/orig[k].Throughput)
	}
	return ModelRow{Model: model, Variant: v.name, Level: level, Batch: batch,
		P50Ms: spreadOf(p50).Median, P99Ms: spreadOf(p99).Median, Throughput: spreadOf(tput).Median,
		P50Ratio: spreadOf(p50r), P99Ratio: spreadOf(p99r), ThroughputRatio: spreadOf(tputr), Quality: v.quality}
}

// variants writes the optimized, INT8 and pruned artifacts of m and judges
// each against the original on m's evaluation data.
func (s *suite) variants(m benchModel) ([]variant, error) {
	dir := filepath.Join(s.opts.Work, m.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, n := range m.randomData {
		seed := fnv.New64a()
		seed.Write([]byte(name))
		if err := writeRandomNpy(filepath.Join(s.opts.Work, name), n, m.shape, seed.Sum64()); err != nil {
			return nil, err
		}
	}
	check := m.checkData()
	opt := filepath.Join(dir, "model.fp32.onnx")
	if err := s.optimized(m, opt); err != nil {
		return nil, err
	}
	s.progress("%s: quantize", m.name)
	int8 := filepath.Join(dir, "model.int8.onnx")
	perChannel := true
	if _, err := ptq.Run(ptq.Options{Input: opt, Output: int8, CalibData: m.calib, CalibOpts: m.calibOpts,
		Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT, Format: quantize.FormatQDQ, PerChannel: &perChannel},
		EvalData: m.eval, EvalOpts: m.evalOpts, EvalLabels: m.labels, Session: timingSession(ort.LevelAll),
		Inputs: check.Spec, NoLatency: true}); err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	s.progress("%s: prune %s", m.name, benchPrune)
	pruned := filepath.Join(dir, "model.pruned.onnx")
	if _, err := optimize.Run(optimize.Options{Input: m.path, Output: pruned, Level: 2, Check: true,
		CheckAtol: optimize.DefaultCheckAtol, CheckRtol: optimize.DefaultCheckRtol, DataOpts: check,
		Prune: []prune.Method{benchPrune}}); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	vs := []variant{{name: "original", path: m.path}, {name: "optimized", path: opt}, {name: "int8", path: int8},
		{name: "pruned " + benchPrune.String(), path: pruned}}
	for i := range vs {
		s.progress("%s: judge %s", m.name, vs[i].name)
		q, err := judge(m, vs[i].path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", vs[i].name, err)
		}
		vs[i].quality = q
	}
	return vs, nil
}

// judge runs the original and a variant on m's evaluation data, at the
// level the artifacts run at (all).
func judge(m benchModel, path string) (*Quality, error) {
	r, err := compare.Models(compare.Options{ModelA: m.path, ModelB: path, Data: m.eval, DataOpts: m.evalOpts,
		Labels: m.labels, Atol: map[string]float64{"": math.Inf(1)}, Session: timingSession(ort.LevelAll)})
	if err != nil {
		return nil, err
	}
	q := &Quality{Data: filepath.Base(m.eval), Samples: r.Samples, Top1Agree: -1, MinCosine: 1}
	for _, o := range r.Outputs {
		q.MinCosine = min(q.MinCosine, float64(o.Cosine))
		if o.Classifier && (q.Top1Agree < 0 || o.Top1Agree < q.Top1Agree) {
			q.Top1Agree = o.Top1Agree
		}
	}
	if r.Accuracy != nil {
		q.OriginalAccuracy, q.Accuracy = &r.Accuracy.A, &r.Accuracy.B
	}
	return q, nil
}

// writeRandomNpy writes n samples of shape (its axis 0 is the sample axis)
// of uniform [0, 1) values, the same for the same seed.
func writeRandomNpy(path string, n int, shape []int64, seed uint64) error {
	dims := append([]int64{int64(n)}, shape[1:]...)
	size := int64(1)
	for _, d := range dims {
		size *= d
	}
	r := rand.New(rand.NewPCG(seed, 2))
	vals := make([]float32, size)
	for i := range vals {
		vals[i] = r.Float32()
	}
	t, err := graph.NewFloat32Tensor("x", dims, vals)
	if err != nil {
		return err
	}
	return data.WriteNpy(path, t)
}
