// Package bench measures a model's latency and throughput in ONNX Runtime:
// cold start, warm latency percentiles and throughput per batch size,
// optionally with parallel requests, next to the cost of the harness itself.
package bench

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
)

// Options say what to measure and how long.
type Options struct {
	Model string
	// RunModel, when set, is the file the session runs (an .ort model ORT
	// wrote from Model, which optc cannot parse); the inputs still come
	// from Model.
	RunModel string
	// InMemory, when set, is the model serialized in memory (Model is then
	// only its label).
	InMemory graph.Serialized
	Data     string // a data spec for data.Open; "random" for synthetic inputs
	DataOpts data.Options
	Batches  []int // batch sizes to sweep (default 1)
	Session  ort.Options
	ORTLib   string // --ort-lib
	// Iterations per batch size; when 0, run for Duration (default 2s).
	Iterations int
	Duration   time.Duration
	// MinIterations, with Duration, is the fewest timed runs per batch
	// size however long they take: a window shorter than one run of a
	// slow model would otherwise time it once.
	MinIterations int
	// MaxIterations, with Duration, ends a window early once it has that
	// many timed runs (EnoughRuns): a 1 ms model has a stable median and a
	// p99 long before a second is over.
	MaxIterations int
	// ShortRuns, with Duration, ends a window once it has that many timed
	// runs when, at the pace of those runs, the window could not reach the
	// runs a p99 needs (latency.Percentiles): its p99 is not reported then,
	// and a median needs fewer. 0: windows run their Duration.
	ShortRuns int
	Warmup    int // runs before timing (default DefaultWarmup)
	// WarmupDuration, when set, ends the warm-up once it has taken that
	// long (after at least one run): ten warm-up runs of a model that
	// takes a second a run cost more than the window they prepare. The
	// first run after a session is made is the costly one.
	WarmupDuration time.Duration
	Concurrency    int // parallel requests sharing one session (default 1)
	// Deadline, when set, bounds the batch sizes measured after the first
	// (which is, so that there is a figure): one whose predicted cost (its
	// warm-ups and timed window, from the last measured run per sample
	// scaled to its batch) would end past it is not measured, nor any
	// after it (Result.Unmeasured lists them).
	Deadline time.Time
	Progress io.Writer
}

// DefaultWarmup is the warm-up runs per batch size when Options.Warmup is 0.
const DefaultWarmup = 10

// EnoughRuns is where a timed window may end early (Options.MaxIterations,
// the placement search's interleaved turns): 200 runs put two runs above
// the p99 (Percentiles needs 100), and their median moves less than the
// noise between windows.
const EnoughRuns = 200

// Result is what `optc bench` reports; docs/bench.md describes the JSON.
type Result struct {
	Model          string          `json:"model"`
	ORTVersion     string          `json:"ort_version"`
	Level          string          `json:"ort_level"`
	IntraOpThreads int             `json:"intra_op_threads"` // 0: ORT's default
	Concurrency    int             `json:"concurrency"`
	Data           string          `json:"data"`
	ColdStart      ColdStart       `json:"cold_start"`
	Harness        latency.Latency `json:"harness_floor"`
	Batches        []BatchResult   `json:"batches"`
	// Unmeasured are the batch sizes Options.Deadline left out.
	Unmeasured []int `json:"unmeasured_batches,omitempty"`
	// Skipped names, one line each, the outputs not fetched: values the
	// ORT binding cannot carry (an optional, a sequence); ORT then skips
	// the nodes only they need, so the time is of the rest of the model.
	Skipped []string `json:"skipped_outputs,omitempty"`
}

// ColdStart is the time to the first result, in milliseconds.
type ColdStart struct {
	LibraryInitMs   float64 `json:"library_init_ms"` // 0 when the library was already loaded
	SessionCreateMs float64 `json:"session_create_ms"`
	FirstRunMs      float64 `json:"first_run_ms"`
	TotalMs         float64 `json:"total_ms"`
}

// BatchResult is the warm measurement at one batch size.
type BatchResult struct {
	Batch      int             `json:"batch"`
	Latency    latency.Latency `json:"latency"`
	Throughput float64         `json:"throughput_samples_per_s"`
	WallS      float64         `json:"wall_s"`
	// Times are the timed runs themselves, for a caller that pools several
	// windows' runs (optc build's tail percentiles); not written out.
	Times []time.Duration `json:"-"`
}

// load reads the model measured: from memory, or its file.
func load(opts Options) (*graph.Model, error) {
	if opts.InMemory.Bytes != nil {
		return opts.InMemory.Parse()
	}
	return graph.LoadValid(opts.Model)
}

// Opened is a model ready to time, as Run times it: its session and the
// first batch of the data at each batch size.
type Opened struct {
	Session *ort.Session
	Batches [][]*graph.Tensor // one per Options.Batches
	Skipped []string          // outputs not fetched (Result.Skipped)
	// LibraryInit is what loading the ORT library took (0 when it was
	// loaded already); SessionCreate what making the session took, the
	// crash probe before it left out.
	LibraryInit, SessionCreate time.Duration
}

// Open loads opts.Model, reads the first batch of opts.Data at each of
// opts.Batches (default 1), loads the ORT library when needed
// (opts.ORTLib) and makes the session Run times: of opts.RunModel or
// opts.InMemory when set, without the outputs the binding cannot carry,
// after the crash probe. The caller closes the session.
func Open(opts Options) (*Opened, error) {
	if len(opts.Batches) == 0 {
		opts.Batches = []int{1}
	}
	m, err := load(opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	inputs := data.GraphInputs(m.Graph)
	o := &Opened{Batches: make([][]*graph.Tensor, len(opts.Batches))}
	for i, b := range opts.Batches {
		if o.Batches[i], err = firstBatch(opts, inputs, b); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if _, err := ort.Version(); err != nil {
		if _, err := ort.Init(opts.ORTLib); err != nil {
			return nil, err
		}
		o.LibraryInit = time.Since(start)
	}
	ins, outs := ort.Interface(m)
	src := ort.Source{Path: opts.Model, Inputs: ins, Outputs: outs}
	switch {
	case opts.RunModel != "":
		src.Path = opts.RunModel
	case opts.InMemory.Bytes != nil:
		src = ort.SourceFrom(opts.InMemory, ins, outs)
	}
	if src.Outputs, o.Skipped = ort.SplitOutputs(src.Outputs); len(src.Outputs) == 0 {
		return nil, fmt.Errorf("%s: no output to time: %s", opts.Model, strings.Join(o.Skipped, "; "))
	}
	// The crash probe opens the model once more in a child process; that
	// is not part of the cold start.
	if err := ort.Probe(src, opts.Session); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Model, err)
	}
	t := time.Now()
	if o.Session, err = ort.NewSession(src, opts.Session); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Model, err)
	}
	o.SessionCreate = time.Since(t)
	return o, nil
}

// Run measures opts.Model.
func Run(opts Options) (*Result, error) {
	if opts.Data == "" {
		return nil, errors.New("no input data: give --data PATH, or --data random for synthetic inputs")
	}
	if len(opts.Batches) == 0 {
		opts.Batches = []int{1}
	}
	if opts.Iterations <= 0 && opts.Duration <= 0 {
		opts.Duration = 2 * time.Second
	}
	if opts.Warmup <= 0 {
		opts.Warmup = DefaultWarmup
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	o, err := Open(opts)
	if err != nil {
		return nil, err
	}
	sess, batches := o.Session, o.Batches
	defer sess.Close()
	res := &Result{Model: opts.Model, Level: opts.Session.Level.String(), IntraOpThreads: opts.Session.IntraOpThreads,
		Concurrency: opts.Concurrency, Data: opts.Data, Skipped: o.Skipped}
	res.ORTVersion, _ = ort.Version()
	res.ColdStart.LibraryInitMs, res.ColdStart.SessionCreateMs = ms(o.LibraryInit), ms(o.SessionCreate)
	t := time.Now()
	if _, err := sess.Run(batches[0]); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Model, err)
	}
	res.ColdStart.FirstRunMs = ms(time.Since(t))
	res.ColdStart.TotalMs = res.ColdStart.LibraryInitMs + res.ColdStart.SessionCreateMs + res.ColdStart.FirstRunMs

	if res.Harness, err = harnessFloor(opts); err != nil {
		return nil, err
	}
	// perSample is the last measured run's cost per sample.
	var perSample time.Duration
	for i, b := range opts.Batches {
		if i > 0 && !opts.Deadline.IsZero() && time.Now().Add(PredictedCost(opts, perSample*time.Duration(b))).After(opts.Deadline) {
			res.Unmeasured = opts.Batches[i:]
			break
		}
		br, err := measure(sess, batches[i], b, opts)
		if err != nil {
			return nil, fmt.Errorf("%s at batch %d: %w", opts.Model, b, err)
		}
		res.Batches = append(res.Batches, br)
		perSample = time.Duration(br.Latency.P50*float64(time.Millisecond)) / time.Duration(b)
	}
	return res, nil
}

// PredictedCost is what measure takes at one batch size whose run takes
// run: the warm-ups and the timed phase (its window, or its least runs).
func PredictedCost(opts Options, run time.Duration) time.Duration {
	timed := time.Duration(opts.Iterations) * run
	if opts.Iterations <= 0 {
		window := opts.Duration
		if opts.MaxIterations > 0 {
			window = min(window, time.Duration(opts.MaxIterations)*run)
		}
		if opts.ShortRuns > 0 && run > 0 && opts.Duration < time.Duration(latency.MinRuns("p99"))*run {
			window = min(window, time.Duration(opts.ShortRuns)*run)
		}
		timed = max(window, time.Duration(opts.MinIterations)*run)
	}
	return warmupCost(opts, run) + timed
}

// warmupCost is what the warm-up takes when a run takes run: Warmup runs,
// or as many as WarmupDuration allows, the run that crosses it included.
func warmupCost(opts Options, run time.Duration) time.Duration {
	all := time.Duration(opts.Warmup) * run
	if opts.WarmupDuration <= 0 || all <= opts.WarmupDuration {
		return all
	}
	return min(all, max(run, opts.WarmupDuration+run))
}

// InputBatch is the first batch of b samples of opts.Data for inputs, as
// Run feeds it: for callers that time models their own way.
func InputBatch(opts Options, inputs []data.Input, b int) ([]*graph.Tensor, error) {
	return firstBatch(opts, inputs, b)
}

// firstBatch reads one batch of b samples from the data.
func firstBatch(opts Options, inputs []data.Input, b int) ([]*graph.Tensor, error) {
	dopts := opts.DataOpts
	dopts.Batch, dopts.StrictBatch = b, true // a batch the model cannot take is an error, not a mislabelled row
	// A --shape never pins a dynamic batch axis: it follows the sweep.
	if opts.Data == "random" && dopts.Samples == 0 {
		dopts.Samples = b
	}
	src, err := data.Open(opts.Data, inputs, dopts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	batch, err := src.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no samples", opts.Data)
		}
		return nil, err
	}
	if batch.Samples != b {
		return nil, fmt.Errorf("%s: batch size %d needs %d samples, the data gives %d", opts.Data, b, b, batch.Samples)
	}
	return batch.Tensors, nil
}

// noTail says a window of d may end after done runs that took elapsed:
// it has short (> 0) runs, and at their pace it would end with fewer than
// a p99 needs, so that it reports no p99 however long it runs.
func noTail(done, short int, elapsed, d time.Duration) bool {
	if short <= 0 || done < short || elapsed <= 0 {
		return false
	}
	return float64(done)*float64(d)/float64(elapsed) < float64(latency.MinRuns("p99"))
}

// WarmUp runs sess on inputs runs times, untimed, or until limit has
// passed (after at least one run; 0: no limit), and returns what its last
// run took.
func WarmUp(sess *ort.Session, inputs []*graph.Tensor, runs int, limit time.Duration) (time.Duration, error) {
	var last time.Duration
	start := time.Now()
	for range runs {
		t := time.Now()
		if _, err := sess.Run(inputs); err != nil {
			return last, err
		}
		last = time.Since(t)
		if limit > 0 && time.Since(start) >= limit {
			break
		}
	}
	return last, nil
}

// measure warms up, then times runs of one batch, from Concurrency
// goroutines sharing the session (ORT sessions are safe for concurrent Run).
func measure(sess *ort.Session, inputs []*graph.Tensor, batch int, opts Options) (BatchResult, error) {
	if _, err := WarmUp(sess, inputs, opts.Warmup, opts.WarmupDuration); err != nil {
		return BatchResult{}, err
	}
	var (
		mu     sync.Mutex
		times  []time.Duration
		runErr error
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(opts.Duration)
	per := opts.Iterations / opts.Concurrency
	start := time.Now()
	for w := range opts.Concurrency {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for i := 0; ; i++ {
				if opts.Iterations > 0 {
					extra := 0
					if worker < opts.Iterations%opts.Concurrency {
						extra = 1
					}
					if i >= per+extra {
						return
					}
				} else if done := i * opts.Concurrency; done >= opts.MinIterations &&
					(time.Now().After(deadline) || (opts.MaxIterations > 0 && done >= opts.MaxIterations) ||
						noTail(done, opts.ShortRuns, time.Since(start), opts.Duration)) {
					return
				}
				t := time.Now()
				_, err := sess.Run(inputs)
				d := time.Since(t)
				mu.Lock()
				if err != nil && runErr == nil {
					runErr = err
				}
				times = append(times, d)
				n := len(times)
				mu.Unlock()
				if err != nil {
					return
				}
				if opts.Progress != nil && worker == 0 && n%10 == 0 {
					fmt.Fprintf(opts.Progress, "\rbatch %d: %d runs", batch, n)
				}
			}
		}(w)
	}
	wg.Wait()
	wall := time.Since(start)
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "\r%30s\r", "")
	}
	if runErr != nil {
		return BatchResult{}, runErr
	}
	return BatchResult{
		Batch: batch, Latency: latency.Summarize(times), WallS: wall.Seconds(),
		Throughput: float64(len(times)*batch) / wall.Seconds(), Times: times,
	}, nil
}

// harnessFloor times the same loop on a model that does nothing (Identity
// on one float), so users see what the measurement itself costs. Nothing
// is subtracted from the model's figures.
func harnessFloor(opts Options) (latency.Latency, error) {
	g := graph.NewGraph("identity")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1))
	y.Type = graph.TensorType(graph.Float, graph.StaticShape(1))
	g.Inputs, g.Outputs = []*graph.Value{x}, []*graph.Value{y}
	if _, err := g.AddNode("Identity", []*graph.Value{x}, []*graph.Value{y}); err != nil {
		return latency.Latency{}, err
	}
	m := &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g, ProducerName: "optc"}
	b, err := graph.Marshal(m)
	if err != nil {
		return latency.Latency{}, err
	}
	ins, outs := ort.Interface(m)
	sess, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, opts.Session)
	if err != nil {
		return latency.Latency{}, fmt.Errorf("harness model: %w", err)
	}
	defer sess.Close()
	in, _ := graph.NewFloat32Tensor("x", []int64{1}, []float32{1})
	floorOpts := opts
	floorOpts.Iterations, floorOpts.Duration, floorOpts.Concurrency, floorOpts.Progress = 500, 0, 1, nil
	br, err := measure(sess, []*graph.Tensor{in}, 1, floorOpts)
	return br.Latency, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
