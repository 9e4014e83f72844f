package benchsuite

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
	"github.com/optc-dev/optc/task/tasks"
)

// ocrTaskModel is an OCR model with ground truth: its task, and the
// rendered sets it is calibrated and scored on (docs/tasks.md).
type ocrTaskModel struct {
	benchModel
	spec task.Spec
}

// ocrTaskModels are PP-OCRv4 det and rec on the rendered ground truth.
func ocrTaskModels() []ocrTaskModel {
	cache := install.CacheDir()
	ocr := func(f string) string { return filepath.Join(cache, "ocr-models", f) }
	lines := func(f string) string { return filepath.Join(cache, "textlines", f) }
	return []ocrTaskModel{
		{benchModel{name: "det", path: ocr("ch_PP-OCRv4_det_infer.onnx"), input: "x", shape: []int64{1, 3, 320, 320},
			calib: lines("det_calib.npy"), calibOpts: data.Options{Batch: 4},
			eval: lines("det_images.npy"), evalOpts: data.Options{Batch: 4}},
			task.Spec{Name: "text-detection", Labels: lines("det_boxes.json")}},
		{benchModel{name: "rec", path: ocr("ch_PP-OCRv4_rec_infer.onnx"), input: "x", shape: []int64{1, 3, 48, 320},
			calib: lines("rec_calib.npy"), calibOpts: data.Options{Batch: 8},
			eval: lines("rec_images.npy"), evalOpts: data.Options{Batch: 8}},
			task.Spec{Name: "ctc", Labels: lines("rec_labels.txt"), Dict: ocr("ppocr_keys_v1.txt")}},
	}
}

// ocrTechniques are the INT8 variants the OCR section measures: plain
// per-channel INT8 and each post-training technique.
var ocrTechniques = []struct {
	name       string
	techniques []schema.Technique
}{
	{"int8", nil},
	{"int8 bias-correction", []schema.Technique{quantize.TechniqueBiasCorrection}},
	{"int8 smoothquant", []schema.Technique{quantize.TechniqueSmoothQuant}},
	{"int8 gptq", []schema.Technique{quantize.TechniqueGPTQ}},
	{"int8 gptq+bias-correction", []schema.Technique{quantize.TechniqueGPTQ, quantize.TechniqueBiasCorrection}},
}

// ocrTask quantizes det and rec plainly and with each technique, scores
// every variant by its task metric on the whole ground-truth set, and
// times them beside FP32 (the original and optc's -O2 model). The guard is
// off: the figures are what each method gives, whatever it would decide.
func (s *suite) ocrTask() error {
	if s.opts.Quick {
		s.progress("ocr task: full suite only")
		return nil
	}
	for _, m := range ocrTaskModels() {
		vs, err := s.ocrVariants(m)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if err := s.timeVariants(m.benchModel, vs, []ort.Level{ort.LevelAll}); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

func (s *suite) ocrVariants(m ocrTaskModel) ([]variant, error) {
	dir := filepath.Join(s.opts.Work, "ocr-"+m.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	opt := filepath.Join(dir, "model.fp32.onnx")
	if err := s.optimized(m.benchModel, opt); err != nil {
		return nil, err
	}
	labels, factory := tasks.Scoring(m.spec)
	vs := []variant{{name: "original", path: m.path}, {name: "optimized", path: opt}}
	perChannel := true
	for i, t := range ocrTechniques {
		s.progress("%s: quantize (%s)", m.name, t.name)
		out := filepath.Join(dir, fmt.Sprintf("model.int8.%d.onnx", i))
		if _, err := ptq.Run(ptq.Options{Input: opt, Output: out, CalibData: m.calib, CalibOpts: m.calibOpts,
			Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT, PerChannel: &perChannel},
			EvalData: m.eval, EvalOpts: m.evalOpts, EvalLabels: labels, EvalTask: factory, Techniques: t.techniques,
			Session: timingSession(ort.LevelAll), Inputs: m.checkData().Spec, NoLatency: true, NoGuard: true}); err != nil {
			return nil, fmt.Errorf("quantize (%s): %w", t.name, err)
		}
		vs = append(vs, variant{name: t.name, path: out})
	}
	for i := range vs {
		s.progress("%s: score %s", m.name, vs[i].name)
		r, err := compare.Models(compare.Options{ModelA: m.path, ModelB: vs[i].path, Data: m.eval, DataOpts: m.evalOpts,
			Labels: labels, Scorer: factory, Atol: map[string]float64{"": math.Inf(1)}, Session: timingSession(ort.LevelAll)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", vs[i].name, err)
		}
		q := &Quality{Data: filepath.Base(m.eval), Samples: r.Samples, Top1Agree: -1, MinCosine: 1}
		for _, o := range r.Outputs {
			q.MinCosine = min(q.MinCosine, float64(o.Cosine))
		}
		if f := r.Task; f != nil {
			q.TaskMetric = f.Task + " " + f.Metric
			q.OriginalTask, q.Task = &f.A, &f.B
		}
		vs[i].quality = q
	}
	return vs, nil
}
