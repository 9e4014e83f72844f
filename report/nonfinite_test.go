package report

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
)

// allNaN is sample's artifact made the fp16 variant whose output is NaN
// everywhere the input model is finite, with an SQNR of -Inf.
func allNaN() *Report {
	r := sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995)
	nan := jsonfloat.Float(math.NaN())
	r.Models[1].Accuracy.Outputs[0] = OutputAccuracy{Name: "logits", Elements: 2560, FinitePairs: 0,
		NaN: schema.Sides{B: 2560}, NonFinite: 2560, Cosine: nan, SNRdB: nan, MaxAbs: nan, MeanAbs: nan}
	r.Quantization[0].SQNR[0].SQNRdB = jsonfloat.Float(math.Inf(-1))
	r.Quantization[0].SQNR[2].SQNRdB = jsonfloat.Float(math.Inf(1))
	return r
}

// NaN and the infinities are written as "NaN", "+Inf" and "-Inf" and read
// back unchanged; no stage fails on them, and every rendering shows them.
func TestNonFiniteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := allNaN()
	if err := r.WriteFolder(dir); err != nil {
		t.Fatalf("writing a report with NaN: %v", err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cosine": "NaN"`, `"sqnr_db": "-Inf"`, `"sqnr_db": "+Inf"`, `"nonfinite_where_input_finite": 2560`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("report.json lacks %s", want)
		}
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := got.Models[1].Accuracy.Outputs[0]
	if !math.IsNaN(float64(o.Cosine)) || !math.IsNaN(float64(o.SNRdB)) || o.NaN.B != 2560 || o.NonFinite != 2560 {
		t.Errorf("read back %+v", o)
	}
	if s := got.Quantization[0].SQNR; !math.IsInf(float64(s[0].SQNRdB), -1) || !math.IsInf(float64(s[2].SQNRdB), 1) {
		t.Errorf("SQNR read back %+v", s)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip changed the report:\n%s\n%s", a, b)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"`model.int8.onnx` **NaN/Inf**", "| n/a |", "**NaN/Inf: `model.int8.onnx` is NaN or infinite at 2560 output values",
		"logits: NaN 2560, Inf 0; 0 of 2560 finite pairs", "| 0 of 2560 | 0 / 2560 | 0 / 0 | n/a | n/a |", "| `a` | -Inf |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	checkSelfContained(t, string(html))
	if !strings.Contains(string(html), "<strong>NaN/Inf: <code>model.int8.onnx</code> is NaN or infinite") {
		t.Error("report.html does not show the NaN/Inf warning in bold")
	}
	if strings.Contains(string(html), `="NaN"`) || strings.Contains(string(html), `="+Inf"`) {
		t.Error("report.html draws with a non-finite coordinate")
	}
}

// A NaN metric in NEW fails its gate, and diff shows the NaN/Inf count.
func TestDiffWithNaN(t *testing.T) {
	old, new := sample(steady, steady, 98, 0.9999), allNaN()
	d := Compare(old, new, config.Gates{MinCosine: 0.99})
	var out bytes.Buffer
	if err := d.Write(&out); err != nil {
		t.Fatal(err)
	}
	f := d.Failed()
	if len(f) != 1 || f[0].Gate != "min-cosine" || !strings.Contains(f[0].Detail, "cosine to its input model n/a") ||
		!strings.Contains(f[0].Detail, "NaN/Inf at 2560 output values") {
		t.Errorf("failed %+v\n%s", f, out.String())
	}
	for _, want := range []string{"cosine    0.999900 -> n/a", "NaN/Inf   0 -> 2560 output values where the input model is finite"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, out.String())
		}
	}
	// A finite cosine does not hide NaN elsewhere in the output.
	partly := sample(steady, steady, 98, 0.9999)
	partly.Models[1].Accuracy.Outputs[0].NonFinite = 3
	if f := Compare(old, partly, config.Gates{MinCosine: 0.99}).Failed(); len(f) != 1 {
		t.Errorf("3 NaN values with cosine 0.9999 passed the min-cosine gate")
	}
	// And a NaN report diffed against itself with every gate renders.
	if err := Compare(new, new, config.Gates{MaxAccuracyDrop: 1, MinCosine: 0.9, MaxLatencyRegression: 5, MinSpeedup: 1.1, MaxSize: 1}).Write(io.Discard); err != nil {
		t.Fatal(err)
	}
}
