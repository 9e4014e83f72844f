package build

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/report"
)

// Report is the build's report.json (and what report.md and report.html
// render). dir is the folder the artifacts are in (the working folder
// while the build finishes).
func (res *Result) Report(dir string) (*report.Report, error) {
	c := res.Config()
	r := &report.Report{Schema: report.Schema, Kind: "build", Input: res.Input, Output: res.Output,
		EvalData: res.EvalData, HeldOut: res.EvalHeldOut, ChecksStoppedAt: res.ChecksStoppedAt, Caveats: res.Caveats, Notes: res.Notes, Details: res}
	r.Environment = res.Environment.Report(c.Runtime.Threads, c.Runtime.Level)
	r.Verdict = &report.Verdict{Status: "ok", NotRecommended: res.NotRecommended, GuardOff: c.Quantize.NoGuard}
	for _, f := range res.Refused {
		r.Verdict.Refused = append(r.Verdict.Refused, f.Artifact)
	}
	switch {
	case len(r.Verdict.Refused) > 0:
		r.Verdict.Status = "refused"
	case len(r.Verdict.NotRecommended) > 0:
		r.Verdict.Status = "not-recommended"
	}

	in := &report.Model{Name: res.Input, Role: "input", Precision: "fp32", Latency: res.Baseline}
	if res.Optimize != nil && res.Optimize.Before != nil {
		in.SetGraph(res.Optimize.Before)
	}
	r.Models = append(r.Models, in)
	for _, a := range res.Artifacts {
		if a.Check == nil {
			continue
		}
		m := &report.Model{Name: a.Path, Role: "artifact", Target: a.Target, Precision: a.Precision, Bytes: a.Bytes,
			Accuracy: accuracyOf(a.Check), Latency: a.Timing}
		if a.Kind == "model" {
			if err := m.ReadGraph(filepath.Join(dir, filepath.FromSlash(a.Path))); err != nil {
				return nil, err
			}
		}
		if in.Accuracy == nil && a.Check.Accuracy != nil {
			// The input's task accuracy is measured next to every artifact.
			acc := a.Check.Accuracy.A
			in.Accuracy = &report.Accuracy{Samples: a.Check.Samples, Task: &acc}
		}
		if in.Accuracy == nil && a.Check.Task != nil {
			in.Accuracy = &report.Accuracy{Samples: a.Check.Samples}
			in.Accuracy.SetTask(a.Check.Task, true)
		}
		if l := a.Check.LM; l != nil {
			if in.Accuracy == nil {
				in.Accuracy = &report.Accuracy{Samples: a.Check.Samples}
			}
			if in.Accuracy.LM == nil {
				in.Accuracy.LM = &report.LM{Tokens: l.Tokens, Perplexity: l.PerplexityA, Agreement: 1, Accuracy: l.AccuracyA}
			}
		}
		r.Models = append(r.Models, m)
	}
	r.SetDeltas()
	if res.Optimize != nil && res.Optimize.Passes != nil {
		r.Passes = ptq.ReportPasses(res.Optimize.Passes.Passes)
	}
	for _, q := range res.Quantizations() {
		r.Quantization = append(r.Quantization, q.Result.Section(string(q.Scheme), q.Model))
	}
	if q := res.Placed(); q != nil {
		r.Placement, r.PlacementFrom = q.Placement, q.PlacementFrom
	}
	r.NCHWc, r.WeightsGuard = res.Layout, res.WeightsGuard
	if res.Optimize != nil && res.Optimize.Prune != nil {
		r.Pruning = pruningOf(res.Optimize.Prune)
	}
	return r, nil
}

func pruningOf(p *optimize.PruneResult) *report.Pruning {
	out := &report.Pruning{Methods: p.Reports, Spared: p.Spared, Latency: p.Latency, MinCosine: jsonfloat.Float(math.NaN())}
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

func accuracyOf(c *Check) *report.Accuracy {
	a := &report.Accuracy{Samples: c.Samples}
	if c.Accuracy != nil {
		acc := c.Accuracy.B
		a.Task = &acc
	}
	if c.Task != nil {
		a.SetTask(c.Task, false)
	}
	if l := c.LM; l != nil {
		a.LM = &report.LM{Tokens: l.Tokens, Perplexity: l.PerplexityB, IncreasePercent: l.IncreasePercent, Agreement: l.Agreement, Accuracy: l.AccuracyB}
	}
	for _, o := range c.Outputs {
		cos, rel := o.MinSampleCosine, o.RelError
		a.Outputs = append(a.Outputs, report.OutputAccuracy{Name: o.Name, Elements: o.Elements, FinitePairs: o.FinitePairs,
			NaN: o.NaN, Inf: o.Inf, NonFinite: o.NonFinite, Cosine: o.Cosine, MinSampleCosine: &cos, RelError: &rel, SNRdB: o.SNRdB, MaxAbs: o.MaxAbs,
			MeanAbs: o.MeanAbs, Top1Agree: o.Top1Agree, Top5Agree: o.Top5Agree})
	}
	return a
}

// writeReport writes report.json, report.md and report.html into dir.
func (res *Result) writeReport(dir string) error {
	r, err := res.Report(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return r.WriteFolder(dir)
}
