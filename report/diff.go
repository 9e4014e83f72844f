package report

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/latency"
)

// bootstrapResamples is how many resamples put an interval on a latency
// ratio; bootstrapSeed makes the interval the same on every run.
const (
	bootstrapResamples = 2000
	bootstrapSeed      = 1
)

// Diff is what changed from one report to another, and the verdict of
// each gate.
type Diff struct {
	Old, New   *Report
	Percentile string
	// Changes are the options, inputs, versions and decisions that differ
	// between the two builds (Changes), shown before the figures.
	Changes []Change
	Models  []ModelDiff
	Gates   []GateResult
	// Remeasure, when set, says the latency gate judged a remeasure of
	// both builds (CompareTimed), and how it ran.
	Remeasure *RemeasureSettings
}

// ModelDiff pairs a model of both reports: the input models with each
// other, artifacts by path.
type ModelDiff struct {
	Name    string          `json:"name"`
	Old     *Model          `json:"old"`
	New     *Model          `json:"new"`
	Latency []LatencyChange `json:"latency,omitempty"`
	// Remeasured are the artifact's timings again, per batch size
	// (CompareTimed).
	Remeasured []Remeasured `json:"remeasured,omitempty"`
}

// LatencyChange is the ratio new/old of one batch size's latency at the
// chosen percentile, with its bootstrap interval over the timing runs.
type LatencyChange struct {
	Batch   int      `json:"batch"`
	OldMs   float64  `json:"old_ms"` // medians over runs
	NewMs   float64  `json:"new_ms"`
	Ratio   Interval `json:"ratio"`
	OldCV   float64  `json:"old_cv"` // spread of the runs: stddev / mean
	NewCV   float64  `json:"new_cv"`
	OldRuns int      `json:"old_runs"`
	NewRuns int      `json:"new_runs"`
	// Unsupported says why the percentile was not compared: a report's
	// timing windows held fewer runs than it needs, so each window's
	// figure under its name is another statistic (its slowest run).
	Unsupported string `json:"unsupported,omitempty"`
}

// Interval is a ratio and its interval: for the reports' runs, the ratio
// of medians and its 95% bootstrap interval; for a remeasure, the median
// of the rounds' ratios and its 99% sign-test interval.
type Interval struct {
	Median float64 `json:"median"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
}

// GateResult is one gate's verdict on one model (and batch size).
type GateResult struct {
	Gate   string `json:"gate"` // the flag's name, e.g. max-accuracy-drop
	Model  string `json:"model,omitempty"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"` // both values and the limit
	// Undecided says a remeasured latency gate's time ran out before its
	// interval was on one side of the limit: Pass then says what
	// --undecided made of it.
	Undecided bool `json:"undecided,omitempty"`
}

// Compare diffs old against new and applies the gates (zero: off).
func Compare(old, new *Report, g config.Gates) *Diff {
	if g.Percentile == "" {
		g.Percentile = "p50"
	}
	d := compareModels(old, new, g.Percentile)
	d.gates(g)
	return d
}

// CompareTimed is Compare at p50 with the latency gate judging the
// timings measure records in each ModelDiff's Remeasured (optc diff
// --remeasure, package remeasure) instead of the reports' runs; settings
// say how they were taken.
func CompareTimed(old, new *Report, g config.Gates, settings RemeasureSettings, measure func(*Diff) error) (*Diff, error) {
	d := compareModels(old, new, "p50")
	d.Remeasure = &settings
	if err := measure(d); err != nil {
		return nil, err
	}
	d.gates(g)
	return d, nil
}

// compareModels pairs the models of old and new and compares their
// recorded latency at percentile.
func compareModels(old, new *Report, percentile string) *Diff {
	d := &Diff{Old: old, New: new, Percentile: percentile, Gates: []GateResult{}, Changes: Changes(old, new)}
	for _, n := range new.Models {
		o := old.model(n.Role, n.Name)
		name := n.Name
		if n.Role == "input" {
			name = "input model"
		}
		md := ModelDiff{Name: name, Old: o, New: n}
		if o != nil && o.Latency != nil && n.Latency != nil {
			for _, nb := range n.Latency.Batches {
				ob := o.Latency.Batch(nb.Batch)
				if ob == nil {
					continue
				}
				ov, nv := runs(ob, percentile), runs(&nb, percentile)
				if why := unsupported(percentile, nb.Batch, ob, "old report", &nb, "new report"); why != "" {
					md.Latency = append(md.Latency, LatencyChange{Batch: nb.Batch, Unsupported: why})
					continue
				}
				md.Latency = append(md.Latency, LatencyChange{Batch: nb.Batch, OldMs: latency.Median(ov), NewMs: latency.Median(nv),
					Ratio: ratioInterval(nv, ov), OldCV: latency.CV(ov), NewCV: latency.CV(nv), OldRuns: len(ov), NewRuns: len(nv)})
			}
		}
		d.Models = append(d.Models, md)
	}
	return d
}

func (d *Diff) gates(g config.Gates) {
	add := func(gate, model string, pass bool, format string, args ...any) {
		d.Gates = append(d.Gates, GateResult{Gate: gate, Model: model, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}
	if g.MaxAccuracyDrop > 0 {
		checked := false
		for _, m := range d.Models {
			if m.Old == nil || taskAccuracy(m.Old) == nil || taskAccuracy(m.New) == nil {
				continue
			}
			checked = true
			o, n := *taskAccuracy(m.Old), *taskAccuracy(m.New)
			add("max-accuracy-drop", m.Name, o-n <= g.MaxAccuracyDrop,
				"task accuracy %.2f%% -> %.2f%% (%+.2f pt; allowed drop %g pt)%s", o, n, n-o, g.MaxAccuracyDrop, m.New.Accuracy.metricNote())
		}
		if !checked {
			add("max-accuracy-drop", "", false, "no model has task accuracy in both reports (build with eval labels)")
		}
	}
	for _, m := range d.Models {
		if m.New.Role != "artifact" {
			continue
		}
		if g.MinCosine > 0 && m.New.Accuracy != nil && len(m.New.Accuracy.Outputs) > 0 {
			// NaN (no finite pair) fails: the comparison is written so.
			c, bad := minCosine(m.New), m.New.nonFinite()
			detail := fmt.Sprintf("cosine to its input model %s (minimum %g)", c.Text("%.6f"), g.MinCosine)
			if bad > 0 {
				detail += fmt.Sprintf("; NaN/Inf at %d output values where the input model is finite", bad)
			}
			add("min-cosine", m.Name, float64(c) >= g.MinCosine && bad == 0, "%s", detail)
		}
		if g.MaxSize > 0 {
			add("max-size", m.Name, m.New.Bytes <= g.MaxSize, "%d bytes (maximum %d)", m.New.Bytes, g.MaxSize)
		}
	}
	if g.MaxLatencyRegression > 0 && d.Remeasure != nil {
		d.remeasuredGates(g.MaxLatencyRegression)
	} else if g.MaxLatencyRegression > 0 {
		limit := 1 + g.MaxLatencyRegression/100
		for _, m := range d.Models {
			for _, l := range m.Latency {
				if l.Unsupported != "" {
					// A gate that cannot be judged fails, saying why:
					// passing it would vouch for a figure nobody measured.
					add("max-latency-regression", fmt.Sprintf("%s batch %d", m.Name, l.Batch), false, "%s", l.Unsupported)
					continue
				}
				// Only a regression beyond the noise fails: the whole
				// interval must be past the limit.
				add("max-latency-regression", fmt.Sprintf("%s batch %d", m.Name, l.Batch), l.Ratio.Low <= limit,
					"%s %.3f -> %.3f ms: %s (allowed +%g%%; runs' CV %.1f%% -> %.1f%%)",
					d.Percentile, l.OldMs, l.NewMs, l.Ratio.percent(), g.MaxLatencyRegression, 100*l.OldCV, 100*l.NewCV)
			}
		}
	}
	if g.MinSpeedup > 0 {
		in := d.New.Models[0]
		for _, m := range d.Models {
			if m.New.Role != "artifact" || m.New.Latency == nil || in.Latency == nil {
				continue
			}
			for _, b := range m.New.Latency.Batches {
				ib := in.Latency.Batch(b.Batch)
				if ib == nil {
					continue
				}
				if why := unsupported(d.Percentile, b.Batch, ib, "input model", &b, "artifact"); why != "" {
					add("min-speedup", fmt.Sprintf("%s batch %d", m.Name, b.Batch), false, "%s", why)
					continue
				}
				s := ratioInterval(runs(ib, d.Percentile), runs(&b, d.Percentile))
				add("min-speedup", fmt.Sprintf("%s batch %d", m.Name, b.Batch), s.High >= g.MinSpeedup,
					"%s speed-up over the input model %.2fx [%.2fx, %.2fx] (minimum %gx)",
					d.Percentile, s.Median, s.Low, s.High, g.MinSpeedup)
			}
		}
	}
}

// remeasuredGates judges the latency gate on the remeasured artifacts:
// a FAIL or pass verdict is the gate's; an undecided one passes, or fails
// with UndecidedFails (Remeasure.Undecided "fail").
func (d *Diff) remeasuredGates(maxRegression float64) {
	for _, m := range d.Models {
		for _, r := range m.Remeasured {
			g := GateResult{Gate: "max-latency-regression", Model: fmt.Sprintf("%s batch %d", m.Name, r.Batch),
				Pass: r.Verdict == VerdictPass, Undecided: r.Verdict == VerdictUndecided,
				Detail: fmt.Sprintf("remeasured %s (allowed +%g%%)", r.summary(), maxRegression)}
			if g.Undecided {
				g.Pass = d.Remeasure.Undecided != "fail"
				g.Detail += fmt.Sprintf("; undecided: the interval still holds the limit when its %.1fs ran out", r.Seconds)
			}
			d.Gates = append(d.Gates, g)
		}
	}
}

// summary is a remeasure's figures on one line: both medians, the ratio
// with its interval, and what it took.
func (r Remeasured) summary() string {
	ratio := r.Ratio.percent()
	if r.Ratio.Low == 0 && r.Ratio.High == 0 {
		ratio = fmt.Sprintf("%+.1f%% (no interval yet)", 100*(r.Ratio.Median-1))
	}
	s := fmt.Sprintf("p50 %.3f -> %.3f ms: %s over %d rounds in %.1fs", r.OldMs, r.NewMs, ratio, r.Rounds, r.Seconds)
	if r.OldSession != r.NewSession {
		s += fmt.Sprintf("; ORT %s -> %s", r.OldSession, r.NewSession)
	}
	return s
}

func (s SessionOptions) String() string {
	switch s.Threads {
	case 0:
		return fmt.Sprintf("level %s, a thread per core", s.Level)
	case 1:
		return fmt.Sprintf("level %s, 1 thread", s.Level)
	}
	return fmt.Sprintf("level %s, %d threads", s.Level, s.Threads)
}

// Failed are the gates that failed.
func (d *Diff) Failed() []GateResult {
	var f []GateResult
	for _, g := range d.Gates {
		if !g.Pass {
			f = append(f, g)
		}
	}
	return f
}

// Write prints what changed, model by model, then each gate's verdict.
func (d *Diff) Write(w io.Writer) error {
	p := &printer{w: w}
	p.f("old: %s (%s)\nnew: %s (%s)\n", d.Old.Input, d.Old.Environment.short(), d.New.Input, d.New.Environment.short())
	if rm := d.Remeasure; rm != nil {
		p.f("remeasure: both builds' artifacts timed again here, interleaved (p50; %g%% intervals over at least %d rounds; %gs at most in all)\n",
			100*rm.Confidence, rm.MinRounds, rm.TimeS)
	}
	for _, side := range []struct {
		name string
		r    *Report
	}{{"old", d.Old}, {"new", d.New}} {
		for _, l := range side.r.Caveats.Lines() {
			p.f("%s: warning: %s\n", side.name, l)
		}
		for _, l := range refusals(side.r) {
			p.f("%s: %s\n", side.name, strings.ReplaceAll(l, "`", ""))
		}
	}
	d.writeChanges(p)
	for _, m := range d.Models {
		if m.Old == nil {
			p.f("\n%s: new (%d bytes)\n", m.Name, m.New.Bytes)
			if n := m.New.nonFinite(); n > 0 {
				p.f("  NaN/Inf   %d output values where the input model is finite\n", n)
			}
			continue
		}
		p.f("\n%s\n", m.Name)
		if m.Old.Bytes != m.New.Bytes {
			p.f("  size      %d -> %d bytes (%+.1f%%)\n", m.Old.Bytes, m.New.Bytes, pct(float64(m.Old.Bytes), float64(m.New.Bytes)))
		}
		if m.Old.Nodes != m.New.Nodes {
			p.f("  nodes     %d -> %d\n", m.Old.Nodes, m.New.Nodes)
		}
		if o, n := taskAccuracy(m.Old), taskAccuracy(m.New); o != nil && n != nil {
			p.f("  accuracy  %.2f%% -> %.2f%% (%+.2f pt)%s\n", *o, *n, *n-*o, m.New.Accuracy.metricNote())
		}
		if m.Old.Accuracy != nil && m.New.Accuracy != nil && len(m.Old.Accuracy.Outputs) > 0 && len(m.New.Accuracy.Outputs) > 0 {
			p.f("  cosine    %s -> %s\n", minCosine(m.Old).Text("%.6f"), minCosine(m.New).Text("%.6f"))
		}
		if o, n := m.Old.nonFinite(), m.New.nonFinite(); o > 0 || n > 0 {
			p.f("  NaN/Inf   %d -> %d output values where the input model is finite\n", o, n)
		}
		for _, l := range m.Latency {
			if l.Unsupported != "" {
				p.f("  %s b%-3d  not compared: %s\n", d.Percentile, l.Batch, l.Unsupported)
				continue
			}
			p.f("  %s b%-3d  %.3f -> %.3f ms: %s over %d/%d runs (CV %.1f%% / %.1f%%)\n", d.Percentile, l.Batch,
				l.OldMs, l.NewMs, l.Ratio.percent(), l.OldRuns, l.NewRuns, 100*l.OldCV, 100*l.NewCV)
		}
		for _, r := range m.Remeasured {
			verdict := ""
			if r.Verdict != "" {
				verdict = ": " + r.Verdict
			}
			p.f("  remeasured b%-3d %s%s\n", r.Batch, r.summary(), verdict)
		}
	}
	for _, o := range d.Old.Models {
		if d.New.model(o.Role, o.Name) == nil {
			p.f("\n%s: gone\n", o.Name)
		}
	}
	if len(d.Gates) > 0 {
		p.f("\ngates\n")
	}
	undecided := 0
	for _, g := range d.Gates {
		verdict := "pass"
		switch {
		case !g.Pass:
			verdict = "FAIL"
		case g.Undecided:
			verdict, undecided = "undecided", undecided+1
		}
		model := ""
		if g.Model != "" {
			model = " " + g.Model
		}
		p.f("  %s %s%s: %s\n", verdict, g.Gate, model, g.Detail)
	}
	if undecided > 0 {
		p.f("warning: %d latency gate(s) undecided within --remeasure-time: passed (--undecided fail fails them; a longer --remeasure-time or a quieter runner decides them)\n", undecided)
	}
	return p.err
}

// percent is the change as a signed percentage with its interval.
// writeChanges lists what differs between the builds, aligned, before
// the figures it explains.
func (d *Diff) writeChanges(p *printer) {
	if len(d.Changes) == 0 {
		p.f("\nchanged: nothing (the same options, inputs, versions and decisions)\n")
		return
	}
	width := 0
	for _, c := range d.Changes {
		width = max(width, len(c.What))
	}
	p.f("\nchanged (options, inputs, versions, decisions):\n")
	for _, c := range d.Changes {
		p.f("  %-*s  %s -> %s\n", width, c.What, c.Old, c.New)
	}
}

func (i Interval) percent() string {
	return fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%]", 100*(i.Median-1), 100*(i.Low-1), 100*(i.High-1))
}

func (e Environment) short() string {
	return strings.TrimSpace(fmt.Sprintf("%s, ORT %s", e.CPU, e.ORTVersion))
}

// runs are the per-run values at a percentile (the median alone for a
// report without repeats).
func runs(b *latency.BatchTiming, percentile string) []float64 {
	pick := func(p50, p90, p99 float64) float64 {
		switch percentile {
		case "p90":
			return p90
		case "p99":
			return p99
		}
		return p50
	}
	if len(b.Repeats) == 0 {
		return []float64{pick(b.P50, b.P90, b.P99)}
	}
	xs := make([]float64, len(b.Repeats))
	for i, r := range b.Repeats {
		xs[i] = pick(r.P50, r.P90, r.P99)
	}
	return xs
}

// unsupported says why the per-window figures at percentile of the
// timings a and b (named by what they are) are not that percentile: their
// windows had fewer runs than it needs (latency.Percentiles), so each
// window's "p99" is its slowest run. "" when both hold it, or when a
// report does not say how many runs there were.
func unsupported(percentile string, batch int, a *latency.BatchTiming, aName string, b *latency.BatchTiming, bName string) string {
	need := 1
	for _, p := range latency.Percentiles {
		if p.Name == percentile {
			need = p.MinRuns
		}
	}
	var short []string
	for _, t := range []struct {
		l    *latency.BatchTiming
		name string
	}{{a, aName}, {b, bName}} {
		if per := t.l.N / max(len(t.l.Repeats), 1); t.l.N > 0 && per < need {
			short = append(short, fmt.Sprintf("%d runs in the %s's", per, t.name))
		}
	}
	if len(short) == 0 {
		return ""
	}
	return fmt.Sprintf("each timing window at batch %d held %s, and %s needs %d (a window's figure is then its slowest run); build with a longer latency.duration or fewer latency.repeats, or gate on p50",
		batch, strings.Join(short, " and "), percentile, need)
}

// ratioInterval is median(num)/median(den) with a percentile bootstrap
// 95% interval: both samples resampled with replacement, seeded, so the
// same reports always give the same interval.
func ratioInterval(num, den []float64) Interval {
	ratio := func(n, d float64) float64 {
		if d == 0 {
			return math.Inf(1)
		}
		return n / d
	}
	iv := Interval{Median: ratio(latency.Median(num), latency.Median(den))}
	rng := rand.New(rand.NewPCG(bootstrapSeed, bootstrapSeed))
	rs := make([]float64, bootstrapResamples)
	sn, sd := make([]float64, len(num)), make([]float64, len(den))
	for i := range rs {
		for j := range sn {
			sn[j] = num[rng.IntN(len(num))]
		}
		for j := range sd {
			sd[j] = den[rng.IntN(len(den))]
		}
		rs[i] = ratio(latency.Median(sn), latency.Median(sd))
	}
	slices.Sort(rs)
	iv.Low, iv.High = rs[int(0.025*float64(len(rs)))], rs[int(0.975*float64(len(rs)))-1]
	return iv
}

func pct(old, new float64) float64 {
	if old == 0 {
		return 0
	}
	return 100 * (new - old) / old
}
