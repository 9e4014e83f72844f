package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
)

// sqnrRows is how many of the worst-represented tensors report.md lists.
const sqnrRows = 10

// WriteMarkdown writes report.md: short enough for a merge-request
// comment, with every delta signed and in its unit.
// modelCell names a model in the tables: its path, (input), and a NaN/Inf
// flag.
func modelCell(m *Model) string {
	name := "`" + m.Name + "`"
	if m.Role == "input" {
		name += " (input)"
	}
	if m.nonFinite() > 0 {
		name += " **NaN/Inf**"
	}
	return name
}

// WriteMarkdown writes report.md: the models' tables, the verdicts and
// warnings, then the details folded.
func (r *Report) WriteMarkdown(w io.Writer) error {
	p := &printer{w: w}
	p.f("## optc %s: %s\n\n", r.Kind, r.Input)
	in := r.Models[0]
	batches := latencyBatches(in)
	p.modelTables(r, batches)
	p.lmTable(r)
	p.taskTable(r)
	on := fmt.Sprintf("%s (%s)", r.EvalData, heldOut(r.HeldOut))
	if r.EvalData == "random" {
		on = "fresh random inputs (a smoke test, not a measure of accuracy)"
	}
	if r.ChecksStoppedAt > 0 {
		on += fmt.Sprintf(", its first %d samples (the build's budget stopped the checks there)", r.ChecksStoppedAt)
	}
	p.f("\nAccuracy measured on %s; latency is the median of %s on %s.\n", on, repeatsText(in), r.Environment.text())
	for _, f := range refusals(r) {
		p.f("\n> **%s**\n", f)
	}
	for _, l := range r.Caveats.Lines() {
		p.f("\n> **warning: %s**\n", l)
	}
	for _, m := range r.Models {
		if n := m.nonFinite(); n > 0 {
			p.f("\n> **NaN/Inf: `%s` is NaN or infinite at %d output values where the input model is finite (%s); its statistics are over the finite pairs only. Do not deploy it.**\n",
				m.Name, n, nonFiniteOutputs(m))
		}
	}

	p.outputTable(r)

	if len(r.Passes) > 0 {
		p.f("\n<details><summary>Passes</summary>\n\n| pass | runs | nodes removed | added | rewritten |\n|---|---:|---:|---:|---:|\n")
		for _, ps := range r.Passes {
			if ps.Removed+ps.Added+ps.Rewritten > 0 {
				p.f("| %s | %d | %d | %d | %d |\n", ps.Name, ps.Runs, ps.Removed, ps.Added, ps.Rewritten)
			}
		}
		p.f("\n</details>\n")
	}
	for _, q := range r.Quantization {
		p.quantization(q)
	}
	if r.Pruning != nil {
		writePruning(p, r.Pruning)
	}
	if r.Placement != nil {
		writePlacement(p, r.Placement, r.PlacementFrom)
	}
	if l := r.NCHWc; l != nil && l.Block > 0 {
		p.f("\nORT CPU layout (block %d: %d convs padded, %d HardSigmoid bridges): %s", l.Block, l.Convs, l.Bridges, l.Reason)
		if t := l.Timing; t != nil {
			var ms []string
			for _, b := range t.Batches {
				ms = append(ms, fmt.Sprintf("batch %d %.3f -> %.3f ms", b.Batch, b.BaselineMs, b.CandidateMs))
			}
			p.f(" (p50 against %s: %s)", l.Baseline, strings.Join(ms, ", "))
		}
		p.f(".\n")
	}
	for _, n := range r.Notes {
		p.f("\n> note: %s\n", n)
	}
	return p.err
}

// modelTables are what each model is, then how fast it runs: two tables,
// so that each reads without scrolling sideways (a page or a PR comment).
func (p *printer) modelTables(r *Report, batches []int) {
	p.f("| model | precision | size | nodes | task accuracy | min cosine | cold start |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models {
		name := modelCell(m)
		d := m.Delta
		size, nodes, acc := kib(m.Bytes), dash(m.Nodes > 0, fmt.Sprint(m.Nodes)), "-"
		if d != nil {
			size += fmt.Sprintf(" (%+.1f%%)", d.BytesPercent)
			if m.Nodes > 0 {
				nodes += fmt.Sprintf(" (%+d)", d.Nodes)
			}
		}
		if t := taskAccuracy(m); t != nil {
			acc = fmt.Sprintf("%.2f%%", *t)
			if d != nil && d.AccuracyPoints != nil {
				acc += fmt.Sprintf(" (%+.2f pt)", *d.AccuracyPoints)
			}
		}
		cos := "-"
		if m.Accuracy != nil && len(m.Accuracy.Outputs) > 0 {
			cos = minCosine(m).Text("%.5f")
		}
		p.f("| %s | %s | %s | %s | %s | %s | %s |\n", name, m.Precision, size, nodes, acc, cos, coldStart(m))
	}
	if len(batches) > 0 {
		head, rule := "\n| model |", "|---|"
		for _, b := range batches {
			head += fmt.Sprintf(" p50 b%d | p99 b%d | speed-up b%d |", b, b, b)
			rule += "---:|---:|---:|"
		}
		p.f("%s\n%s\n", head, rule)
		for _, m := range r.Models {
			line := "| " + modelCell(m) + " |"
			for _, b := range batches {
				bl := m.Latency.Batch(b)
				if bl == nil {
					line += " - | - | - |"
					continue
				}
				line += fmt.Sprintf(" %s | %s | %s |", msCell(bl.P50), msCell(bl.P99), speedup(m, b))
			}
			p.f("%s\n", line)
		}
	}
}

// outputTable is each output's agreement with the input model, folded.
func (p *printer) outputTable(r *Report) {
	p.f("\n<details><summary>Per-output agreement with the input model</summary>\n\n")
	p.f("Statistics are over the finite pairs (both models finite); NaN/Inf counts are input / model.\n\n")
	p.f("| model | output | finite pairs | NaN | Inf | cosine | SNR | max abs error | mean abs error | top-1 | top-5 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models[1:] {
		if m.Accuracy == nil {
			continue
		}
		for _, o := range m.Accuracy.Outputs {
			p.f("| `%s` | %s | %s | %d / %d | %d / %d | %s | %s | %s | %s | %s | %s |\n", m.Name, o.Name, o.finitePairs(),
				o.NaN.A, o.NaN.B, o.Inf.A, o.Inf.B, o.Cosine.Text("%.5f"), o.SNRdB.Text("%.1f dB"),
				o.MaxAbs.Text("%.3g"), o.MeanAbs.Text("%.3g"), percentOrDash(o.Top1Agree), percentOrDash(o.Top5Agree))
		}
	}
	p.f("\n</details>\n")
}

// quantization is one INT8 scheme's details, folded: calibration,
// fallback, techniques, the guard's checks and the worst tensors' SQNR.
func (p *printer) quantization(q *Quantization) {
	fell := "none"
	if len(q.FellBack) > 0 {
		fell = strings.Join(q.FellBack, ", ")
	}
	refused := ""
	if g := q.Guard; g != nil && !g.Pass {
		refused = ": REFUSED by the accuracy guard, not written"
	}
	p.f("\n<details><summary>INT8 %s (<code>%s</code>): %d nodes quantized, %d left float%s</summary>\n\n",
		q.Target, q.Model, q.Quantized, q.LeftFloat, refused)
	if q.Method == schema.DynamicMethod {
		p.f("Dynamic INT8: nothing calibrated, activations are quantized at run time.\n")
	} else {
		p.f("Calibrated with %s on %d samples; fell back to float for accuracy: %s.\n", q.Method, q.CalibSamples, fell)
	}
	if t := q.Techniques; t != nil && len(t.Applied) > 0 {
		by := ""
		if t.ByGuard {
			by = " (some tried by the accuracy guard)"
		}
		var ts []string
		for _, a := range t.Applied {
			ts = append(ts, string(a))
		}
		p.f("Post-training techniques%s: %s.\n", by, strings.Join(ts, ", "))
	}
	if g := q.Guard; g != nil && len(g.Checks) > 0 {
		var cs []string
		for _, c := range g.Checks {
			cs = append(cs, c.String())
		}
		p.f("Accuracy guard **%s** on %s: %s.\n", g.Verdict(), g.On(), strings.Join(cs, "; "))
	}
	if len(q.SQNR) > 0 {
		p.f("\n| worst tensors | SQNR |\n|---|---:|\n")
		for _, s := range q.SQNR[:min(len(q.SQNR), sqnrRows)] {
			p.f("| `%s` | %s |\n", s.Tensor, s.SQNRdB.Text("%.1f dB"))
		}
	}
	p.f("\n</details>\n")
}

// writePruning is what pruning did to the float model every artifact grew
// from: per method, the layers pruned and left alone (with each layer's
// ratio, which channels:auto chooses per group) and the parameters, then
// what it cost against the unpruned model.
func writePruning(p *printer, pr *Pruning) {
	for _, m := range pr.Methods {
		p.f("\n<details><summary>Pruning %s: %d of %d layers pruned (%s); parameters %d -> %d (%+.1f%%)</summary>\n\n",
			m.Method, m.Pruned(), len(m.Layers), m.How(), m.ParamsBefore, m.ParamsAfter,
			100*(float64(m.ParamsAfter)/float64(max(m.ParamsBefore, 1))-1))
		p.f("| layer | op | params | ratio | channels removed | sparsity | refit | left alone because |\n|---|---|---:|---:|---:|---:|---|---|\n")
		for _, l := range m.Layers {
			p.f("| `%s` | %s | %d | %g | %d | %.1f%% -> %.1f%% | %s | %s |\n", l.Node, l.Op, l.Params, l.Ratio, l.Removed,
				100*l.Before, 100*l.After, dash(l.Refit != "", l.Refit), dash(l.Skipped != "", l.Skipped))
		}
		p.f("\n</details>\n")
	}
	cost := "not measured"
	if pr.Samples > 0 {
		cost = fmt.Sprintf("on %d samples of %s: min cosine %s", pr.Samples, pr.Data, pr.MinCosine.Text("%.5f"))
		if a := pr.Accuracy; a != nil {
			cost += fmt.Sprintf(", accuracy %.2f%% -> %.2f%% (drop %.2f points)", a.A, a.B, a.DropPoints)
		}
	}
	p.f("\nPruning against the unpruned float model %s.", cost)
	if len(pr.Spared) > 0 {
		p.f(" Spared for the accuracy budget: %s.", strings.Join(pr.Spared, ", "))
	}
	if l := pr.Latency; l != nil && l.BeforeP50 > 0 {
		p.f(" ORT latency (level all, batch %d, one run): p50 %.3f ms -> %.3f ms (%.2fx).", l.Batch, l.BeforeP50, l.AfterP50, l.AfterP50/l.BeforeP50)
	}
	p.f("\n")
}

// writePlacement is the ORT CPU artifact's choice: what it is and why,
// how many regions stayed int8, and the whole-model timings behind it.
func writePlacement(p *printer, f *schema.Placement, from string) {
	p.f("\n<details><summary>ort artifact: %s</summary>\n\n", f.Reason)
	p.f("INT8 placement (`placement.json`, %s): %s, candidate %q; ", f.Mode, f.Summary(), f.Chosen)
	if from != "" {
		p.f("replayed from `%s`, not measured by this build; as recorded, ", from)
	}
	if f.Mode == schema.ModeAuto {
		p.f("measured in %.1f s of a %.3g s budget", f.SearchSeconds, f.BudgetSeconds)
		if f.BudgetExhausted {
			p.f(" (budget exhausted: stopped before %s)", f.StoppedBefore)
		}
	} else {
		p.f("not measured")
	}
	p.f(", on %s (%s).\n", f.CPU, strings.Join(f.CPUFlags, " "))
	if a := f.Aligned; a != nil {
		p.f("\nConv channels: %s.\n", a)
	}
	if len(f.Timings) > 0 {
		var names []string
		for _, t := range f.Timings {
			for n := range t.P50Ms {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		slices.Sort(names)
		p.f("\n| threads | batch |")
		for _, n := range names {
			p.f(" %s p50 |", n)
		}
		p.f("\n|---:|---:|%s\n", strings.Repeat("---:|", len(names)))
		for _, t := range f.Timings {
			batch := fmt.Sprint(t.Batch)
			if t.Confirmation {
				batch += " (confirmation)"
			}
			p.f("| %s | %s |", threadsText(t.Threads), batch)
			for _, n := range names {
				p.f(" %s |", msOrDash(t.P50Ms[n]))
			}
			p.f("\n")
		}
	}
	p.f("\n</details>\n")
}

func threadsText(n int) string {
	if n == 0 {
		return "all"
	}
	return fmt.Sprint(n)
}

func msOrDash(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f ms", ms)
}

// printer keeps the first write error so that rendering reads straight.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func latencyBatches(m *Model) []int {
	if m.Latency == nil {
		return nil
	}
	var bs []int
	for _, b := range m.Latency.Batches {
		bs = append(bs, b.Batch)
	}
	return bs
}

// minCosine is the worst cosine over m's outputs; NaN (an output with no
// finite pair) stays NaN.
func minCosine(m *Model) jsonfloat.Float {
	c := jsonfloat.Float(1)
	for _, o := range m.Accuracy.Outputs {
		if o.MinSampleCosine != nil {
			c = min(c, *o.MinSampleCosine)
		} else {
			c = min(c, o.Cosine)
		}
	}
	return c
}

// refusals are the verdict's lines for report.md: INT8 refused, artifacts
// not recommended, the guard turned off.
func refusals(r *Report) []string {
	v := r.Verdict
	if v == nil {
		return nil
	}
	var out []string
	for _, a := range v.Refused {
		out = append(out, fmt.Sprintf("REFUSED: the accuracy guard refused `%s`: it was not written (the figures are under INT8 below).", a))
	}
	for _, a := range v.NotRecommended {
		out = append(out, fmt.Sprintf("NOT RECOMMENDED: `%s` misses the accuracy guard's criteria against the input model.", a))
	}
	if v.GuardOff {
		out = append(out, "The accuracy guard is OFF (--no-guard): its figures are reported, nothing was enforced.")
	}
	return out
}

// nonFiniteOutputs names the outputs of m that are NaN or infinite where
// the input model is finite, with their counts.
func nonFiniteOutputs(m *Model) string {
	var parts []string
	for _, o := range m.Accuracy.Outputs {
		if o.NonFinite > 0 {
			parts = append(parts, fmt.Sprintf("%s: NaN %d, Inf %d; %s finite pairs", o.Name, o.NaN.B, o.Inf.B, o.finitePairs()))
		}
	}
	return strings.Join(parts, "; ")
}

// finitePairs is "all N", "K of N", or "-" in a report written before
// the counts were.
func (o OutputAccuracy) finitePairs() string {
	switch {
	case o.Elements == 0:
		return "-"
	case o.FinitePairs == o.Elements:
		return fmt.Sprintf("all %d", o.Elements)
	}
	return fmt.Sprintf("%d of %d", o.FinitePairs, o.Elements)
}

func coldStart(m *Model) string {
	if m.Latency == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", m.Latency.ColdStartMs)
}

// msCell is a latency in a table: "-" for one not reported (0).
func msCell(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f ms", v)
}

func speedup(m *Model, batch int) string {
	if m.Delta == nil {
		return "1.00x"
	}
	for _, s := range m.Delta.Speedup {
		if s.Batch == batch {
			return fmt.Sprintf("%.2fx", s.P50)
		}
	}
	return "-"
}

func kib(n int64) string {
	if n < 10*1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

func dash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func percentOrDash(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*f)
}

func heldOut(h bool) string {
	if h {
		return "held out from calibration"
	}
	return "not held out"
}

func repeatsText(m *Model) string {
	if m.Latency == nil || len(m.Latency.Batches) == 0 {
		return "no runs"
	}
	n := len(m.Latency.Batches[0].Repeats)
	if n <= 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// text is the environment in one line.
func (e Environment) text() string {
	threads := "one thread per core"
	if e.Threads > 0 {
		threads = fmt.Sprintf("%d thread(s)", e.Threads)
	}
	return fmt.Sprintf("%s (%d cores; %s), ONNX Runtime %s at level %s, %s", e.CPU, e.Cores,
		strings.Join(e.CPUFeatures, " "), e.ORTVersion, e.Level, threads)
}

// taskTable is a task plug-in's figures (eval.task ctc, text-detection,
// segmentation), one row per model that has them: the headline the
// main table's accuracy column shows, then the task's other figures.
func (p *printer) taskTable(r *Report) {
	var rows []*Model
	for _, m := range r.Models {
		if m.Accuracy != nil && m.Accuracy.TaskMetric != "" {
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		return
	}
	first := rows[0].Accuracy
	against := "against its labels"
	if strings.Contains(first.TaskMetric, "against") {
		against = "(no labels: the input model's results are the reference)"
	}
	p.f("\nTask: %s on %d samples of the evaluation data %s (the accuracy column above):\n\n", first.TaskMetric, first.Samples, against)
	head, rule := "| model | "+first.TaskMetric+" |", "|---|---:|"
	for _, o := range first.TaskOthers {
		head += " " + o.Name + " |"
		rule += "---:|"
	}
	p.f("%s\n%s\n", head, rule)
	for _, m := range rows {
		a := m.Accuracy
		line := fmt.Sprintf("| `%s` | %.2f |", m.Name, *a.Task)
		for _, o := range a.TaskOthers {
			line += fmt.Sprintf(" %.2f |", o.Value)
		}
		p.f("%s\n", line)
	}
}

// lmTable is a language model's figures (eval.task lm), one row per
// model that has them.
func (p *printer) lmTable(r *Report) {
	var rows []*Model
	for _, m := range r.Models {
		if m.Accuracy != nil && m.Accuracy.LM != nil {
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		return
	}
	p.f("\nLanguage model, %d next-token predictions on the evaluation data:\n\n", rows[0].Accuracy.LM.Tokens)
	// Latency per sequence (latency.seq_lengths): the lengths the input
	// was timed at.
	var lens []int
	if in := r.Models[0]; in.Latency != nil {
		for _, s := range in.Latency.SeqLengths {
			lens = append(lens, s.SeqLen)
		}
	}
	head, rule := "| model | perplexity | vs input | next-token agreement with the input | next-token accuracy |", "|---|---:|---:|---:|---:|"
	for _, l := range lens {
		head += fmt.Sprintf(" p50 ms/seq L=%d |", l)
		rule += "---:|"
	}
	p.f("%s\n%s\n", head, rule)
	for _, m := range rows {
		l := m.Accuracy.LM
		vs := "-"
		if m.Role != "input" {
			vs = l.IncreasePercent.Text("%+.2f%%")
		}
		line := fmt.Sprintf("| `%s` | %s | %s | %.2f%% | %.2f%% |", m.Name, l.Perplexity.Text("%.4f"), vs, 100*l.Agreement, 100*l.Accuracy)
		for _, n := range lens {
			cell := " - |"
			if m.Latency != nil {
				for _, s := range m.Latency.SeqLengths {
					if s.SeqLen == n {
						cell = " " + msCell(s.P50) + " |"
					}
				}
			}
			line += cell
		}
		p.f("%s\n", line)
	}
	if len(lens) > 0 {
		p.f("\nLatency per sequence: batch 1, random ids, the median of one timing window per length (not repeated like the table above).\n")
	}
	if g := r.WeightsGuard; g != nil {
		verdict := "passed"
		if !g.Pass {
			verdict = "**failed** (kept by allow_accuracy_loss; not recommended, not deployed)"
		}
		p.f("\nPerplexity guard on the weight-only model %s: %s over the input, at most %g%% allowed.\n", verdict, g.IncreasePercent.Text("%+.2f%%"), g.MaxIncreasePercent)
	}
}
