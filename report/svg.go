package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Charts are hand-written SVG so that report.html needs nothing but
// itself: no scripts, no fonts, no network. Each chart is laid out from
// what it holds: the left margin from its widest tick label, the band
// under the plot from its longest x label, the height from the legend's
// rows, so that no text overlaps, nothing is cut off and no empty band is
// left. The page scales a chart down to the window's width (viewBox).

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
	chartW  = 640 // a chart's width; a bar chart widens with its bars
	plotH   = 200 // height of the plot area
	padT    = 30  // the title's band
	padR    = 24
	charW   = 6.4  // width of an average character of the 11px labels, for layout
	fontH   = 11.0 // their height
	rowH    = 16   // a legend row
	xLabelN = 28   // longest x label shown whole; longer ones keep their end (the full name is the tooltip)
	barMaxW = 36   // a bar group of one series (22 when there are many)
	minBarW = 360  // narrowest bar chart
	tilt    = 40   // degrees the bar chart's x labels are turned
)

// frame is a chart's layout.
type frame struct {
	w, h         float64
	left, bottom float64 // the plot's left edge and its baseline
	plotW        float64
	ticks        []float64
	labels       []string // tick labels
	lo, hi       float64  // values at the plot's bottom and top (the first and last ticks)
}

func (f frame) y(v float64) float64 { return f.bottom - plotH*(v-f.lo)/(f.hi-f.lo) }

// newFrame lays out a chart of at least width w whose x labels need band
// pixels under the axis and whose legend holds names, for values in
// [lo, hi].
func newFrame(title string, w, band float64, lo, hi float64, names []string) frame {
	f := frame{}
	var step float64
	f.ticks, step = niceTicks(lo, hi)
	f.lo, f.hi = f.ticks[0], f.ticks[len(f.ticks)-1]
	f.labels = tickLabels(f.ticks, step)
	widest := 0
	for _, l := range f.labels {
		widest = max(widest, len(l))
	}
	// The unit, turned, in [4, 4+fontH]; then the tick labels; then the axis.
	f.left = 4 + fontH + 8 + charW*float64(widest) + 6
	f.w = math.Max(w, f.left+padR+math.Max(legendWidth(names), titleWidth(title)))
	f.plotW = f.w - f.left - padR
	f.bottom = padT + plotH
	f.height(band, names)
	return f
}

// height sets the chart's height for its width: the plot, the x labels'
// band and the legend's rows.
func (f *frame) height(band float64, names []string) {
	f.h = f.bottom + band + float64(legendRows(names, f.w))*rowH + 6
}

// niceTicks span [min(lo, 0), max(hi, 0)] in steps of 1, 2 or 5 times a
// power of ten, from a multiple of the step at or below to one at or
// above: at most 5 intervals (6 when the range straddles 0).
func niceTicks(lo, hi float64) ([]float64, float64) {
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if math.IsInf(lo, 0) || math.IsNaN(lo) {
		lo = 0
	}
	if !(hi > lo) || math.IsInf(hi, 0) {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			step = m * mag
			break
		}
	}
	first := int(math.Floor(lo/step + 1e-9))
	last := int(math.Ceil(hi/step - 1e-9))
	var ticks []float64
	for i := first; i <= last; i++ {
		ticks = append(ticks, float64(i)*step)
	}
	return ticks, step
}

// tickLabels writes ticks, multiples of step, as people read an axis:
// with no more digits than the step needs, and from 10,000 up in
// thousands, millions or billions (5k, 10k, 1.5M); tiny steps as powers
// of ten (5e-4).
func tickLabels(ticks []float64, step float64) []string {
	top := 0.0
	for _, v := range ticks {
		top = math.Max(top, math.Abs(v))
	}
	unit, suffix := 1.0, ""
	for _, u := range []struct {
		at     float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e4, "k"}} {
		if top >= u.at {
			unit, suffix = u.at, u.suffix
			if u.suffix == "k" {
				unit = 1e3
			}
			break
		}
	}
	out := make([]string, len(ticks))
	for i, v := range ticks {
		out[i] = tickLabel(v, step, unit, suffix)
	}
	return out
}

func tickLabel(v, step, unit float64, suffix string) string {
	if v == 0 {
		return "0"
	}
	if step < 1e-3 {
		e := math.Floor(math.Log10(math.Abs(v)))
		m := v / math.Pow(10, e)
		return strconv.FormatFloat(math.Round(m*10)/10, 'f', -1, 64) + "e" + strconv.Itoa(int(e))
	}
	v, step = v/unit, step/unit
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	p := math.Pow(10, float64(dec))
	return strconv.FormatFloat(math.Round(v*p)/p, 'f', -1, 64) + suffix
}

// lineChart draws series over categorical x labels, y from 0.
func lineChart(title, yUnit string, xs []string, ss []series) string {
	var b strings.Builder
	lo, hi := extent(ss)
	f := newFrame(title, chartW, fontH+10, lo, hi, names(ss))
	x := func(i int) float64 {
		if len(xs) == 1 {
			return f.left + f.plotW/2
		}
		// Half a label's width in from each end, so end labels stay inside.
		inset := 24.0
		return f.left + inset + (f.plotW-2*inset)*float64(i)/float64(len(xs)-1)
	}
	open(&b, title, f)
	axes(&b, yUnit, f)
	for i, l := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" class="xlabel">%s</text>`, x(i), f.bottom+fontH+5, html.EscapeString(l))
	}
	for k, s := range ss {
		c := s.fill()
		// The line breaks where a value is missing: nothing is drawn
		// between two points that a value not reported separates.
		var seg []string
		line := func() {
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(seg, " "))
			}
			seg = nil
		}
		for i, v := range s.ys {
			// A value not reported is a "-" above the axis, as in the
			// tables, one row per series, not a point at 0.
			if math.IsNaN(v) {
				line()
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" style="fill:%s" class="unreported"><title>%s: - (not reported)</title>-</text>`,
					x(i), f.bottom-4-float64(k)*fontH, c, html.EscapeString(s.name))
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", x(i), f.y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %.4g %s</title></circle>`,
				x(i), f.y(v), c, html.EscapeString(s.name), v, yUnit)
		}
		line()
	}
	legend(&b, ss, f, f.bottom+fontH+10)
	b.WriteString("</svg>")
	return b.String()
}

// barChart draws groups of vertical bars: one group per label, one bar
// per series. Labels are turned so that long names fit.
func barChart(title, yUnit string, labels []string, ss []series) string {
	var b strings.Builder
	shown := make([]string, len(labels))
	longest := 0
	for i, l := range labels {
		shown[i] = shorten(l, xLabelN)
		longest = max(longest, len([]rune(shown[i])))
	}
	sin, cos := math.Sin(tilt*math.Pi/180), math.Cos(tilt*math.Pi/180)
	band := 8 + sin*charW*float64(longest) + cos*fontH
	var legendNames []string
	if len(ss) > 1 {
		legendNames = names(ss)
	}
	// Turned labels need about fontH/sin(tilt) = 17 px apart.
	group := float64(barMaxW)
	if len(labels) > 12 {
		group = 22
	}
	if len(ss) > 1 {
		group = float64(8*len(ss) + 8)
	}
	content := group * float64(len(labels))
	lo, hi := extent(ss)
	f := newFrame(title, 0, band, lo, hi, legendNames)
	f.w = math.Max(f.w, math.Max(minBarW, f.left+content+padR))
	f.plotW = f.w - f.left - padR
	start := f.left + (f.plotW-content)/2
	// A turned label reaches cos·width left of its group's centre: widen
	// the left margin (and the chart) where the first ones would be cut.
	short := 0.0
	for i, l := range shown {
		short = math.Max(short, cos*charW*float64(len([]rune(l)))+4-(start+group*(float64(i)+0.5)))
	}
	f.left, f.w, start = f.left+short, f.w+short, start+short
	f.height(band, legendNames)
	bar := group * 0.8 / float64(max(len(ss), 1))
	open(&b, title, f)
	axes(&b, yUnit, f)
	for i, l := range labels {
		gx := start + group*float64(i) + group*0.1
		for k, s := range ss {
			v := s.ys[i]
			if math.IsNaN(v) {
				continue
			}
			top, bottom := f.y(math.Max(v, 0)), f.y(math.Min(v, 0))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.4g %s</title></rect>`,
				gx+bar*float64(k), top, math.Max(bar-1, 1), bottom-top, s.fill(),
				html.EscapeString(s.name), html.EscapeString(l), v, yUnit)
		}
		cx, ly := gx+group*0.4, f.bottom+8+cos*fontH*0.8
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" transform="rotate(-%d %.1f %.1f)" class="xlabel"><title>%s</title>%s</text>`,
			cx, ly, tilt, cx, ly, html.EscapeString(l), html.EscapeString(shown[i]))
	}
	if len(legendNames) > 0 {
		legend(&b, ss, f, f.bottom+band)
	}
	b.WriteString("</svg>")
	return b.String()
}

func names(ss []series) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.name
	}
	return out
}

// open starts the SVG: its natural size, scaled down by the page to fit.
func open(b *strings.Builder, title string, f frame) {
	fmt.Fprintf(b, `<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img">`, f.w, f.h, f.w, f.h)
	fmt.Fprintf(b, `<text x="%.1f" y="18" class="title">%s</text>`, f.left, html.EscapeString(title))
}

// axes draws the frame, the y ticks, the grid lines and the unit.
func axes(b *strings.Builder, unit string, f frame) {
	for i, v := range f.ticks {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/>`, f.left, f.w-padR, f.y(v), f.y(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" class="tick">%s</text>`, f.left-6, f.y(v)+4, f.labels[i])
	}
	mid := f.bottom - plotH/2
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" transform="rotate(-90 %.1f %.1f)" text-anchor="middle" class="unit">%s</text>`,
		4+fontH-2, mid, 4+fontH-2, mid, html.EscapeString(unit))
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="axis"/>`, f.left, f.w-padR, f.y(0), f.y(0))
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="axis"/>`, f.left, f.left, float64(padT)-6, f.bottom)
}

// titleWidth is the width of a chart title (13px bold).
func titleWidth(title string) float64 { return 7.8 * float64(len([]rune(title))) }

// legendItemWidth is the width of one legend entry: a swatch, the name
// in full, a gap.
func legendItemWidth(name string) float64 { return 14 + charW*float64(len([]rune(name))) + 18 }

// legendWidth is the widest legend entry (0 for none).
func legendWidth(names []string) float64 {
	w := 0.0
	for _, n := range names {
		w = math.Max(w, legendItemWidth(n))
	}
	return w
}

// legendRows is how many rows the legend takes in a chart of width w.
func legendRows(names []string, w float64) int {
	if len(names) == 0 {
		return 0
	}
	rows, x := 1, 0.0
	for _, n := range names {
		iw := legendItemWidth(n)
		if x > 0 && x+iw > w-padR-8 {
			rows, x = rows+1, 0
		}
		x += iw
	}
	return rows
}

// legend names the series in full under the plot, from y down, in as
// many rows as it takes (legendRows).
func legend(b *strings.Builder, ss []series, f frame, y float64) {
	x, row := 8.0, 0
	for _, s := range ss {
		iw := legendItemWidth(s.name)
		if x > 8 && x-8+iw > f.w-padR-8 {
			x, row = 8, row+1
		}
		ty := y + rowH*float64(row+1) - 4
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" class="legend">%s</text>`,
			x, ty-9, s.fill(), x+14, ty, html.EscapeString(s.name))
		x += iw
	}
}

// extent is the smallest and largest value drawn (0, 0 when there is none).
func extent(ss []series) (lo, hi float64) {
	for _, s := range ss {
		for _, v := range s.ys {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	return lo, hi
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// hbarChart draws one horizontal bar per label, worst first as given:
// each label in full on its own line above its bar (long tensor names are
// neither cut nor turned), the bars across the chart's width from 0, the
// value at each bar's end, the scale under the last bar.
func hbarChart(title, unit string, labels []string, s series) string {
	const (
		barH   = 10.0
		gap    = 5.0 // between a label and its bar
		pitch  = fontH + gap + barH + 8
		valueW = 64.0 // room right of the longest bar for its value
	)
	var b strings.Builder
	longest := 0
	for _, l := range labels {
		longest = max(longest, len([]rune(l)))
	}
	lo, hi := extent([]series{s})
	ticks, step := niceTicks(lo, hi)
	f := frame{ticks: ticks, labels: tickLabels(ticks, step), lo: ticks[0], hi: ticks[len(ticks)-1]}
	// The first tick label is centred on the plot's left edge.
	f.left = 8 + charW*float64(len(f.labels[0]))/2
	f.w = math.Max(chartW, math.Max(f.left+charW*float64(longest)+padR, titleWidth(title)+f.left+padR))
	f.plotW = f.w - f.left - padR - valueW
	top := float64(padT) + 4
	f.bottom = top + pitch*float64(len(labels))
	f.h = f.bottom + fontH + 12
	x := func(v float64) float64 { return f.left + f.plotW*(v-f.lo)/(f.hi-f.lo) }
	open(&b, title, f)
	for i, v := range f.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/>`, x(v), x(v), top, f.bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" class="tick">%s</text>`, x(v), f.bottom+fontH+4, f.labels[i])
	}
	last := f.labels[len(f.labels)-1]
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="unit">%s</text>`,
		x(f.hi)+charW*float64(len(last))/2+8, f.bottom+fontH+4, html.EscapeString(unit))
	for i, l := range labels {
		y := top + pitch*float64(i)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="xlabel">%s</text>`, f.left, y+fontH, html.EscapeString(l))
		v := s.ys[i]
		if math.IsNaN(v) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="unreported">- (not reported)</text>`, x(0)+4, y+fontH+gap+barH)
			continue
		}
		x0, x1 := x(math.Min(v, 0)), x(math.Max(v, 0))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.4g %s</title></rect>`,
			x0, y+fontH+gap, math.Max(x1-x0, 1), barH, s.fill(), html.EscapeString(l), v, html.EscapeString(unit))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="value">%.3g</text>`, x(math.Max(v, 0))+4, y+fontH+gap+barH, v)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="axis"/>`, x(0), x(0), top, f.bottom)
	b.WriteString("</svg>")
	return b.String()
}
