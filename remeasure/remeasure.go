// Package remeasure is optc diff --remeasure: it times two build folders'
// artifacts again, here and interleaved, for the latency gate to judge.
package remeasure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report"
)

// A remeasure (optc diff --remeasure) times both builds' artifacts again,
// in this process, interleaved, instead of comparing the timings each
// build recorded: those describe the noise inside one build, not the
// drift between two builds made minutes or runners apart (six builds of
// one config, diffed pairwise, failed a 10% gate 2 times in 5).
//
// Each artifact both builds time is paired by its path. At each batch
// size both reports timed it at, both sessions (each at its own build's
// ORT level and threads) are warmed up on the same random inputs, then
// take turns, a round being a turn of each (A B, then B A: who goes first
// alternates), 3 runs a turn (1 for runs of 100 ms or more). A round's
// ratio is the median of NEW's runs in it over the median of OLD's: drift
// slower than a round cancels out of it. The statistic is the median of
// the rounds' ratios, with the sign test's distribution-free interval
// (latency.MedianInterval) at Confidence: no seed, no assumption
// about the shape of the noise, and one round a neighbour disturbed
// moves it no more than any other round.
//
// It is sequential: from MinRounds rounds on it looks at the interval
// (after every round up to 20, then each time the rounds have grown by a
// tenth) and stops as soon as the interval lies entirely above the gate's
// limit (FAIL) or entirely at or below it (pass); when its share of the
// time runs out first the verdict is undecided. Looking again and again
// gives noise more chances to cross the limit, which is why each look is
// at 99% rather than 95%, and why the looks thin out as rounds grow.
// Without a latency gate it stops once the interval is within
// ±remeasurePrecision of its median.

// Confidence is the confidence of every interval a remeasure
// looks at.
const Confidence = 0.99

// MinRounds is the fewest rounds a remeasure decides on: at 99% the sign
// test has an interval from 8 rounds, then [min, max]; 10 give every
// artifact at least 60 runs (20 for slow ones).
const MinRounds = 10

// DefaultTime is what a remeasure takes at most in total, over
// every artifact and batch size.
const DefaultTime = 60 * time.Second

const (
	remeasurePerTurn = 3
	remeasureSlowRun = 100 * time.Millisecond // runs this long take turns of one run
	// remeasureMinTurn is the shortest turn: a model that runs in tens
	// of microseconds takes turns of as many runs as fill it (at most
	// remeasureMaxPerTurn), so that a turn is not one moment of the
	// machine (a clock step, the other session's thread pool still
	// spinning) but an average over several.
	remeasureMinTurn    = 5 * time.Millisecond
	remeasureMaxPerTurn = 1000
	// remeasureMinSpan is how long the rounds must have run before a look
	// decides (or a fifth of the batch size's share, when that is less):
	// rounds a few milliseconds apart share the machine's state, and ten
	// of them within one such state are not ten independent samples
	// (measured: two identical MNIST CNN deploys at 2 threads, decided in
	// 10 rounds within a millisecond, failed a 10% gate at +26%).
	remeasureMinSpan   = time.Second
	remeasurePrecision = 0.02 // without a gate: rounds go on until the interval is within ±2%
	// remeasureWarmup bounds the warm-ups: bench.DefaultWarmup runs of
	// each session, or fewer when they would take more than a
	// remeasureWarmup-th of the batch size's time (at least one run).
	remeasureWarmup = 10
)

// Options say which build folders to time again, for how long,
// and what an undecided gate means.
type Options struct {
	// Old and New are the build folders (or their report.json files).
	Old, New string
	// Time is the whole remeasure's limit (0: DefaultTime). It is
	// shared out as it goes: each artifact and batch size gets what is
	// left over the number left, so time a quick verdict saves goes to
	// those after it.
	Time time.Duration
	// UndecidedFails makes a latency gate that is undecided when its time
	// runs out fail; by default it passes, with a warning.
	UndecidedFails bool
	ORTLib         string
	Progress       io.Writer // a line per artifact and batch size as it is timed (terminals)
}

// Compare is report.Compare with the latency gate judging a remeasure of
// both builds' artifacts (see above) instead of the reports' recorded
// runs. The reports' figures are still shown; the input model, which is
// not in the build folders, is not remeasured. It times p50 only.
func Compare(old, new *report.Report, g config.Gates, opts Options) (*report.Diff, error) {
	if g.Percentile != "" && g.Percentile != "p50" {
		return nil, fmt.Errorf("--remeasure times the median (p50) only, not %s", g.Percentile)
	}
	if opts.Time <= 0 {
		opts.Time = DefaultTime
	}
	undecided := "pass"
	if opts.UndecidedFails {
		undecided = "fail"
	}
	limit := 0.0
	if g.MaxLatencyRegression > 0 {
		limit = 1 + g.MaxLatencyRegression/100
	}
	settings := report.RemeasureSettings{Confidence: Confidence, MinRounds: MinRounds, TimeS: opts.Time.Seconds(), Undecided: undecided}
	return report.CompareTimed(old, new, g, settings, func(d *report.Diff) error { return timeAgain(d, opts, limit) })
}

// folder is one build folder as a remeasure reads it.
type folder struct {
	dir     string
	session ort.Options
	data    config.Config
	from    map[string]string // .ort artifact -> the model it was written from
}

// readFolder reads what a remeasure needs of a build folder (or of the
// one holding a report.json): its manifest (the session settings and the
// timing inputs the build used) and the model each .ort file was written
// from (its interface; details.artifacts of report.json).
func readFolder(path string) (*folder, error) {
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	}
	man, err := build.ReadManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file: --remeasure needs the build folders (manifest.json, report.json and the artifacts)", filepath.Join(dir, "manifest.json"))
	}
	if err != nil {
		return nil, err
	}
	f := &folder{dir: dir, session: build.Session(man.Options), data: man.Options, from: map[string]string{}}
	rp := filepath.Join(dir, "report.json")
	b, err := os.ReadFile(rp)
	if err != nil {
		return nil, err
	}
	var r struct {
		Details struct {
			Artifacts []build.Artifact `json:"artifacts"`
		} `json:"details"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", rp, err)
	}
	for _, a := range r.Details.Artifacts {
		if a.Kind == "ort-model" {
			f.from[a.Path] = a.From
		}
	}
	return f, nil
}

// timing is how artifact name of f is timed at batches: the .onnx itself,
// or an .ort file with the interface of the model it was written from.
func (f *folder) timing(name string, batches []int, ortLib string) (bench.Options, error) {
	// The two sessions take turns on the same cores: neither's threads
	// may spin into the other's turn.
	sess := f.session
	sess.NoSpinning = true
	o := bench.Options{Model: f.file(name), Data: "random", DataOpts: build.TimingData(f.data), Batches: batches,
		Session: sess, ORTLib: ortLib}
	if from, ok := f.from[name]; ok {
		if from == "" {
			return o, fmt.Errorf("%s: the report names no model it was written from (its inputs)", o.Model)
		}
		o.Model, o.RunModel = f.file(from), o.Model
	}
	for _, p := range []string{o.Model, o.RunModel} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return o, fmt.Errorf("%s: missing from the build folder (its report.json times it): %w", p, errors.Unwrap(err))
		}
	}
	return o, nil
}

func (f *folder) file(name string) string { return filepath.Join(f.dir, filepath.FromSlash(name)) }

func (f *folder) settings() report.SessionOptions {
	return report.SessionOptions{Level: f.session.Level.String(), Threads: f.session.IntraOpThreads}
}

// timeAgain times every artifact both reports time, at the batch sizes
// both timed it at, and records the results in d.Models.
func timeAgain(d *report.Diff, opts Options, limit float64) error {
	type pair struct {
		model   int
		batches []int
	}
	var pairs []pair
	items := 0
	for i, m := range d.Models {
		if m.Old == nil || m.New.Role != "artifact" || m.Old.Latency == nil || m.New.Latency == nil {
			continue
		}
		var bs []int
		for _, nb := range m.New.Latency.Batches {
			if m.Old.Latency.Batch(nb.Batch) != nil {
				bs = append(bs, nb.Batch)
			}
		}
		if len(bs) > 0 {
			pairs = append(pairs, pair{i, bs})
			items += len(bs)
		}
	}
	if len(pairs) == 0 {
		return errors.New("--remeasure: no artifact is timed in both reports")
	}
	old, err := readFolder(opts.Old)
	if err != nil {
		return err
	}
	new, err := readFolder(opts.New)
	if err != nil {
		return err
	}
	// share is the deadline of the next artifact and batch size: the time
	// left over the number left.
	end := time.Now().Add(opts.Time)
	share := func() time.Time {
		left := time.Until(end) / time.Duration(items)
		items--
		return time.Now().Add(left)
	}
	for _, p := range pairs {
		m := &d.Models[p.model]
		oo, err := old.timing(m.Name, p.batches, opts.ORTLib)
		if err != nil {
			return err
		}
		no, err := new.timing(m.Name, p.batches, opts.ORTLib)
		if err != nil {
			return err
		}
		rs, err := remeasurePair(oo, no, share, limit, opts.Progress, m.Name)
		if err != nil {
			return fmt.Errorf("remeasuring %s: %w", m.Name, err)
		}
		for i := range rs {
			rs[i].OldSession, rs[i].NewSession = old.settings(), new.settings()
		}
		m.Remeasured = rs
	}
	return nil
}

// remeasurePair opens both builds' artifact and times them against each
// other at each batch size, each until the deadline next gives it.
func remeasurePair(oldOpts, newOpts bench.Options, next func() time.Time, limit float64, progress io.Writer, name string) ([]report.Remeasured, error) {
	deadline := next() // the first batch size's time pays for the sessions too
	a, err := bench.Open(oldOpts)
	if err != nil {
		return nil, err
	}
	defer a.Session.Close()
	b, err := bench.Open(newOpts)
	if err != nil {
		return nil, err
	}
	defer b.Session.Close()
	var out []report.Remeasured
	for i, batch := range oldOpts.Batches {
		if i > 0 {
			deadline = next()
		}
		in := a.Batches[i]
		if why := sameInputs(in, b.Batches[i]); why != "" {
			return nil, fmt.Errorf("OLD and NEW take different inputs at batch %d (%s): a remeasure times both on the same ones", batch, why)
		}
		if progress != nil {
			fmt.Fprintf(progress, "remeasure %s b%d (%.0fs at most)\n", name, batch, time.Until(deadline).Seconds())
		}
		r, err := rounds([]*ort.Session{a.Session, b.Session}, in, deadline, limit)
		if err != nil {
			return nil, fmt.Errorf("at batch %d: %w", batch, err)
		}
		r.Batch = batch
		out = append(out, r)
	}
	return out, nil
}

// sameInputs says how two batches differ in names, types or shapes ("":
// they do not).
func sameInputs(a, b []*graph.Tensor) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d inputs, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].DType != b[i].DType || !slices.Equal(a[i].Dims, b[i].Dims) {
			return fmt.Sprintf("%s %v %v, then %s %v %v", a[i].Name, a[i].DType, a[i].Dims, b[i].Name, b[i].DType, b[i].Dims)
		}
	}
	return ""
}

// rounds warms up the two sessions (old, new) on in, then times them in
// rounds until the interval of their ratio decides against limit (or,
// without one, is narrow enough), or the deadline passes.
func rounds(sessions []*ort.Session, in []*graph.Tensor, deadline time.Time, limit float64) (report.Remeasured, error) {
	start := time.Now()
	// At least a nanosecond: a limit of 0 would mean none.
	warm := max(time.Until(deadline)/remeasureWarmup/time.Duration(len(sessions)), time.Nanosecond)
	var run time.Duration
	for _, s := range sessions {
		last, err := bench.WarmUp(s, in, bench.DefaultWarmup, warm)
		if err != nil {
			return report.Remeasured{}, fmt.Errorf("warm-up run: %w", err)
		}
		run = max(run, last)
	}
	perTurn := remeasurePerTurn
	switch {
	case run >= remeasureSlowRun:
		perTurn = 1
	case run > 0:
		perTurn = min(max(perTurn, int((remeasureMinTurn+run-1)/run)), remeasureMaxPerTurn)
	}
	span := min(remeasureMinSpan, time.Until(deadline)/5)
	timed := time.Now()
	seq := &sequential{limit: limit}
	runs, err := bench.Turns(sessions, in, perTurn, nil, func(turn int, runs [][]float64) bool {
		from := turn * perTurn
		if seq.add(latency.Median(runs[1][from:])/latency.Median(runs[0][from:]), time.Since(timed) >= span) {
			return false
		}
		return time.Now().Before(deadline)
	})
	if err != nil {
		return report.Remeasured{}, err
	}
	r := report.Remeasured{Rounds: len(seq.ratios)}
	r.Ratio, r.Verdict = seq.result()
	r.OldMs, r.NewMs = latency.Median(runs[0]), latency.Median(runs[1])
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// sequential is the stopping rule over the rounds' ratios NEW/OLD.
type sequential struct {
	limit  float64 // the gate's largest ratio; 0: none
	ratios []float64
	look   int // the round count of the next look (0: MinRounds)
}

// add records a round's ratio and says whether a look has decided; it
// looks only when may (the rounds span long enough).
func (s *sequential) add(ratio float64, may bool) bool {
	s.ratios = append(s.ratios, ratio)
	n := len(s.ratios)
	if !may || n < max(s.look, MinRounds) {
		return false
	}
	s.look = nextLook(n)
	_, v := decide(s.ratios, s.limit)
	return v != report.VerdictUndecided
}

// result is the ratio's interval over every round and the verdict:
// undecided before MinRounds, "" without a gate.
func (s *sequential) result() (report.Interval, string) {
	iv, v := decide(s.ratios, s.limit)
	switch {
	case s.limit == 0:
		v = "" // no gate: the interval says how precise the ratio is
	case len(s.ratios) < MinRounds:
		v = report.VerdictUndecided
	}
	return iv, v
}

// nextLook is when the rule looks again after a look at n rounds: after
// every round up to 20, then once the rounds have grown by a tenth, so
// that a long remeasure of a fast model looks about 30 times per tenfold
// more rounds, not at every one.
func nextLook(n int) int {
	if n < 20 {
		return n + 1
	}
	return n + n/10
}

// decide is the median of the rounds' ratios with its interval, and the
// verdict against limit: FAIL when the whole interval is above it, pass
// when it is all at or below it, else undecided. Without a limit (0) it
// is "" once the interval is within ±remeasurePrecision of the median,
// else undecided.
func decide(ratios []float64, limit float64) (report.Interval, string) {
	iv := report.Interval{Median: latency.Median(ratios)}
	lo, hi, ok := latency.MedianInterval(ratios, Confidence)
	if !ok {
		return iv, report.VerdictUndecided
	}
	iv.Low, iv.High = lo, hi
	switch {
	case limit == 0 && hi-lo <= 2*remeasurePrecision*iv.Median:
		return iv, ""
	case limit == 0:
		return iv, report.VerdictUndecided
	case lo > limit:
		return iv, report.VerdictFail
	case hi <= limit:
		return iv, report.VerdictPass
	}
	return iv, report.VerdictUndecided
}
