package build

import (
	"fmt"
	"math"
	"time"

	"optc/bench"
	"optc/compare"
	"optc/data"
	"optc/ort"
	"optc/quantize"
)

// Check is an artifact against the input model on the evaluation data.
type Check struct {
	Samples int64 `json:"samples"`
	// MinCosine and MinTop1 are the worst over the outputs (top-1 over
	// classifier-shaped outputs; -1 when there is none).
	MinCosine float64           `json:"min_cosine"`
	MinTop1   float64           `json:"min_top1_agreement"`
	Accuracy  *compare.Accuracy `json:"accuracy,omitempty"` // with eval labels: A is the input, B the artifact
	Outputs   []OutputCheck     `json:"outputs"`
	// Level is the ORT level the check ran at: the build's, but at most
	// basic for a quantized model meant for another runtime (TensorRT), so
	// that its Q/DQ run as that runtime computes them (ptq.qualitySession).
	Level string `json:"ort_level,omitempty"`
}

// OutputCheck is one output's agreement with the input model.
type OutputCheck struct {
	Name      string  `json:"name"`
	Cosine    float64 `json:"cosine"`
	SNRdB     float64 `json:"snr_db"` // capped at 200 when the outputs are identical
	MaxAbs    float64 `json:"max_abs_error"`
	MeanAbs   float64 `json:"mean_abs_error"`
	Top1Agree float64 `json:"top1_agreement,omitempty"`
	Top5Agree float64 `json:"top5_agreement,omitempty"`
}

// Timing is a model's latency in ORT at the runtime settings: the median
// over latency.repeats short runs, and each run, so that optc diff can tell
// a change from noise.
type Timing struct {
	ColdStartMs float64             `json:"cold_start_ms"` // session creation + first run
	Batches     []bench.BatchResult `json:"batches"`
	Repeats     []Repeat            `json:"repeats,omitempty"`
}

// Repeat is one timing run.
type Repeat struct {
	ColdStartMs float64             `json:"cold_start_ms"`
	Batches     []bench.BatchResult `json:"batches"`
}

// verify checks and times every model artifact ORT can run, and times the
// input model as the baseline.
func (b *builder) verify() error {
	spec, dopts := b.eval.spec, b.eval.opts
	var err error
	if b.res.Baseline, err = b.timing(b.c.Model, ""); err != nil {
		return fmt.Errorf("%s: %w", b.c.Model, err)
	}
	for _, a := range b.res.Artifacts {
		if a.Kind != "model" && a.Kind != "ort-model" {
			continue
		}
		path, runPath := b.dir.tmpPath(a.Path), ""
		if a.Kind == "ort-model" {
			// optc cannot parse .ort files: its interface is the model it
			// was written from.
			path, runPath = b.dir.tmpPath(a.From), b.dir.tmpPath(a.Path)
		}
		b.progress("verify %s", a.Path)
		sess := b.session()
		if sc, err := quantize.SchemeFor(quantize.Target(a.Target)); err == nil && sc.OtherRuntime &&
			a.Precision == "int8" && sess.Level > ort.LevelBasic {
			sess.Level = ort.LevelBasic
		}
		r, err := compare.Models(compare.Options{
			ModelA: b.c.Model, ModelB: path, BRun: runPath, Data: spec, DataOpts: dopts, Labels: b.c.Eval.Labels,
			Atol: map[string]float64{"": math.Inf(1)}, Session: sess, ORTLib: b.c.Runtime.ORTLib,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
		a.Check = checkOf(r)
		a.Check.Level = sess.Level.String()
		if a.Timing, err = b.timing(path, runPath); err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
	}
	return nil
}

// evalData is what the artifacts are checked on: the evaluation data;
// else the calibration samples calibration did not draw (with
// calibration.samples below the data's size; the same seeded draw, the
// rest of it); else the calibration data itself, which the report says is
// not held out; else random inputs (agreement only). It is decided once
// and recorded in the result.
func (b *builder) evalData() (string, data.Options) {
	c := b.c
	switch {
	case c.Eval.Data != "":
		b.res.EvalData, b.res.EvalHeldOut = c.Eval.Data, true
		return c.Eval.Data, b.dataOptions(c.Eval.Data, c.Eval.Batch, c.Eval.Samples)
	case c.Calibration.Data != "" && c.Calibration.Samples > 0 && c.Calibration.Data != "random":
		b.res.EvalData, b.res.EvalHeldOut = c.Calibration.Data+" (the samples calibration did not draw)", true
		o := b.dataOptions(c.Calibration.Data, c.Eval.Batch, c.Eval.Samples)
		o.Shuffle, o.Skip = true, c.Calibration.Samples
		return c.Calibration.Data, o
	case c.Calibration.Data != "":
		b.res.EvalData = c.Calibration.Data
		b.note(notHeldOut)
		return c.Calibration.Data, b.dataOptions(c.Calibration.Data, c.Eval.Batch, 0)
	}
	b.res.EvalData = "random"
	b.note("no eval or calibration data: the artifacts were checked on 64 random inputs in [0, 1), agreement only")
	return "random", b.dataOptions("random", c.Eval.Batch, 64)
}

const notHeldOut = "no eval data and calibration used every sample: the artifacts were checked on the calibration data, which is not held out (give eval.data, or calibration.samples below the data's size to check on the rest)"

// timing measures a model on random inputs at every latency batch size,
// latency.repeats times, each run taking an equal share of latency.duration.
func (b *builder) timing(model, runModel string) (*Timing, error) {
	repeats := max(b.c.Latency.Repeats, 1)
	t := &Timing{}
	for range repeats {
		r, err := bench.Run(bench.Options{
			Model: model, RunModel: runModel, Data: "random",
			DataOpts: data.Options{High: 1, Seed: 1, Shapes: b.c.Shapes}, Batches: b.c.Latency.Batches,
			Session: b.session(), Duration: b.c.Latency.Duration.Duration / time.Duration(repeats), ORTLib: b.c.Runtime.ORTLib,
		})
		if err != nil {
			return nil, err
		}
		t.Repeats = append(t.Repeats, Repeat{ColdStartMs: r.ColdStart.SessionCreateMs + r.ColdStart.FirstRunMs, Batches: r.Batches})
	}
	median := func(f func(Repeat) float64) float64 {
		xs := make([]float64, len(t.Repeats))
		for i, r := range t.Repeats {
			xs[i] = f(r)
		}
		return bench.Median(xs)
	}
	t.ColdStartMs = median(func(r Repeat) float64 { return r.ColdStartMs })
	for i, first := range t.Repeats[0].Batches {
		at := func(f func(bench.BatchResult) float64) float64 {
			return median(func(r Repeat) float64 { return f(r.Batches[i]) })
		}
		m := bench.BatchResult{Batch: first.Batch}
		for _, r := range t.Repeats {
			m.Latency.N += r.Batches[i].Latency.N
			m.WallS += r.Batches[i].WallS
		}
		m.Latency.Min = at(func(x bench.BatchResult) float64 { return x.Latency.Min })
		m.Latency.P50 = at(func(x bench.BatchResult) float64 { return x.Latency.P50 })
		m.Latency.P90 = at(func(x bench.BatchResult) float64 { return x.Latency.P90 })
		m.Latency.P95 = at(func(x bench.BatchResult) float64 { return x.Latency.P95 })
		m.Latency.P99 = at(func(x bench.BatchResult) float64 { return x.Latency.P99 })
		m.Latency.Max = at(func(x bench.BatchResult) float64 { return x.Latency.Max })
		m.Latency.Mean = at(func(x bench.BatchResult) float64 { return x.Latency.Mean })
		m.Latency.Stddev = at(func(x bench.BatchResult) float64 { return x.Latency.Stddev })
		m.Latency.CV = at(func(x bench.BatchResult) float64 { return x.Latency.CV })
		m.Throughput = at(func(x bench.BatchResult) float64 { return x.Throughput })
		t.Batches = append(t.Batches, m)
	}
	return t, nil
}

func checkOf(r *compare.Result) *Check {
	c := &Check{Samples: r.Samples, MinCosine: 1, MinTop1: -1, Accuracy: r.Accuracy}
	for _, o := range r.Outputs {
		snr := o.SNRdB
		if math.IsInf(snr, 1) || snr > 200 {
			snr = 200
		}
		c.Outputs = append(c.Outputs, OutputCheck{Name: o.Name, Cosine: o.Cosine, SNRdB: snr, MaxAbs: o.MaxAbs,
			MeanAbs: o.MeanAbs, Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
		c.MinCosine = math.Min(c.MinCosine, o.Cosine)
		if o.Classifier && (c.MinTop1 < 0 || o.Top1Agree < c.MinTop1) {
			c.MinTop1 = o.Top1Agree
		}
	}
	return c
}

func (b *builder) note(s string) { b.res.Notes = append(b.res.Notes, s) }
