package report

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/task"
)

// FromBuild turns a build's result into its report. dir is the folder the
// artifacts are in (the working folder while the build finishes).
func FromBuild(res *build.Result, dir string) (*Report, error) {
	c := res.Config()
	r := &Report{Schema: Schema, Kind: "build", Input: res.Input, Output: res.Output,
		EvalData: res.EvalData, HeldOut: res.EvalHeldOut, ChecksStoppedAt: res.ChecksStoppedAt, Caveats: res.Caveats, Notes: res.Notes, Details: res}
	r.Environment = environmentFrom(res.Environment, c.Runtime.Threads, c.Runtime.Level)
	r.Verdict = &Verdict{Status: "ok", NotRecommended: res.NotRecommended, GuardOff: c.Quantize.NoGuard}
	for _, f := range res.Refused {
		r.Verdict.Refused = append(r.Verdict.Refused, f.Artifact)
	}
	switch {
	case len(r.Verdict.Refused) > 0:
		r.Verdict.Status = "refused"
	case len(r.Verdict.NotRecommended) > 0:
		r.Verdict.Status = "not-recommended"
	}

	in := &Model{Name: res.Input, Role: "input", Precision: "fp32", Latency: res.Baseline}
	if res.Optimize != nil && res.Optimize.Before != nil {
		setGraph(in, res.Optimize.Before)
	}
	r.Models = append(r.Models, in)
	for _, a := range res.Artifacts {
		if a.Check == nil {
			continue
		}
		m := &Model{Name: a.Path, Role: "artifact", Target: a.Target, Precision: a.Precision, Bytes: a.Bytes,
			Accuracy: accuracyOf(a.Check), Latency: a.Timing}
		if a.Kind == "model" {
			if err := readGraph(m, filepath.Join(dir, filepath.FromSlash(a.Path))); err != nil {
				return nil, err
			}
		}
		if in.Accuracy == nil && a.Check.Accuracy != nil {
			// The input's task accuracy is measured next to every artifact.
			acc := a.Check.Accuracy.A
			in.Accuracy = &Accuracy{Samples: a.Check.Samples, Task: &acc}
		}
		if in.Accuracy == nil && a.Check.Task != nil {
			in.Accuracy = &Accuracy{Samples: a.Check.Samples}
			in.Accuracy.setTask(a.Check.Task, true)
		}
		if l := a.Check.LM; l != nil {
			if in.Accuracy == nil {
				in.Accuracy = &Accuracy{Samples: a.Check.Samples}
			}
			if in.Accuracy.LM == nil {
				in.Accuracy.LM = &LM{Tokens: l.Tokens, Perplexity: l.PerplexityA, Agreement: 1, Accuracy: l.AccuracyA}
			}
		}
		r.Models = append(r.Models, m)
	}
	for _, m := range r.Models[1:] {
		m.Delta = delta(in, m)
	}
	if res.Optimize != nil && res.Optimize.Passes != nil {
		r.Passes = passesOf(res.Optimize.Passes.Passes)
	}
	for _, q := range res.Quantizations() {
		r.Quantization = append(r.Quantization, quantizationOf(string(q.Scheme), q.Model, q.Result))
	}
	if q := res.Placed(); q != nil {
		r.Placement, r.PlacementFrom = q.Placement, q.PlacementFrom
	}
	r.NCHWc = res.Layout
	if res.Optimize != nil && res.Optimize.Prune != nil {
		r.Pruning = pruningOf(res.Optimize.Prune)
	}
	return r, nil
}

func pruningOf(p *optimize.PruneResult) *Pruning {
	out := &Pruning{Methods: p.Reports, Spared: p.Spared, Latency: p.Latency, MinCosine: jsonfloat.Float(math.NaN())}
	if c := p.Cost; c != nil {
		out.Data, out.Samples, out.Accuracy = c.Data, c.Samples, c.Accuracy
		for i, o := range c.Outputs {
			if i == 0 || o.Cosine < out.MinCosine {
				out.MinCosine = o.Cosine
			}
		}
	}
	return out
}

// Finish is build.Options.Finish: it writes report.json, report.md and
// report.html into the build's working folder.
func Finish(dir string, res *build.Result) error {
	r, err := FromBuild(res, dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return r.WriteFolder(dir)
}

func passesOf(ps []*passes.PassReport) []Pass {
	var out []Pass
	for _, p := range ps {
		out = append(out, Pass{Name: p.Name, Runs: p.Runs, Removed: p.Stats.Removed, Added: p.Stats.Added, Rewritten: p.Stats.Rewritten})
	}
	return out
}

func environmentFrom(e build.Environment, threads int, level string) Environment {
	return Environment{OS: e.OS, Arch: e.Arch, CPU: e.CPU, CPUFeatures: e.CPUFlags, Cores: e.Cores,
		Threads: threads, Level: level, ORTVersion: e.ORTVersion, GoVersion: e.GoVersion}
}

func setGraph(m *Model, s *graph.Summary) {
	m.Bytes, m.Params, m.Nodes, m.Ops = s.FileBytes, s.Parameters.Count, s.Nodes, s.OpTypes
}

func accuracyOf(c *build.Check) *Accuracy {
	a := &Accuracy{Samples: c.Samples}
	if c.Accuracy != nil {
		acc := c.Accuracy.B
		a.Task = &acc
	}
	if c.Task != nil {
		a.setTask(c.Task, false)
	}
	if l := c.LM; l != nil {
		a.LM = &LM{Tokens: l.Tokens, Perplexity: l.PerplexityB, IncreasePercent: l.IncreasePercent, Agreement: l.Agreement, Accuracy: l.AccuracyB}
	}
	for _, o := range c.Outputs {
		cos, rel := o.MinSampleCosine, o.RelError
		a.Outputs = append(a.Outputs, OutputAccuracy{Name: o.Name, Elements: o.Elements, FinitePairs: o.FinitePairs,
			NaN: o.NaN, Inf: o.Inf, NonFinite: o.NonFinite, Cosine: o.Cosine, MinSampleCosine: &cos, RelError: &rel, SNRdB: o.SNRdB, MaxAbs: o.MaxAbs,
			MeanAbs: o.MeanAbs, Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
	}
	return a
}

// setTask sets a task plug-in's figures: A's (the input model's) or B's.
func (a *Accuracy) setTask(f *task.Figure, modelA bool) {
	pick := func(x, y float64) float64 {
		if modelA {
			return x
		}
		return y
	}
	v := pick(f.A, f.B)
	a.Task, a.TaskMetric, a.TaskOthers = &v, f.Task+" "+f.Metric, nil
	for _, o := range f.Others {
		a.TaskOthers = append(a.TaskOthers, TaskFigure{Name: o.Name, Value: pick(o.A, o.B)})
	}
}

func quantizationOf(target, model string, q *ptq.Result) *Quantization {
	out := &Quantization{Target: target, Model: model, Method: q.Calibration.Method,
		CalibSamples: q.Calibration.Samples, FellBack: q.FellBack, Guard: q.Guard, Techniques: q.Techniques}
	if q.Quantize != nil {
		out.Quantized, out.LeftFloat = len(q.Quantize.Quantized), len(q.Quantize.Skipped)
		if q.Quantize.Dynamic {
			// The placement shipped dynamic INT8: nothing of the
			// calibration is in it.
			out.Method, out.CalibSamples = ptq.DynamicMethod, 0
		}
	}
	for _, s := range q.TensorSQNR {
		out.SQNR = append(out.SQNR, TensorSQNR{Tensor: s.Tensor, SQNRdB: s.SQNRdB})
	}
	return out
}

// delta is m against the input model.
func delta(in, m *Model) *Delta {
	d := &Delta{Nodes: m.Nodes - in.Nodes}
	if in.Bytes > 0 {
		d.BytesPercent = 100 * float64(m.Bytes-in.Bytes) / float64(in.Bytes)
	}
	if m.Nodes == 0 {
		d.Nodes = 0 // a graph optc cannot read
	}
	if t, ti := taskAccuracy(m), taskAccuracy(in); t != nil && ti != nil {
		p := *t - *ti
		d.AccuracyPoints = &p
	}
	if m.Latency != nil && in.Latency != nil {
		for _, b := range m.Latency.Batches {
			if ib := in.Latency.Batch(b.Batch); ib != nil && b.P50 > 0 {
				s := BatchSpeedup{Batch: b.Batch, P50: ib.P50 / b.P50}
				if b.P99 > 0 && ib.P99 > 0 { // else one was not reported
					s.P99 = ib.P99 / b.P99
				}
				d.Speedup = append(d.Speedup, s)
			}
		}
	}
	return d
}

func taskAccuracy(m *Model) *float64 {
	if m.Accuracy == nil {
		return nil
	}
	return m.Accuracy.Task
}
