package build

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// WriteTable prints the build's summary: one row per model artifact with
// its agreement with the input and its latency next to the baseline's.
func WriteTable(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "built %s -> %s (targets: %s)\n", r.Input, r.Output, strings.Join(r.Targets, ", "))
	if r.Environment.CPU != "" {
		fmt.Fprintf(w, "measured on %s (%d cores; %s), ONNX Runtime %s\n", r.Environment.CPU, r.Environment.Cores,
			strings.Join(r.Environment.CPUFlags, " "), r.Environment.ORTVersion)
	}
	fmt.Fprintf(w, "checked on %s\n", r.CheckedOn())
	for _, l := range r.Caveats.Lines() {
		fmt.Fprintf(w, "warning: %s\n", l)
	}
	if n := r.Baseline.Windows(); n > 1 {
		fmt.Fprintf(w, "latency: p50 the median of %d timing runs per batch size, p90-p99 over their runs together\n", n)
	}
	fmt.Fprintln(w)
	if err := writeArtifactRows(w, r); err != nil {
		return err
	}
	for _, a := range r.Artifacts {
		if a.Check != nil && a.Check.NonFinite > 0 {
			fmt.Fprintf(w, "NaN/Inf: %s is NaN or infinite where the input model is finite, so its figures are over the finite pairs only; do not deploy it: %s\n",
				a.Path, a.Check.nonFiniteText())
		}
		if c := a.CheckCalibration; c != nil && c.NonFinite > 0 {
			fmt.Fprintf(w, "NaN/Inf: %s is NaN or infinite on the calibration data where the input model is finite; do not deploy it: %s\n",
				a.Path, c.nonFiniteText())
		}
	}
	for _, a := range r.Artifacts {
		if a.Check == nil {
			fmt.Fprintf(w, "  %s (%s)\n", a.Path, a.Kind)
		}
	}
	for i, a := range lmChecked(r) {
		l := a.Check.LM
		if i == 0 {
			fmt.Fprintf(w, "language model (%d next tokens): input perplexity %.4f, next-token accuracy %.2f%%%s\n", l.Tokens, float64(l.PerplexityA), 100*l.AccuracyA, seqText(r.Baseline))
		}
		fmt.Fprintf(w, "  %s: perplexity %.4f (%+.2f%%), next-token agreement with the input %.2f%%, accuracy %.2f%%%s\n",
			a.Path, float64(l.PerplexityB), float64(l.IncreasePercent), 100*l.Agreement, 100*l.AccuracyB, seqText(a.Timing))
	}
	if g := r.WeightsGuard; g != nil {
		verdict := "passed"
		if !g.Pass {
			verdict = "FAILED, kept by allow_accuracy_loss (not recommended, not deployed)"
		}
		fmt.Fprintf(w, "perplexity guard %s: %+.2f%% over the input (at most %g%%)\n", verdict, float64(g.IncreasePercent), g.MaxIncreasePercent)
	}
	if r.Optimize != nil && r.Optimize.Prune != nil {
		writePrune(w, r.Optimize.Prune)
	}
	writeQuantizations(w, r)
	if q := r.Placed(); q != nil && q.Placement != nil {
		writePlacement(w, q.Placement, q.PlacementFrom)
	}
	for _, t := range target.All() {
		if s, ok := t.(target.Summarized); ok && r.TargetReports[t.Name()] != nil {
			for _, line := range s.Summary(r.TargetReports[t.Name()]) {
				fmt.Fprintln(w, line)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// writeArtifactRows is the table: the input, then one row per checked
// artifact and per refused INT8 model.
func writeArtifactRows(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	batches := r.Baseline.Batches
	head := "artifact\tprecision\tbytes\tmin cosine\trel error\tNaN/Inf in/art\ttop-1 agree\taccuracy\tverdict\tcold ms\t"
	for _, b := range batches {
		head += fmt.Sprintf("p50 b%d ms\tp99 b%d ms\tspeed-up b%d\t", b.Batch, b.Batch, b.Batch)
	}
	fmt.Fprintln(tw, head)
	row := func(name, precision, bytes, cos, rel, bad, top1, acc, verdict string, t *latency.Timing) {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, precision, bytes, cos, rel, bad, top1, acc, verdict)
		if t == nil {
			// Not timed (another runtime's artifact): dashes keep the
			// columns of the rows after it aligned.
			line += "-\t" + strings.Repeat("-\t-\t-\t", len(batches))
			fmt.Fprintln(tw, line)
			return
		}
		line += fmt.Sprintf("%.1f\t", t.ColdStartMs)
		for i, b := range t.Batches {
			speedup := "-"
			if i < len(batches) && b.Latency.P50 > 0 {
				speedup = fmt.Sprintf("%.2fx", batches[i].Latency.P50/b.Latency.P50)
			}
			p99 := "-" // too few runs for it (see the notes)
			if b.Latency.P99 > 0 {
				p99 = fmt.Sprintf("%.3f", b.Latency.P99)
			}
			line += fmt.Sprintf("%.3f\t%s\t%s\t", b.Latency.P50, p99, speedup)
		}
		fmt.Fprintln(tw, line)
	}
	baseAcc := "-"
	for _, a := range r.Artifacts {
		if a.Check != nil && a.Check.Accuracy != nil {
			baseAcc = fmt.Sprintf("%.2f%%", a.Check.Accuracy.A)
			break
		}
		if a.Check != nil && a.Check.Task != nil {
			baseAcc = fmt.Sprintf("%.2f%%", a.Check.Task.A)
			break
		}
	}
	row(r.Input+" (input)", "fp32", "", "", "", "", "", baseAcc, "", r.Baseline)
	for _, a := range r.Artifacts {
		if a.Check == nil {
			continue
		}
		top1, acc := "-", "-"
		if a.Check.MinTop1 >= 0 {
			top1 = fmt.Sprintf("%.2f%%", 100*a.Check.MinTop1)
		}
		if a.Check.Accuracy != nil {
			acc = fmt.Sprintf("%.2f%%", a.Check.Accuracy.B)
		}
		if a.Check.Task != nil {
			acc = fmt.Sprintf("%.2f%%", a.Check.Task.B)
		}
		verdict := "ok"
		switch {
		case slices.Contains(r.NotRecommended, a.Path):
			verdict = "NOT RECOMMENDED"
		case len(a.Check.Failed) > 0:
			verdict = "misses (guard off)"
		}
		bad := a.Check.nonFiniteCell()
		row(a.Path, a.Precision, fmt.Sprint(a.Bytes), a.Check.MinCosine.Text("%.5f"), a.Check.MaxRelError.Text("%.3g"), bad, top1, acc, verdict, a.Timing)
	}
	for _, f := range r.Refused {
		// Measured against the optimized float model by the guard, not
		// written: no bytes, no timing.
		cos, rel := refusedFigures(f.Guard)
		row(f.Artifact, "int8", "-", cos, rel, "-", "-", "-", "REFUSED", nil)
	}
	return tw.Flush()
}

// writeQuantizations says per INT8 scheme what was quantized, what fell
// back, and the guard's verdict.
func writeQuantizations(w io.Writer, r *Result) {
	for _, scheme := range quantize.Targets() {
		q := struct {
			name string
			res  *ptq.Result
		}{"int8 " + string(scheme), r.INT8[scheme]}
		if q.res == nil || q.res.Quantize == nil {
			continue
		}
		fell := "none"
		if len(q.res.FellBack) > 0 {
			fell = strings.Join(q.res.FellBack, ", ")
		}
		fmt.Fprintf(w, "%s: %d nodes quantized, %d left float; fell back for accuracy: %s\n",
			q.name, len(q.res.Quantize.Quantized), len(q.res.Quantize.Skipped), fell)
		if g := q.res.Guard; g != nil {
			fmt.Fprintf(w, "%s: %s\n", q.name, guardLine(g))
		}
	}
}

// refusedFigures are a refused model's worst cosine and relative error
// as the guard measured them, for its row.
func refusedFigures(g *schema.Guard) (cos, rel string) {
	cos, rel = "-", "-"
	worstCos, worstRel := 2.0, -1.0
	for _, c := range g.Checks {
		switch c.Metric {
		case schema.MetricCosine:
			worstCos = min(worstCos, float64(c.Measured))
		case schema.MetricSampleRel, schema.MetricRelError:
			worstRel = max(worstRel, float64(c.Measured))
		}
	}
	if worstCos <= 1 {
		cos = jsonfloat.Float(worstCos).Text("%.5f")
	}
	if worstRel >= 0 {
		rel = jsonfloat.Float(worstRel).Text("%.3g")
	}
	return cos, rel
}

// writePlacement says what the ORT CPU artifact is and why, and what the
// placement search cost (nothing when it was replayed from the file from).
func writePlacement(w io.Writer, p *schema.Placement, from string) {
	fmt.Fprintf(w, "ort artifact: %s\n", p.Reason)
	if a := p.Aligned; a != nil {
		fmt.Fprintf(w, "int8 conv channels: %s\n", a)
	}
	how := fmt.Sprintf("measured in %.1f s of a %.3g s budget", p.SearchSeconds, p.BudgetSeconds)
	if p.BudgetExhausted {
		how += "; the budget first left out " + p.StoppedBefore
	}
	switch {
	case from != "":
		how = "replayed from " + from + ", not measured"
	case p.Mode == schema.ModeReplay:
		how = "replayed, not measured"
	case p.Mode == schema.ModeAllINT8:
		how = "all-int8, not measured"
	}
	fmt.Fprintf(w, "int8 placement: %s (%s; placement.json)\n", p.Summary(), how)
}

// guardLine is the accuracy guard's outcome with every check's limit and
// measured value.
func guardLine(g *schema.Guard) string {
	var cs []string
	for _, c := range g.Checks {
		cs = append(cs, c.String())
	}
	if g.Note != "" && len(cs) == 0 {
		return "accuracy guard: " + g.Note
	}
	return fmt.Sprintf("accuracy guard %s on %s: %s", g.Verdict(), g.On(), strings.Join(cs, "; "))
}

// writePrune says what pruning did to model.fp32.onnx and what it cost
// against the unpruned float model.
func writePrune(w io.Writer, p *optimize.PruneResult) {
	for _, r := range p.Reports {
		fmt.Fprintf(w, "prune %s: %d of %d layers pruned (%s); parameters %d -> %d\n",
			r.Method, r.Pruned(), len(r.Layers), r.How(), r.ParamsBefore, r.ParamsAfter)
	}
	if c := p.Cost; c != nil {
		var parts []string
		for _, o := range c.Outputs {
			parts = append(parts, fmt.Sprintf("%s cosine %s", o.Name, o.Cosine.Text("%.4f")))
		}
		if a := c.Accuracy; a != nil {
			parts = append(parts, fmt.Sprintf("accuracy %.2f%% -> %.2f%% (drop %.2f points)", a.A, a.B, a.DropPoints))
		}
		fmt.Fprintf(w, "prune cost (pruned vs unpruned float, %d samples of %s): %s\n", c.Samples, c.Data, strings.Join(parts, "; "))
	}
	if len(p.Spared) > 0 {
		fmt.Fprintf(w, "prune: spared for the accuracy budget: %s\n", strings.Join(p.Spared, ", "))
	}
}

// lmChecked are the artifacts checked with a language model's figures.
func lmChecked(r *Result) []*Artifact {
	var out []*Artifact
	for _, a := range r.Artifacts {
		if a.Check != nil && a.Check.LM != nil {
			out = append(out, a)
		}
	}
	return out
}

// seqText is a model's latency per sequence (latency.seq_lengths), or
// nothing.
func seqText(t *latency.Timing) string {
	if t == nil || len(t.SeqLengths) == 0 {
		return ""
	}
	var parts []string
	for _, s := range t.SeqLengths {
		parts = append(parts, fmt.Sprintf("L=%d %.3f", s.SeqLen, s.Latency.P50))
	}
	return "; p50 ms per sequence (batch 1): " + strings.Join(parts, ", ")
}
