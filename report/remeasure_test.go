package report

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
)

func TestDecide(t *testing.T) {
	flat := func(n int, v float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = v + 0.001*float64(i%5)
		}
		return xs
	}
	for _, tc := range []struct {
		name   string
		ratios []float64
		limit  float64
		want   string
	}{
		{"too few rounds for an interval", flat(7, 2), 1.1, VerdictUndecided},
		{"all above", flat(10, 2), 1.1, VerdictFail},
		{"all below", flat(10, 1), 1.1, VerdictPass},
		{"one round past the limit at n 10 ([min, max])", append(flat(9, 1), 1.2), 1.1, VerdictUndecided},
		{"straddling", append(flat(10, 1.05), flat(10, 1.15)...), 1.1, VerdictUndecided},
		{"no gate, narrow", flat(10, 1.3), 0, ""},
		{"no gate, wide", append(flat(9, 1), 1.5), 0, VerdictUndecided},
	} {
		if _, v := decide(tc.ratios, tc.limit); v != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, v, tc.want)
		}
	}
}

// simulate runs the sequential rule on rounds whose ratios are
// trueRatio times log-normal noise (sigma a round) with one round in 20
// disturbed by up to ±40% more (a neighbour's burst), at most maxRounds
// rounds each, and counts the verdicts.
func simulate(trueRatio, limit, sigma float64, trials, maxRounds int) map[string]int {
	rng := rand.New(rand.NewPCG(7, uint64(trueRatio*1000)))
	counts := map[string]int{}
	for range trials {
		seq := &sequential{limit: limit}
		for range maxRounds {
			r := trueRatio * math.Exp(sigma*rng.NormFloat64())
			if rng.IntN(20) == 0 {
				r *= math.Exp(0.4 * (2*rng.Float64() - 1))
			}
			if seq.add(r, true) {
				break
			}
		}
		_, v := seq.result()
		counts[v]++
	}
	return counts
}

// The sequential rule's error rates on synthetic rounds (10% noise a
// round) against a 10% gate: no change never fails, a large slowdown
// always does; near the limit, where the repeated looks give noise its
// chances, a verdict on the wrong side stays rare, and exactly at the
// limit each verdict comes about 5% of the time (the looks' price: one
// look alone would give 0.5%), the rest undecided. docs/ci.md quotes
// these rates (1,000 trials of 2,000 rounds there).
func TestSequentialRule(t *testing.T) {
	const trials, maxRounds = 400, 600
	for _, tc := range []struct {
		ratio    float64
		wrong    string // the verdict on the wrong side of the limit
		maxWrong int    // at most
		right    string // the verdict most trials must reach ("": none)
	}{
		{1.00, VerdictFail, 0, VerdictPass},
		{1.05, VerdictFail, 0, VerdictPass},
		{1.09, VerdictFail, trials / 50, ""},
		{1.10, VerdictFail, trials / 10, ""},
		{1.10, VerdictPass, trials / 10, ""},
		{1.11, VerdictPass, trials / 50, ""},
		{1.20, VerdictPass, 0, VerdictFail},
		{2.00, VerdictPass, 0, VerdictFail},
	} {
		c := simulate(tc.ratio, 1.1, 0.1, trials, maxRounds)
		t.Logf("true ratio %.2f: %v", tc.ratio, c)
		if c[tc.wrong] > tc.maxWrong {
			t.Errorf("true ratio %.2f against +10%%: %d of %d %s", tc.ratio, c[tc.wrong], trials, tc.wrong)
		}
		if tc.right != "" && c[tc.right] < trials*19/20 {
			t.Errorf("true ratio %.2f against +10%%: %d of %d %s, want nearly all", tc.ratio, c[tc.right], trials, tc.right)
		}
	}
}

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
		d.Remeasure = &RemeasureSettings{Confidence: RemeasureConfidence, MinRounds: MinRounds, TimeS: 60, Undecided: undecided}
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

func TestCompareRemeasuredUsage(t *testing.T) {
	old := sample(steady, steady, 98, 0.9999)
	if _, err := CompareRemeasured(old, old, config.Gates{Percentile: "p99"}, RemeasureOptions{}); err == nil || !strings.Contains(err.Error(), "p50") {
		t.Errorf("p99: %v", err)
	}
	dir := t.TempDir()
	_, err := CompareRemeasured(old, old, config.Gates{MaxLatencyRegression: 10}, RemeasureOptions{Old: dir, New: dir})
	if err == nil || !strings.Contains(err.Error(), "manifest.json: no such file: --remeasure needs the build folders") {
		t.Errorf("a folder without a manifest: %v", err)
	}
}
