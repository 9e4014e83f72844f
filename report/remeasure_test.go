package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
)

// A remeasured gate: pass and FAIL are the remeasure's verdicts; an
// undecided one passes with a warning, or fails with --undecided fail.
func TestRemeasuredGates(t *testing.T) {
	old, new := sample(steady, steady, 98, 0.9999), sample(steady, steady, 98, 0.9999)
	rm := func(batch int, v string) Remeasured {
		return Remeasured{Batch: batch, OldMs: 1, NewMs: 1.1, Ratio: Interval{Median: 1.1, Low: 1.05, High: 1.15}, Rounds: 40, Seconds: 15,
			Verdict: v, OldSession: SessionOptions{"all", 1}, NewSession: SessionOptions{"disable", 1}}
	}
	for _, undecided := range []string{"pass", "fail"} {
		d := compareModels(old, new, "p50")
		d.Remeasure = &RemeasureSettings{Confidence: 0.99, MinRounds: 10, TimeS: 60, Undecided: undecided}
		d.Models[1].Remeasured = []Remeasured{rm(1, VerdictPass), rm(8, VerdictUndecided)}
		d.gates(config.Gates{MaxLatencyRegression: 10})
		var out bytes.Buffer
		if err := d.Write(&out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		for _, want := range []string{"remeasure: both builds' artifacts timed again here", "remeasured b1   p50 1.000 -> 1.100 ms: +10.0% [+5.0%, +15.0%] over 40 rounds in 15.0s; ORT level all, 1 thread -> level disable, 1 thread: pass",
			"pass max-latency-regression model.int8.onnx batch 1: remeasured p50"} {
			if !strings.Contains(text, want) {
				t.Errorf("--undecided %s: output lacks %q:\n%s", undecided, want, text)
			}
		}
		f := d.Failed()
		switch undecided {
		case "pass":
			if len(f) != 0 || !strings.Contains(text, "undecided max-latency-regression model.int8.onnx batch 8") || !strings.Contains(text, "warning: 1 latency gate(s) undecided") {
				t.Errorf("an undecided gate under --undecided pass: %d failed\n%s", len(f), text)
			}
		case "fail":
			if len(f) != 1 || !f[0].Undecided || !strings.Contains(text, "FAIL max-latency-regression model.int8.onnx batch 8") || strings.Contains(text, "warning:") {
				t.Errorf("an undecided gate under --undecided fail: %v\n%s", f, text)
			}
		}
	}
}
