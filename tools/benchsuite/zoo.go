package benchsuite

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// zooInt8Models are the models of the INT8-on-CPU table
// (docs/int8-cpu.md): the zoo architectures where HardSwish,
// squeeze-excite and channel shuffles used to make INT8 lose, plain conv
// stacks where it wins, two BERT-like encoders, 64 and 256 wide
// (dynamic-batch variants, random weights, images 64x64, 128 tokens), and
// the PaddleOCR classifier with its labelled text lines.
func (s *suite) zooInt8Models() []benchModel {
	cache := install.CacheDir()
	image := func(name string) benchModel {
		zoo := filepath.Join(cache, "zoo", name)
		return benchModel{name: name, path: filepath.Join(zoo, "dynbatch.onnx"), input: "input", shape: []int64{1, 3, 64, 64},
			calib: filepath.Join(zoo, "calib.npy"), calibOpts: data.Options{Batch: 8},
			eval: filepath.Join(zoo, "calib.npy"), evalOpts: data.Options{Batch: 8}}
	}
	// The encoders are timed (and placed) on 128-token sequences, the
	// length encoders are deployed at; bert_tiny is calibrated and judged
	// on its 16-token samples, bert_small on 128-token ones.
	tokens := &data.Spec{Shapes: map[string][]int64{"input_ids": {1, 128}, "attention_mask": {1, 128}},
		Ranges: map[string][2]float64{"input_ids": {0, 999}}, Values: map[string]float64{"attention_mask": 1}}
	encoder := func(name string) benchModel {
		zoo := filepath.Join(cache, "zoo", name)
		return benchModel{name: name, path: filepath.Join(zoo, "dynamic.onnx"), inputs: tokens,
			calib: filepath.Join(zoo, "calib.npz"), calibOpts: data.Options{Batch: 8},
			eval: filepath.Join(zoo, "calib.npz"), evalOpts: data.Options{Batch: 8}}
	}
	lines := func(f string) string { return filepath.Join(cache, "textlines", f) }
	return []benchModel{
		image("mobilenet_v3_large"), image("shufflenet_v2_x1_0"), image("resnet18"), image("resnet50"),
		encoder("bert_tiny"), encoder("bert_small"),
		{name: "cls", path: filepath.Join(cache, "ocr-models", "ch_ppocr_mobile_v2.0_cls_infer.onnx"), input: "x", shape: []int64{1, 3, 48, 192},
			calib: lines("cls_calib.npy"), calibOpts: data.Options{Batch: 8},
			eval: lines("cls_images.npy"), evalOpts: data.Options{Batch: 50, Samples: 500}, labels: lines("cls_labels.npy")},
	}
}

// zooInt8 is the zoo section of the full suite: for each model, the FP32
// input, optc's -O2 FP32 model, the all-INT8 model (`optc quantize`'s
// defaults, ort) and the ORT artifact `optc build --int8` ships (the
// placement search's choice: the -O2 model, or its fastest INT8 placement
// when that is faster), timed round-robin at batch 1 and 8, one thread,
// level all. Random weights miss the accuracy guard, so their INT8 models
// are written anyway (AllowAccuracyLoss) and their quality column says
// what they cost; a model with labels keeps the guard.
func (s *suite) zooInt8() error {
	if s.opts.Quick {
		return nil // the quick suite keeps to MNIST and cls
	}
	models := s.zooInt8Models()
	for _, name := range s.opts.Models {
		if !slices.ContainsFunc(models, func(m benchModel) bool { return m.name == name }) {
			return fmt.Errorf("-models: no zoo int8 model %q", name)
		}
	}
	models = slices.DeleteFunc(models, func(m benchModel) bool { return !s.selected(m.name) })
	return s.eachModel(models, s.zooModel)
}

func (s *suite) zooModel(m benchModel) error {
	name := m.name
	for _, p := range []string{m.path, m.calib} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run `make zoo-models`)", err)
		}
	}
	dir := filepath.Join(s.opts.Work, "zoo", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	spec := m.timingSpec()
	quant := func(mode, out string) (*ptq.Result, error) {
		s.progress("%s: quantize (placement %s)", name, mode)
		return ptq.Run(ptq.Options{Input: m.path, Output: out, CalibData: m.calib, CalibOpts: m.calibOpts,
			Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
			EvalData: m.eval, EvalOpts: m.evalOpts, Session: timingSession(ort.LevelAll), Inputs: spec,
			EvalLabels: m.labels, NoLatency: true, AllowAccuracyLoss: m.labels == "", Placement: mode, PlacementBudget: time.Minute})
	}
	all := filepath.Join(dir, "all-int8.onnx")
	if _, err := quant(schema.ModeAllINT8, all); err != nil {
		return err
	}
	auto := filepath.Join(dir, "placement.onnx")
	res, err := quant(schema.ModeAuto, auto)
	if err != nil {
		return err
	}
	// optc's FP32 model (the passes at -O2) is what a build ships when
	// INT8 does not pay: the artifact row is then that model.
	opt := filepath.Join(dir, "model.fp32.onnx")
	if err := s.optimized(m, opt); err != nil {
		return err
	}
	vs := []variant{{name: "original", path: m.path}, {name: "optimized FP32", path: opt}, {name: "int8 (all)", path: all}}
	deployed := opt
	if p := res.Placement; p.Recommended == schema.RecommendINT8 {
		label := fmt.Sprintf("artifact: INT8, %d of %d regions", len(p.Regions)-len(p.KeepFloat()), len(p.Regions))
		switch {
		case p.Chosen == placement.CandidateDynamic:
			label = "artifact: dynamic INT8"
		case placement.IsAlternative(p.Chosen):
			label = fmt.Sprintf("artifact: INT8, scheme %s", p.Chosen)
		}
		if a := p.Aligned; a != nil && a.Chosen {
			label += fmt.Sprintf(", conv channels aligned to %d (%d convs)", a.Channels, a.Convs)
		}
		vs = append(vs, variant{name: label, path: auto})
		deployed = auto
	} else {
		vs[1].name = "artifact: FP32 (optimized)"
	}
	// The build's nchwc stage: the FP32 model shaped for ORT's blocked
	// layout replaces the artifact when it is confirmed faster.
	if block := ort.NCHWcBlock(); block > 0 {
		s.progress("%s: nchwc layout (block %d) against %s", name, block, filepath.Base(deployed))
		shaped := filepath.Join(dir, "model.fp32.nchwc.onnx")
		rec, err := build.NCHWc(build.LayoutOptions{Float: opt, Deployed: deployed, Output: shaped, Block: block,
			Session: timingSession(ort.LevelAll), Inputs: spec, Batches: []int{1, 8}})
		if err != nil {
			return fmt.Errorf("nchwc: %w", err)
		}
		s.progress("%s: nchwc: %s", name, rec.Reason)
		if rec.Deployed {
			if deployed == opt {
				vs[1].name = "optimized FP32"
			} else {
				vs[len(vs)-1].name = strings.Replace(vs[len(vs)-1].name, "artifact: ", "", 1)
			}
			vs = append(vs, variant{name: fmt.Sprintf("artifact: FP32, NCHWc layout (%d convs padded, %d HardSigmoid bridges)", rec.Convs, rec.Bridges), path: shaped})
		}
	}
	for i := range vs {
		q, err := judge(m, vs[i].path)
		if err != nil {
			return fmt.Errorf("%s: %w", vs[i].name, err)
		}
		vs[i].quality = q
	}
	return s.timeVariants(m, vs, []ort.Level{ort.LevelAll})
}
