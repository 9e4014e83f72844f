package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/latency"
)

// sqnrBars is how many tensors the SQNR chart shows (the worst).
const sqnrBars = 30

// WriteHTML writes report.html: one self-contained page (inline styles
// and SVG, no scripts, nothing fetched) with the tables of report.md and
// the charts.
func (r *Report) WriteHTML(w io.Writer) error {
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	page := struct {
		Title  string
		Env    string
		Tables template.HTML
		Charts []chart
	}{
		Title:  fmt.Sprintf("optc %s: %s", r.Kind, r.Input),
		Env:    r.Environment.text(),
		Tables: markdownTables(md.String()),
		Charts: r.charts(),
	}
	return pageTemplate.Execute(w, page)
}

// chart is one figure; SVG is built from escaped text only.
type chart struct {
	ID  string
	SVG template.HTML
}

func (r *Report) charts() []chart {
	var cs []chart
	timed := []*Model{}
	color := map[*Model]int{}
	for i, m := range r.Models {
		color[m] = i
		if m.Latency != nil && len(m.Latency.Batches) > 0 {
			timed = append(timed, m)
		}
	}
	if len(timed) > 0 {
		first := timed[0].Latency.Batches[0].Batch
		var ss []series
		for _, m := range timed {
			b := m.Latency.Batch(first)
			if b == nil {
				continue
			}
			ss = append(ss, series{m.Name, []float64{b.Min, chartMs(b.Latency, "p50"), chartMs(b.Latency, "p90"),
				chartMs(b.Latency, "p95"), chartMs(b.Latency, "p99")}, color[m]})
		}
		cs = append(cs, chart{"latency-percentiles", template.HTML(lineChart(
			fmt.Sprintf("Latency by percentile, batch %d", first), "ms",
			[]string{"min", "p50", "p90", "p95", "p99"}, ss))})
		batches := latencyBatches(timed[0])
		labels := make([]string, len(batches))
		for i, b := range batches {
			labels[i] = fmt.Sprintf("batch %d", b)
		}
		var tput, p99 []series
		for _, m := range timed {
			t, p := series{name: m.Name, color: color[m]}, series{name: m.Name, color: color[m]}
			for _, b := range batches {
				bl := m.Latency.Batch(b)
				if bl == nil {
					t.ys, p.ys = append(t.ys, math.NaN()), append(p.ys, math.NaN())
					continue
				}
				t.ys, p.ys = append(t.ys, bl.Throughput), append(p.ys, chartMs(bl.Latency, "p99"))
			}
			tput, p99 = append(tput, t), append(p99, p)
		}
		cs = append(cs, chart{"throughput", template.HTML(lineChart("Throughput by batch size", "samples/s", labels, tput))},
			chart{"p99", template.HTML(lineChart("p99 latency by batch size", "ms", labels, p99))})
	}
	for _, q := range r.Quantization {
		if len(q.SQNR) == 0 {
			continue
		}
		worst := q.SQNR[:min(len(q.SQNR), sqnrBars)]
		labels := make([]string, len(worst))
		ys := make([]float64, len(worst))
		for i, s := range worst {
			labels[i], ys[i] = s.Tensor, finiteOrNaN(s.SQNRdB)
		}
		cs = append(cs, chart{"sqnr-" + q.Target, template.HTML(hbarChart(
			fmt.Sprintf("SQNR of quantized activations, worst first (%s, %s)", q.Target, q.Model), "dB", labels,
			series{q.Model, ys, r.modelIndex(q.Model)}))})
	}
	if ops := r.opChart(); ops != "" {
		cs = append(cs, chart{"ops", template.HTML(ops)})
	}
	return cs
}

// opChart compares op counts of every model whose graph optc read, op
// types ordered by the input model's counts.
func (r *Report) opChart() string {
	var graphs []*Model
	color := map[*Model]int{}
	count := map[string]int{}
	for i, m := range r.Models {
		if len(m.Ops) == 0 {
			continue
		}
		color[m] = i
		graphs = append(graphs, m)
		for _, o := range m.Ops {
			count[o.Op] = max(count[o.Op], o.Count)
		}
	}
	if len(graphs) == 0 {
		return ""
	}
	var ops []string
	for op := range count {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	var ss []series
	for _, m := range graphs {
		s := series{name: m.Name, color: color[m]}
		for _, op := range ops {
			n := 0
			for _, o := range m.Ops {
				if o.Op == op {
					n = o.Count
				}
			}
			s.ys = append(s.ys, float64(n))
		}
		ss = append(ss, s)
	}
	return barChart("Op counts before and after", "nodes", ops, ss)
}

// modelIndex is the position of the model named name (0 when absent).
func (r *Report) modelIndex(name string) int {
	for i, m := range r.Models {
		if m.Name == name {
			return i
		}
	}
	return 0
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; padding: 16px 24px; color: #222; max-width: 1400px; overflow-wrap: anywhere; }
h1 { font-size: 20px; }
.table { max-width: 100%; overflow-x: auto; margin: 8px 0 16px; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 3px 8px; white-space: nowrap; overflow-wrap: normal; }
td { text-align: right; } td:first-child, th:first-child { text-align: left; }
th { background: #f3f3f3; }
code { font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
figure { margin: 0; border: 1px solid #ddd; padding: 4px; min-width: 0; max-width: 100%; }
figure svg { display: block; max-width: 100%; height: auto; }
svg text { font: 11px sans-serif; fill: #333; }
svg .title { font-size: 13px; font-weight: bold; }
svg .grid { stroke: #e5e5e5; }
svg .axis { stroke: #555; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Env}}</p>
<div class="charts">
{{range .Charts}}<figure id="{{.ID}}">{{.SVG}}</figure>
{{end}}</div>
{{.Tables}}
</body>
</html>
`))

// chartMs is a percentile as a chart draws it: NaN (no point, "-" as in
// the tables) for one the timing windows were too short for, which
// report.json holds as 0 and lists in unreported.
func chartMs(l latency.Latency, name string) float64 {
	v := *l.At(name)
	if v == 0 || slices.Contains(l.Unreported, name) {
		return math.NaN()
	}
	return v
}

// finiteOrNaN is a value a chart can draw: NaN (a gap) for the
// infinities, whose bars would have no end.
func finiteOrNaN(f jsonfloat.Float) float64 {
	if !f.Finite() {
		return math.NaN()
	}
	return float64(f)
}
