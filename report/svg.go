package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Charts are hand-written SVG so that report.html needs nothing but
// itself: no scripts, no fonts, no network.

// palette colours the series (colour-blind friendly, Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"}

// series is one line of a line chart, or one group member of a bar chart.
type series struct {
	name  string
	ys    []float64 // NaN: no point
	color int       // index into palette: one model keeps its colour in every chart
}

func (s series) fill() string { return palette[s.color%len(palette)] }

const (
	chartW, chartH = 640, 370 // a bar chart widens with its bars
	padL, padR     = 64, 32
	padT, padB     = 28, 130
)

// lineChart draws series over categorical x labels, y from 0.
func lineChart(title, yUnit string, xs []string, ss []series) string {
	var b strings.Builder
	ymax := maxOf(ss)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	x := func(i int) float64 {
		if len(xs) == 1 {
			return padL + plotW/2
		}
		return padL + plotW*float64(i)/float64(len(xs)-1)
	}
	y := func(v float64) float64 { return padT + plotH*(1-v/ymax) }
	open(&b, title, chartW)
	axes(&b, ymax, yUnit, y, chartW)
	for i, l := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i), chartH-padB+16, html.EscapeString(l))
	}
	for _, s := range ss {
		c := s.fill()
		var pts []string
		for i, v := range s.ys {
			if math.IsNaN(v) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %.3g %s</title></circle>`,
				x(i), y(v), c, html.EscapeString(s.name), v, yUnit)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(pts, " "))
	}
	legend(&b, ss, chartW)
	b.WriteString("</svg>")
	return b.String()
}

// barChart draws groups of vertical bars: one group per label, one bar
// per series.
func barChart(title, yUnit string, labels []string, ss []series) string {
	var b strings.Builder
	ymax := maxOf(ss)
	w := max(chartW, padL+padR+len(labels)*max(8*len(ss)+6, 22))
	plotW, plotH := float64(w-padL-padR), float64(chartH-padT-padB)
	y := func(v float64) float64 { return padT + plotH*(1-v/ymax) }
	open(&b, title, w)
	axes(&b, ymax, yUnit, y, w)
	group := plotW / float64(max(len(labels), 1))
	bar := group * 0.8 / float64(max(len(ss), 1))
	for i, l := range labels {
		gx := padL + group*float64(i) + group*0.1
		for k, s := range ss {
			v := s.ys[i]
			if math.IsNaN(v) {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.4g %s</title></rect>`,
				gx+bar*float64(k), y(v), math.Max(bar-1, 1), padT+plotH-y(v), s.fill(),
				html.EscapeString(s.name), html.EscapeString(l), v, yUnit)
		}
		cx := gx + group*0.4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-40 %.1f %d)">%s</text>`,
			cx, chartH-padB+14, cx, chartH-padB+14, html.EscapeString(shorten(l, 18)))
	}
	if len(ss) > 1 {
		legend(&b, ss, w)
	}
	b.WriteString("</svg>")
	return b.String()
}

func open(b *strings.Builder, title string, w int) {
	fmt.Fprintf(b, `<svg viewBox="0 0 %d %d" width="%d" height="%d" role="img">`, w, chartH, w, chartH)
	fmt.Fprintf(b, `<text x="%d" y="18" class="title">%s</text>`, padL, html.EscapeString(title))
}

// axes draws the frame, y ticks and grid lines.
func axes(b *strings.Builder, ymax float64, unit string, y func(float64) float64, w int) {
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>`, padL, w-padR, y(v), y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%.3g</text>`, padL-6, y(v)+4, v)
	}
	fmt.Fprintf(b, `<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`,
		padT+(chartH-padT-padB)/2, padT+(chartH-padT-padB)/2, html.EscapeString(unit))
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" class="axis"/>`, padL, w-padR, chartH-padB, chartH-padB)
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" class="axis"/>`, padL, padL, padT, chartH-padB)
}

// legend names the series under the plot, in as many rows as it takes.
func legend(b *strings.Builder, ss []series, w int) {
	const row = 15
	type item struct {
		x, row int
		name   string
	}
	var items []item
	x, r := padL, 0
	for _, s := range ss {
		name := shorten(s.name, 28)
		width := 24 + 7*len(name)
		if x+width > w-padR && x > padL {
			x, r = padL, r+1
		}
		items = append(items, item{x, r, name})
		x += width
	}
	top := chartH - 6 - row*r
	for k, it := range items {
		y := top + row*it.row
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`,
			it.x, y-9, ss[k].fill(), it.x+14, y, html.EscapeString(it.name))
	}
}

// maxOf is the y axis' top: the largest value with headroom (1 when all are 0).
func maxOf(ss []series) float64 {
	m := 0.0
	for _, s := range ss {
		for _, v := range s.ys {
			if !math.IsNaN(v) {
				m = math.Max(m, v)
			}
		}
	}
	if m <= 0 {
		return 1
	}
	return m * 1.1
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
