package remeasure

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/report"
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
		{"too few rounds for an interval", flat(7, 2), 1.1, report.VerdictUndecided},
		{"all above", flat(10, 2), 1.1, report.VerdictFail},
		{"all below", flat(10, 1), 1.1, report.VerdictPass},
		{"one round past the limit at n 10 ([min, max])", append(flat(9, 1), 1.2), 1.1, report.VerdictUndecided},
		{"straddling", append(flat(10, 1.05), flat(10, 1.15)...), 1.1, report.VerdictUndecided},
		{"no gate, narrow", flat(10, 1.3), 0, ""},
		{"no gate, wide", append(flat(9, 1), 1.5), 0, report.VerdictUndecided},
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
		{1.00, report.VerdictFail, 0, report.VerdictPass},
		{1.05, report.VerdictFail, 0, report.VerdictPass},
		{1.09, report.VerdictFail, trials / 50, ""},
		{1.10, report.VerdictFail, trials / 10, ""},
		{1.10, report.VerdictPass, trials / 10, ""},
		{1.11, report.VerdictPass, trials / 50, ""},
		{1.20, report.VerdictPass, 0, report.VerdictFail},
		{2.00, report.VerdictPass, 0, report.VerdictFail},
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

func TestCompareRemeasuredUsage(t *testing.T) {
	timed := func() *latency.Timing { return &latency.Timing{Batches: []latency.BatchTiming{{Batch: 1}}} }
	old := &report.Report{Schema: report.Schema, Kind: "build", Models: []*report.Model{{Name: "in.onnx", Role: "input", Latency: timed()},
		{Name: "model.int8.onnx", Role: "artifact", Latency: timed()}}}
	if _, err := Compare(old, old, config.Gates{Percentile: "p99"}, Options{}); err == nil || !strings.Contains(err.Error(), "p50") {
		t.Errorf("p99: %v", err)
	}
	dir := t.TempDir()
	_, err := Compare(old, old, config.Gates{MaxLatencyRegression: 10}, Options{Old: dir, New: dir})
	if err == nil || !strings.Contains(err.Error(), "manifest.json: no such file: --remeasure needs the build folders") {
		t.Errorf("a folder without a manifest: %v", err)
	}
}
