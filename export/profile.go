package export

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
)

// SweepOptions say which (threads, batch) grid to measure a model on.
type SweepOptions struct {
	Model    string        // path of the .onnx file
	Batches  []int         // default 1,2,4,8,16,32; only the static batch when the model has one
	Threads  []int         // intra-op thread counts; default 1 and runtime.NumCPU()
	Duration time.Duration // timed phase per point (default 1s)
	// Budget, when set, bounds the whole sweep, warm-ups and sessions
	// included: each thread count gets an equal part (what one leaves
	// goes to the next), and a point predicted not to fit its part is
	// skipped with the larger batches after it (SweepResult.Unswept). The
	// first point is always measured, so that there are profiles.
	Budget  time.Duration
	Session ort.Options // the zero value means ort.DefaultOptions(); IntraOpThreads is swept
	Inputs  data.Spec   // the input specification (--shape etc.); the batch axis follows the sweep
	ORTLib  string      // --ort-lib
}

// SweepPoint is the warm measurement of one (threads, batch) pair. Its
// p99 is reported only when its window held the runs a p99 needs
// (latency.Percentiles: 100); else P99Ms is 0 and P99Unreported says why
// (a window of 40 runs at batch 32 would call its slowest run the p99).
type SweepPoint struct {
	Threads       int     `json:"threads"`
	Batch         int     `json:"batch"`
	Runs          int     `json:"runs"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P99Unreported bool    `json:"p99_unreported,omitempty"`
	Throughput    float64 `json:"throughput_samples_per_s"`
}

// SweepResult is every point of a sweep, ordered by threads, then batch.
type SweepResult struct {
	Model      string `json:"model"`
	ORTVersion string `json:"ort_version"`
	Level      string `json:"ort_level"`
	// StaticBatch is the model's fixed dim 0 (e.g. 1), 0 when it can batch.
	StaticBatch int          `json:"static_batch"`
	Points      []SweepPoint `json:"points"`
	// Unswept are the points the budget left out ("1 thread: batch 16,
	// 32"); the profiles chosen from a partial sweep say so.
	Unswept       []string `json:"unswept,omitempty"`
	BudgetSeconds float64  `json:"budget_seconds,omitempty"`
	// Seconds is what the sweep took, warm-ups and sessions included.
	Seconds float64 `json:"seconds"`
}

// ShortWindowRuns is where a sweep point's window ends, within a budget,
// when at its pace the window could not hold the runs a p99 needs
// (bench.Options.ShortRuns): at batch 32 a model of 20 ms a run then
// costs 0.4 s instead of the whole 1 s window, for the same figures.
const ShortWindowRuns = 20

// DefaultSweepBatches are the batch sizes swept when none are given.
var DefaultSweepBatches = []int{1, 2, 4, 8, 16, 32}

// Sweep measures opts.Model on random inputs with bench.Run once per
// thread count, over all batch sizes.
func Sweep(opts SweepOptions) (*SweepResult, error) {
	m, err := graph.LoadFile(opts.Model)
	if err != nil {
		return nil, err
	}
	static, err := staticBatch(m, opts.Inputs)
	m.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Model, err)
	}
	batches := opts.Batches
	switch {
	case static > 0:
		batches = []int{static}
	case len(batches) == 0:
		batches = DefaultSweepBatches
	}
	threads := SweepThreads(opts.Threads)
	batches = slices.Compact(slices.Sorted(slices.Values(batches)))
	if threads[0] < 1 || batches[0] < 1 {
		return nil, fmt.Errorf("%s: thread counts and batch sizes must be at least 1 (threads %v, batches %v)", opts.Model, threads, batches)
	}
	session := opts.Session
	if session == (ort.Options{}) {
		session = ort.DefaultOptions()
	}
	if opts.Duration <= 0 {
		opts.Duration = time.Second
	}

	res := &SweepResult{Model: opts.Model, Level: session.Level.String(), StaticBatch: static, BudgetSeconds: opts.Budget.Seconds()}
	start := time.Now()
	var last *bench.Result
	for i, t := range threads {
		session.IntraOpThreads = t
		bo := bench.Options{Model: opts.Model, Data: "random",
			DataOpts: data.Options{High: 1, Spec: opts.Inputs}, Batches: batches,
			Session: session, Duration: opts.Duration, ORTLib: opts.ORTLib}
		if opts.Budget > 0 {
			// Within a budget a point's warm-up takes about its window at
			// most: 10 runs of a slow model at batch 32 cost more than the
			// window they prepare. A fast point's window ends once it has
			// enough runs for its p99.
			bo.WarmupDuration = opts.Duration
			bo.MaxIterations = bench.EnoughRuns
			// A point too slow for a p99 in its window reports none: its
			// median and throughput need no more than ShortWindowRuns.
			bo.ShortRuns = ShortWindowRuns
			bo.Deadline = start.Add(opts.Budget * time.Duration(i+1) / time.Duration(len(threads)))
			// A thread count after the first starts only when its session
			// and first point, predicted from the last one's, fit.
			if last != nil && len(last.Batches) > 0 {
				b0 := last.Batches[0]
				run := time.Duration(b0.Latency.P50 * float64(time.Millisecond))
				need := time.Duration((last.ColdStart.SessionCreateMs+last.ColdStart.FirstRunMs)*float64(time.Millisecond)) + bench.PredictedCost(withRunDefaults(bo), run)
				if time.Now().Add(need).After(bo.Deadline) {
					res.Unswept = append(res.Unswept, fmt.Sprintf("%s: batch %s", threadsText(t), intList(batches)))
					continue
				}
			}
		}
		r, err := bench.Run(bo)
		if err != nil {
			return nil, fmt.Errorf("sweep at %d threads: %w", t, err)
		}
		last = r
		if len(r.Unmeasured) > 0 {
			res.Unswept = append(res.Unswept, fmt.Sprintf("%s: batch %s", threadsText(t), intList(r.Unmeasured)))
		}
		res.ORTVersion = r.ORTVersion
		for _, b := range r.Batches {
			l := b.Latency
			l.Drop(l.N)
			res.Points = append(res.Points, SweepPoint{Threads: t, Batch: b.Batch, Runs: l.N,
				P50Ms: l.P50, P99Ms: l.P99, P99Unreported: slices.Contains(l.Unreported, "p99"), Throughput: b.Throughput})
		}
	}
	res.Seconds = math.Round(time.Since(start).Seconds()*100) / 100
	return res, nil
}

// withRunDefaults fills what bench.Run defaults (its warm-ups), so that a
// prediction counts them.
func withRunDefaults(o bench.Options) bench.Options {
	if o.Warmup <= 0 {
		o.Warmup = bench.DefaultWarmup
	}
	return o
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// staticBatch returns the batch size the model fixes on its inputs' batch
// axes, or 0 when it can batch.
func staticBatch(m *graph.Model, spec data.Spec) (int, error) {
	ins := data.GraphInputs(m.Graph)
	if len(ins) == 0 {
		return 0, errors.New("the model has no inputs to batch")
	}
	return data.StaticBatch(ins, spec), nil
}

func dimText(d int64) string {
	if d <= 0 {
		return "dynamic"
	}
	return fmt.Sprint(d)
}

// Profile is one deployment setting chosen from a sweep, with its measured
// figures and why it was chosen (P99Unreported as in SweepPoint).
type Profile struct {
	Name          string  `json:"name"`
	Batch         int     `json:"batch"`
	Threads       int     `json:"threads"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P99Unreported bool    `json:"p99_unreported,omitempty"`
	Throughput    float64 `json:"throughput_samples_per_s"`
	Reason        string  `json:"reason"`
}

// Profile names.
const (
	LowLatency     = "low-latency"
	HighThroughput = "high-throughput"
)

// noise is the relative difference under which two measurements count as
// equal: then fewer threads (and smaller batches) win, since they cost
// less and leave cores to other instances.
const noise = 0.05

// ChooseProfiles picks, from a sweep, the low-latency profile (the smallest
// batch, the thread count with the lowest p50, fewer threads when within
// 5%) and the high-throughput profile (the best throughput whose p99 is
// within p99BudgetMs; 0 means no budget; within 5% of the best, the
// smaller batch and fewer threads). When no point meets the budget the
// high-throughput profile falls back to the low-latency one and its Reason
// says so.
func ChooseProfiles(s *SweepResult, p99BudgetMs float64) (lowLatency, highThroughput Profile, err error) {
	if s == nil || len(s.Points) == 0 {
		return Profile{}, Profile{}, errors.New("choosing profiles: the sweep has no points")
	}
	if p99BudgetMs < 0 {
		return Profile{}, Profile{}, fmt.Errorf("choosing profiles: the p99 budget %g ms is negative", p99BudgetMs)
	}
	// Profiles chosen from a partial sweep say so (and what it left out).
	defer func() {
		if len(s.Unswept) > 0 {
			partial := fmt.Sprintf("; from a partial sweep: the %gs budget left out %s", s.BudgetSeconds, strings.Join(s.Unswept, "; "))
			lowLatency.Reason += partial
			highThroughput.Reason += partial
		}
	}()
	points := slices.Clone(s.Points)
	slices.SortFunc(points, func(a, b SweepPoint) int {
		if a.Batch != b.Batch {
			return a.Batch - b.Batch
		}
		return a.Threads - b.Threads
	})

	smallest := points[0].Batch
	var first []SweepPoint
	for _, p := range points {
		if p.Batch == smallest {
			first = append(first, p)
		}
	}
	fastest := slices.MinFunc(first, func(a, b SweepPoint) int { return cmp.Compare(a.P50Ms, b.P50Ms) })
	// first is ordered by threads: the first point within noise has the fewest.
	low := firstWhere(first, func(p SweepPoint) bool { return p.P50Ms <= fastest.P50Ms*(1+noise) })
	lowLatency = profileOf(LowLatency, low)
	lowLatency.Reason = fmt.Sprintf("batch %d, the lowest p50 is %.3f ms at %s", smallest, fastest.P50Ms, threadsText(fastest.Threads))
	if low != fastest {
		lowLatency.Reason += fmt.Sprintf("; %s is within 5%% (%.3f ms) and costs fewer cores", threadsText(low.Threads), low.P50Ms)
	}

	// A point meets a p99 budget only when its p99 was measured: one
	// whose window was too short for a p99 cannot be shown to.
	var fit, measured []SweepPoint
	unjudged := 0
	for _, p := range points {
		switch {
		case p99BudgetMs == 0:
			fit = append(fit, p)
		case p.P99Unreported:
			unjudged++
		default:
			measured = append(measured, p)
			if p.P99Ms <= p99BudgetMs {
				fit = append(fit, p)
			}
		}
	}
	unjudgedNote := ""
	if unjudged > 0 {
		unjudgedNote = fmt.Sprintf("; %d point(s) left out of the p99 budget: their windows held fewer runs than a p99 needs (%d; a longer latency.duration gives them)", unjudged, latency.MinRuns("p99"))
	}
	if len(fit) == 0 {
		highThroughput = lowLatency
		highThroughput.Name = HighThroughput
		if len(measured) == 0 {
			highThroughput.Reason = fmt.Sprintf("no point has a p99 to hold to the budget of %g ms: falling back to low-latency%s", p99BudgetMs, unjudgedNote)
			return lowLatency, highThroughput, nil
		}
		best := slices.MinFunc(measured, func(a, b SweepPoint) int { return cmp.Compare(a.P99Ms, b.P99Ms) })
		highThroughput.Reason = fmt.Sprintf("no point meets the p99 budget of %g ms (the lowest p99 is %.3f ms at batch %d, %s): falling back to low-latency%s",
			p99BudgetMs, best.P99Ms, best.Batch, threadsText(best.Threads), unjudgedNote)
		return lowLatency, highThroughput, nil
	}
	top := slices.MaxFunc(fit, func(a, b SweepPoint) int { return cmp.Compare(a.Throughput, b.Throughput) })
	// fit is ordered by batch, then threads: the first point within noise
	// is the smallest batch with the fewest threads.
	high := firstWhere(fit, func(p SweepPoint) bool { return p.Throughput >= top.Throughput*(1-noise) })
	highThroughput = profileOf(HighThroughput, high)
	budget := "no p99 budget"
	if p99BudgetMs > 0 {
		budget = fmt.Sprintf("p99 within %g ms", p99BudgetMs)
	}
	highThroughput.Reason = fmt.Sprintf("the best throughput with %s is %.0f samples/s at batch %d, %s",
		budget, top.Throughput, top.Batch, threadsText(top.Threads))
	if high != top {
		highThroughput.Reason += fmt.Sprintf("; batch %d, %s is within 5%% (%.0f samples/s) and costs less", high.Batch, threadsText(high.Threads), high.Throughput)
	}
	highThroughput.Reason += unjudgedNote
	return lowLatency, highThroughput, nil
}

func profileOf(name string, p SweepPoint) Profile {
	return Profile{Name: name, Batch: p.Batch, Threads: p.Threads, P50Ms: p.P50Ms, P99Ms: p.P99Ms, P99Unreported: p.P99Unreported, Throughput: p.Throughput}
}

// firstWhere returns the first point that satisfies ok; callers know one does.
func firstWhere(ps []SweepPoint, ok func(SweepPoint) bool) SweepPoint {
	return ps[slices.IndexFunc(ps, ok)]
}

func threadsText(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// SweepThreads are the intra-op thread counts a sweep tries: threads,
// sorted and without repeats, or by default 1 and every core.
func SweepThreads(threads []int) []int {
	if len(threads) == 0 {
		threads = []int{1, runtime.NumCPU()}
	}
	return slices.Compact(slices.Sorted(slices.Values(threads)))
}
