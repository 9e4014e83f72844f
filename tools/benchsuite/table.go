package benchsuite

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints r as Markdown tables (docs/BENCHMARKS.md takes them
// as they are): the toolchain and memory ratios, then the model speed rows.
func WriteTable(w io.Writer, r *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %s, %d cores (%s); %s; ONNX Runtime %s. %d repeats per pair, median [min-max].\n\n",
		r.Machine.CPU, r.Machine.Cores, strings.Join(r.Machine.Features, " "), r.Machine.GoVersion, r.Machine.ORTVersion, r.Repeats)
	b.WriteString("| section | measurement | A (median) | B (median) | B/A | note |\n|---|---|---|---|---|---|\n")
	for _, row := range r.Ratios {
		fmt.Fprintf(&b, "| %s | %s | %s: %s %s | %s: %s %s | %s | %s |\n", row.Section, row.Name,
			row.A, num(row.AMedian), row.Unit, row.B, num(row.BMedian), row.Unit, spread(row.Ratio), row.Note)
	}
	b.WriteString("\nModel speed: one intra-op thread, random inputs of the shape given; ratios are the variant over the original in the same round (p50, p99: below 1 is faster; throughput: above 1 is faster). Quality is against the original on the named data, at ORT level all.\n\n")
	b.WriteString("| model | variant | ORT level | batch | p50 ms | p50 ratio | p99 ms | p99 ratio | samples/s | throughput ratio | quality vs original |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Models {
		ratio := func(s Spread) string {
			if m.Variant == "original" {
				return "1"
			}
			return spread(s)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", m.Model, m.Variant, m.Level, m.Batch,
			num(m.P50Ms), ratio(m.P50Ratio), num(m.P99Ms), ratio(m.P99Ratio), num(m.Throughput), ratio(m.ThroughputRatio), quality(m))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "\nFAILED: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quality is a model row's accuracy cost, in words; the original's row
// names the data and, with labels, its own accuracy.
func quality(m ModelRow) string {
	q := m.Quality
	if q == nil {
		return ""
	}
	if m.Variant == "original" {
		s := fmt.Sprintf("%d samples of %s", q.Samples, q.Data)
		if q.OriginalAccuracy != nil {
			s += fmt.Sprintf("; accuracy %.2f%%", *q.OriginalAccuracy)
		}
		if q.OriginalTask != nil {
			s += fmt.Sprintf("; %s %.2f%%", q.TaskMetric, *q.OriginalTask)
		}
		return s
	}
	var parts []string
	if q.Task != nil {
		parts = append(parts, fmt.Sprintf("%s %.2f%% (%+.2f)", q.TaskMetric, *q.Task, *q.Task-*q.OriginalTask))
	}
	if q.Accuracy != nil {
		parts = append(parts, fmt.Sprintf("accuracy %.2f%% (%+.2f)", *q.Accuracy, *q.Accuracy-*q.OriginalAccuracy))
	}
	if q.Top1Agree >= 0 {
		parts = append(parts, fmt.Sprintf("top-1 agreement %.2f%%", 100*q.Top1Agree))
	}
	parts = append(parts, fmt.Sprintf("min cosine %.5f", q.MinCosine))
	return strings.Join(parts, ", ")
}

func spread(s Spread) string {
	return fmt.Sprintf("%s [%s-%s]", num(s.Median), num(s.Min), num(s.Max))
}

// num prints 3 significant digits, without exponent for everyday sizes.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.01 || a == 0:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
