package benchsuite

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
)

// zooInt8Models are the zoo architectures of the INT8-on-CPU table
// (docs/int8-cpu.md): where HardSwish, squeeze-excite and channel
// shuffles used to make INT8 lose, and a plain conv stack where it wins.
// Their dynamic-batch variants, 64x64, random weights.
var zooInt8Models = []string{"mobilenet_v3_large", "shufflenet_v2_x1_0", "resnet18"}

// zooInt8 is the zoo section of the full suite: for each model, the FP32
// input, the all-INT8 model (`optc quantize`'s defaults, ort-cpu) and the
// ORT artifact `optc build --int8` ships (the placement search's choice:
// the FP32 input, or its fastest INT8 placement when that is faster),
// timed round-robin at batch 1 and 8, one thread, level all. Random
// weights miss the accuracy guard, so the INT8 models are written anyway
// (AllowAccuracyLoss) and their quality column says what they cost.
func (s *suite) zooInt8() error {
	if s.opts.Quick {
		return nil // the quick suite keeps to MNIST and cls
	}
	var failed []string
	for _, name := range zooInt8Models {
		if err := s.zooModel(name); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			s.progress("%s failed: %v", name, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%v", failed)
	}
	return nil
}

func (s *suite) zooModel(name string) error {
	zoo := filepath.Join(install.CacheDir(), "zoo", name)
	m := benchModel{name: name, path: filepath.Join(zoo, "dynbatch.onnx"), input: "input", shape: []int64{1, 3, 64, 64},
		calib: filepath.Join(zoo, "calib.npy"), calibOpts: data.Options{Batch: 8},
		eval: filepath.Join(zoo, "calib.npy"), evalOpts: data.Options{Batch: 8}}
	for _, p := range []string{m.path, m.calib} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run `make zoo-models`)", err)
		}
	}
	dir := filepath.Join(s.opts.Work, "zoo", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	spec := data.Spec{Shapes: map[string][]int64{m.input: m.shape}}
	quant := func(mode, out string) (*ptq.Result, error) {
		s.progress("%s: quantize (placement %s)", name, mode)
		return ptq.Run(ptq.Options{Input: m.path, Output: out, CalibData: m.calib, CalibOpts: m.calibOpts,
			Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORTCPU},
			EvalData: m.eval, EvalOpts: m.evalOpts, Session: timingSession(ort.LevelAll), Inputs: spec,
			NoLatency: true, AllowAccuracyLoss: true, Placement: mode, PlacementBudget: time.Minute})
	}
	all := filepath.Join(dir, "all-int8.onnx")
	if _, err := quant(placement.ModeAllINT8, all); err != nil {
		return err
	}
	auto := filepath.Join(dir, "placement.onnx")
	res, err := quant(placement.ModeAuto, auto)
	if err != nil {
		return err
	}
	artifact := variant{name: "artifact: FP32", path: m.path}
	if p := res.Placement; p.Recommended == placement.RecommendINT8 {
		artifact = variant{name: fmt.Sprintf("artifact: INT8, %d of %d regions", len(p.Regions)-len(p.KeepFloat()), len(p.Regions)), path: auto}
	}
	vs := []variant{{name: "original", path: m.path}, {name: "int8 (all)", path: all}, artifact}
	for i := range vs {
		q, err := judge(m, vs[i].path)
		if err != nil {
			return fmt.Errorf("%s: %w", vs[i].name, err)
		}
		vs[i].quality = q
	}
	return s.timeVariants(m, vs, []ort.Level{ort.LevelAll})
}
