package ptq

import (
	"math"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/report"
	"github.com/optc-dev/optc/report/schema"
)

// Report is the report of `optc quantize --report DIR`: the float and
// INT8 models, their agreement, p50 latency and the per-tensor SQNR, as
// measured at ORT level and threads.
func (res *Result) Report(level string, threads int) (*report.Report, error) {
	in := &report.Model{Name: res.Input, Role: "input", Precision: "fp32"}
	out := &report.Model{Name: res.Output, Role: "artifact", Precision: "int8", Accuracy: accuracyOf(res.Accuracy)}
	for _, m := range []*report.Model{in, out} {
		if err := m.ReadGraph(m.Name); err != nil {
			return nil, err
		}
	}
	if a := res.Accuracy; a != nil && a.Accuracy != nil {
		acc := a.Accuracy.A
		in.Accuracy = &report.Accuracy{Samples: a.Samples, Task: &acc}
	}
	if len(res.Latency) > 0 {
		in.Latency, out.Latency = &latency.Timing{}, &latency.Timing{}
		for _, l := range res.Latency {
			in.Latency.Batches = append(in.Latency.Batches, latency.BatchTiming{Batch: l.Batch, Latency: latency.Latency{P50: l.FloatP50}, Throughput: l.FloatPerSecond})
			out.Latency.Batches = append(out.Latency.Batches, latency.BatchTiming{Batch: l.Batch, Latency: latency.Latency{P50: l.Int8P50}, Throughput: l.Int8PerSecond})
		}
	}
	target := ""
	if res.Quantize != nil {
		target = string(res.Quantize.Target)
	}
	r := &report.Report{Schema: report.Schema, Kind: "quantize", Input: res.Input, Output: res.Output, Models: []*report.Model{in, out},
		HeldOut: res.HeldOut, Caveats: res.Caveats, Quantization: []*report.Quantization{res.Section(target, res.Output)},
		Details: res, Environment: bench.MeasuredOn().Report(threads, level)}
	if res.Accuracy != nil {
		r.EvalData = res.Accuracy.Data
	}
	if res.Passes != nil {
		r.Passes = ReportPasses(res.Passes.Passes)
	}
	r.SetDeltas()
	return r, nil
}

// Section is this quantization's section of report.json: the INT8 model
// for target, written as model.
func (res *Result) Section(target, model string) *report.Quantization {
	out := &report.Quantization{Target: target, Model: model, Method: res.Calibration.Method,
		CalibSamples: res.Calibration.Samples, FellBack: res.FellBack, Guard: res.Guard, Techniques: res.Techniques}
	if res.Quantize != nil {
		out.Quantized, out.LeftFloat = len(res.Quantize.Quantized), len(res.Quantize.Skipped)
		if res.Quantize.Dynamic {
			// The placement shipped dynamic INT8: nothing of the
			// calibration is in it.
			out.Method, out.CalibSamples = schema.DynamicMethod, 0
		}
	}
	for _, s := range res.TensorSQNR {
		out.SQNR = append(out.SQNR, report.TensorSQNR{Tensor: s.Tensor, SQNRdB: s.SQNRdB})
	}
	return out
}

// ReportPasses is report.json's passes table: what each pass did.
func ReportPasses(ps []*passes.PassReport) []report.Pass {
	var out []report.Pass
	for _, p := range ps {
		out = append(out, report.Pass{Name: p.Name, Runs: p.Runs, Removed: p.Stats.Removed, Added: p.Stats.Added, Rewritten: p.Stats.Rewritten})
	}
	return out
}

// accuracyOf is the INT8 model's agreement with the float model, as
// report.json holds it (nil when nothing was checked).
func accuracyOf(c *compare.Result) *report.Accuracy {
	if c == nil {
		return nil
	}
	a := &report.Accuracy{Samples: c.Samples}
	if c.Accuracy != nil {
		acc := c.Accuracy.B
		a.Task = &acc
	}
	for _, o := range c.Outputs {
		snr := o.SNRdB
		if math.IsInf(float64(snr), 1) || snr > schema.MaxSQNR {
			snr = schema.MaxSQNR
		}
		a.Outputs = append(a.Outputs, report.OutputAccuracy{Name: o.Name, Elements: o.Total, FinitePairs: o.Elements,
			NaN: o.NaN, Inf: o.Inf, NonFinite: o.NewNonFinite, Cosine: o.Cosine, SNRdB: snr, MaxAbs: o.MaxAbs,
			MeanAbs: o.MeanAbs, Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
	}
	return a
}
