package report

import (
	"math"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/report/schema"
)

// FromBench is the report of `optc bench --report DIR`: one model, its
// latency at each batch size (a single run: no interval for optc diff).
func FromBench(res *bench.Result) (*Report, error) {
	m := &Model{Name: res.Model, Role: "input", Latency: res.Timing()}
	if err := m.ReadGraph(res.Model); err != nil {
		return nil, err
	}
	r := &Report{Schema: Schema, Kind: "bench", Input: res.Model, Models: []*Model{m}, Details: res,
		Environment: environmentOf(res.IntraOpThreads, res.Level)}
	return r, nil
}

// FromQuantize is the report of `optc quantize --report DIR`: the float
// and INT8 models, their agreement, p50 latency and the per-tensor SQNR.
func FromQuantize(res *ptq.Result, level string, threads int) (*Report, error) {
	in := &Model{Name: res.Input, Role: "input", Precision: "fp32"}
	out := &Model{Name: res.Output, Role: "artifact", Precision: "int8", Accuracy: accuracyOfCompare(res.Accuracy)}
	for _, m := range []*Model{in, out} {
		if err := m.ReadGraph(m.Name); err != nil {
			return nil, err
		}
	}
	if a := res.Accuracy; a != nil && a.Accuracy != nil {
		acc := a.Accuracy.A
		in.Accuracy = &Accuracy{Samples: a.Samples, Task: &acc}
	}
	if len(res.Latency) > 0 {
		in.Latency, out.Latency = &latency.Timing{}, &latency.Timing{}
		for _, l := range res.Latency {
			in.Latency.Batches = append(in.Latency.Batches, latency.BatchTiming{Batch: l.Batch, Latency: latency.Latency{P50: l.FloatP50}, Throughput: l.FloatPerSecond})
			out.Latency.Batches = append(out.Latency.Batches, latency.BatchTiming{Batch: l.Batch, Latency: latency.Latency{P50: l.Int8P50}, Throughput: l.Int8PerSecond})
		}
	}
	r := &Report{Schema: Schema, Kind: "quantize", Input: res.Input, Output: res.Output, Models: []*Model{in, out},
		HeldOut: res.HeldOut, Caveats: res.Caveats, Quantization: []*Quantization{QuantizationOf(targetOf(res), res.Output, res)},
		Details: res, Environment: environmentOf(threads, level)}
	if res.Accuracy != nil {
		r.EvalData = res.Accuracy.Data
	}
	if res.Passes != nil {
		r.Passes = PassesOf(res.Passes.Passes)
	}
	r.SetDeltas()
	return r, nil
}

func targetOf(res *ptq.Result) string {
	if res.Quantize == nil {
		return ""
	}
	return string(res.Quantize.Target)
}

// ReadGraph sets the model's size and graph from the model file at path.
func (m *Model) ReadGraph(path string) error {
	g, err := graph.LoadFile(path)
	if err != nil {
		return err
	}
	defer g.Close()
	m.SetGraph(graph.Summarize(g))
	return nil
}

func accuracyOfCompare(c *compare.Result) *Accuracy {
	if c == nil {
		return nil
	}
	a := &Accuracy{Samples: c.Samples}
	if c.Accuracy != nil {
		acc := c.Accuracy.B
		a.Task = &acc
	}
	for _, o := range c.Outputs {
		snr := o.SNRdB
		if math.IsInf(float64(snr), 1) || snr > schema.MaxSQNR {
			snr = schema.MaxSQNR
		}
		a.Outputs = append(a.Outputs, OutputAccuracy{Name: o.Name, Elements: o.Total, FinitePairs: o.Elements,
			NaN: o.NaN, Inf: o.Inf, NonFinite: o.NewNonFinite, Cosine: o.Cosine, SNRdB: snr, MaxAbs: o.MaxAbs,
			MeanAbs: o.MeanAbs, Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
	}
	return a
}

func environmentOf(threads int, level string) Environment {
	return EnvironmentFrom(bench.MeasuredOn(), threads, level)
}
