package report

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
)

// chromium finds headless Chromium. Without it the test skips, except
// under CI (CI=true) or with OPTC_REQUIRE_CHROMIUM set
// (scripts/check-report-html.sh), where a missing input is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" || os.Getenv("OPTC_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no chromium on PATH, and CI=true or OPTC_REQUIRE_CHROMIUM asks for the check (Debian: apt-get install -y chromium; .ci/run installs it)")
	}
	t.Skip("no chromium on PATH")
	return ""
}

// measureScript runs in a copy of the page (report.html itself has no
// script) and writes what the test checks into a <pre>: the page's and
// the window's widths, and each problem found in the charts and tables.
const measureScript = `<script>
(function () {
  var out = {vw: window.innerWidth, sw: document.documentElement.scrollWidth,
    sh: document.documentElement.scrollHeight, minScale: 1, charts: 0, problems: []};
  function bad(s) { out.problems.push(s); }
  function overlap(a, b) {
    var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    return w > 1 && h > 1;
  }
  document.querySelectorAll('figure').forEach(function (fig) {
    var svg = fig.querySelector('svg');
    var sr = svg.getBoundingClientRect();
    out.charts++;
    out.minScale = Math.min(out.minScale, sr.width / svg.viewBox.baseVal.width);
    if (sr.right > out.vw + 0.5) bad(fig.id + ': the chart ends at ' + sr.right + ' px, past the window (' + out.vw + ')');
    var texts = Array.prototype.map.call(svg.querySelectorAll('text'), function (t) {
      return {r: t.getBoundingClientRect(), cls: t.getAttribute('class') || '', turned: /rotate\(-[1-8]/.test(t.getAttribute('transform') || ''),
        s: (t.lastChild && t.lastChild.nodeType === 3 ? t.lastChild.nodeValue : t.textContent)};
    });
    var lowest = 0;
    Array.prototype.forEach.call(svg.querySelectorAll('text, rect, line, circle, polyline'), function (el) {
      var r = el.getBoundingClientRect();
      if (r.width > 0 || r.height > 0) lowest = Math.max(lowest, r.bottom);
    });
    if (sr.bottom - lowest > 24) bad(fig.id + ': an empty band of ' + Math.round(sr.bottom - lowest) + ' px under the chart');
    texts.forEach(function (a, i) {
      if (a.r.left < sr.left - 0.5 || a.r.right > sr.right + 0.5 || a.r.top < sr.top - 0.5 || a.r.bottom > sr.bottom + 0.5)
        bad(fig.id + ': "' + a.s + '" is cut off by the chart edge');
      if ((a.cls === 'legend' || a.cls === 'xlabel') && a.s.indexOf('\u2026') >= 0 && fig.id.indexOf('sqnr') === 0) bad(fig.id + ': "' + a.s + '" is shortened');
      if (a.cls === 'legend' && a.s.indexOf('\u2026') >= 0) bad(fig.id + ': legend "' + a.s + '" is shortened');
      if (a.cls === 'tick') {
        if (!/^-?[0-9]+(\.[0-9]+)?(e-[0-9]+|k|M|G)?$/.test(a.s)) bad(fig.id + ': tick label "' + a.s + '" is not a number people read (10k, 1.5M, 0.2)');
        var digits = a.s.replace(/(e.*|k|M|G)$/, '').replace(/[-.]/g, '').replace(/^0+/, '').replace(/0+$/, '');
        if (digits.length > 2) bad(fig.id + ': tick label "' + a.s + '" is not rounded');
      }
      texts.forEach(function (b, j) {
        if (j <= i || (a.turned && b.turned)) return;
        if (overlap(a.r, b.r)) bad(fig.id + ': "' + a.s + '" overlaps "' + b.s + '"');
      });
    });
  });
  out.scrolling = [];
  document.querySelectorAll('.table').forEach(function (d) {
    if (d.getBoundingClientRect().right > out.vw + 0.5) bad('a table box is wider than the window');
    if (d.scrollWidth > d.clientWidth + 1) out.scrolling.push(d.querySelector('tr').textContent.trim().slice(0, 60) + ' (' + d.scrollWidth + ' px in ' + d.clientWidth + ')');
  });
  var pre = document.createElement('pre');
  pre.id = 'optc-measure';
  pre.textContent = encodeURIComponent(JSON.stringify(out));
  document.body.appendChild(pre);
})();
</script>`

type measurement struct {
	VW, SW, SH int
	MinScale   float64
	Charts     int
	Problems   []string
	Scrolling  []string // tables that scroll sideways in their box
}

var measured = regexp.MustCompile(`<pre id="optc-measure">([^<]*)</pre>`)

// measure lays page out in a window width px wide and returns what
// measureScript found.
func measure(t *testing.T, bin, page string, width int) measurement {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	i := strings.LastIndex(html, "</body>")
	if i < 0 {
		t.Fatalf("%s: no </body>", page)
	}
	probe := filepath.Join(t.TempDir(), "probe.html")
	if err := os.WriteFile(probe, []byte(html[:i]+measureScript+html[i:]), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := runChromium(t, bin, fmt.Sprintf("--window-size=%d,1000", width), "--dump-dom", "file://"+probe)
	m := measured.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("chromium ran no measurement at %d px:\n%.500s", width, dom)
	}
	js, err := url.QueryUnescape(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var r measurement
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	return r
}

func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile")}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errOut.String())
	}
	return out.String()
}

// TestHTMLRendersInChromium lays report.html out in headless Chromium at
// 1400 and 900 px: the page never scrolls sideways (at 900 px a wide table
// may scroll in its own box, at 1400 none does; charts shrink to the
// window), chart text is neither cut off nor overlapping, tick labels are
// round numbers as people read them (10k), legends and the SQNR chart's
// tensor names are whole,
// no empty band is left under a chart; and a screenshot shows the charts
// drawn (the series colours cover a visible area). OPTC_REPORT_HTML
// names a real build's page to check instead of the samples;
// OPTC_SCREENSHOT a folder to keep the screenshots in.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	pages := map[string]string{}
	if p := os.Getenv("OPTC_REPORT_HTML"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		pages["page"] = abs
	} else {
		for name, r := range map[string]*Report{
			"sample": sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995),
			"wide":   wideSample(),
		} {
			pages[name] = filepath.Join(dir, name+".html")
			f, err := os.Create(pages[name])
			if err != nil {
				t.Fatal(err)
			}
			if err := r.WriteHTML(f); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for name, page := range pages {
		for _, width := range []int{1400, 900} {
			t.Run(fmt.Sprintf("%s-%d", name, width), func(t *testing.T) {
				m := measure(t, bin, page, width)
				t.Logf("window %d px: page %d px wide, %d high; %d charts, scaled down to %.2f at most", m.VW, m.SW, m.SH, m.Charts, m.MinScale)
				if m.VW != width {
					t.Fatalf("window is %d px, want %d", m.VW, width)
				}
				if m.SW > m.VW {
					t.Errorf("the page scrolls sideways: %d px wide in a %d px window", m.SW, m.VW)
				}
				if m.Charts < 4 {
					t.Errorf("%d charts, want at least 4", m.Charts)
				}
				if m.MinScale < 0.6 {
					t.Errorf("a chart is shrunk to %.2f of its size: its text is too small to read", m.MinScale)
				}
				for _, p := range m.Problems {
					t.Error(p)
				}
				// At 1400 px every table reads without scrolling; a
				// narrower window may scroll a wide one in its box.
				if width >= 1400 {
					for _, s := range m.Scrolling {
						t.Errorf("a table scrolls sideways: %s", s)
					}
				}
				screenshot(t, bin, page, width, m.SH, fmt.Sprintf("%s-%d.png", name, width))
			})
		}
	}
}

// screenshot takes the whole page at width and checks that the charts
// were drawn: the first two series colours (the input model and the
// first artifact), which only charts use, cover a visible area.
func screenshot(t *testing.T, bin, page string, width, height int, name string) {
	t.Helper()
	shot := filepath.Join(t.TempDir(), name)
	runChromium(t, bin, fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if keep := os.Getenv("OPTC_SCREENSHOT"); keep != "" {
		if b, err := os.ReadFile(shot); err == nil {
			os.MkdirAll(keep, 0o755)
			os.WriteFile(filepath.Join(keep, name), b, 0o644)
		}
	}
	for _, hex := range palette[:2] {
		want, _ := strconv.ParseUint(hex[1:], 16, 32)
		wr, wg, wb := int(want>>16), int(want>>8&0xff), int(want&0xff)
		n := 0
		bounds := img.Bounds()
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			for x := bounds.Min.X; x < bounds.Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if near(int(r>>8), wr) && near(int(g>>8), wg) && near(int(b>>8), wb) {
					n++
				}
			}
		}
		if n < 300 {
			t.Errorf("the charts are not visible: %d pixels of series colour %s in the screenshot (want >= 300)", n, hex)
		}
	}
}

func near(a, b int) bool { return a-b < 24 && b-a < 24 }

// wideSample is a build report like a real one over every target: six
// models with long paths, throughput in the tens of thousands, latencies
// that are no round numbers, 30 SQNR tensors with long names (one
// negative), many op types, and a table wider than a 900 px window.
func wideSample() *Report {
	r := sample(steady, []float64{0.483, 0.49, 0.47, 0.5, 0.48}, 97.5, 0.9995)
	in, art := r.Models[0], r.Models[1]
	in.Name, r.Input = "testdata/models/a_classifier_with_a_long_name.onnx", "testdata/models/a_classifier_with_a_long_name.onnx"
	for i, name := range []string{"tensorrt/model.int8.qdq.onnx", "ort/model.ort", "tensorrt/model.fp16.onnx",
		"triton/model_repository/a_classifier_with_a_long_name/1/model.onnx"} {
		m := *art
		m.Name = name
		lat := *art.Latency
		lat.Batches = nil
		for _, b := range art.Latency.Batches {
			b.P50 *= 1 + 0.13*float64(i)
			b.Throughput = 18800 / (1 + 0.13*float64(i))
			lat.Batches = append(lat.Batches, b)
			b8 := b
			b8.Batch, b8.P50, b8.P99, b8.Throughput = 8, b.P50*5.3, b.P99*6.1, b.Throughput*1.6
			lat.Batches = append(lat.Batches, b8)
		}
		m.Latency = &lat
		r.Models = append(r.Models, &m)
	}
	for _, m := range []*Model{in, art} {
		b8 := m.Latency.Batches[0]
		b8.Batch, b8.Throughput = 8, b8.Throughput*1.7
		m.Latency.Batches = append(m.Latency.Batches, b8)
	}
	ops := []string{"Conv", "Relu", "QuantizeLinear", "DequantizeLinear", "BatchNormalization", "Add", "MatMul",
		"Gemm", "GlobalAveragePool", "Flatten", "Reshape", "Transpose", "Softmax", "Concat", "Mul", "Sigmoid"}
	for k, m := range r.Models {
		m.Ops = nil
		for i, op := range ops {
			if (i+k)%3 != 0 {
				m.Ops = append(m.Ops, graph.OpCount{Op: op, Count: 1 + (i*7+k*3)%23})
			}
		}
	}
	q := r.Quantization[0]
	q.SQNR = nil
	for i := range 30 {
		q.SQNR = append(q.SQNR, TensorSQNR{fmt.Sprintf("/backbone/stage%d/block%d/conv/Conv_output_0", i/4, i%4), jsonfloat.Float(-3.7 + 1.9*float64(i))})
	}
	return r
}
