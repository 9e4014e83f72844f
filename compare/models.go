package compare

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
	"github.com/optc-dev/optc/task/detect"
)

// Options say which models to compare on which data, and how to judge.
type Options struct {
	ModelA, ModelB string
	// AInMemory and BInMemory, when set, are the models serialized in
	// memory (ModelA and ModelB are then only labels): a model can be
	// checked before it is written.
	AInMemory, BInMemory graph.Serialized
	// BRun, when set, is the file B's session runs (an .ort model ORT
	// wrote from ModelB, which optc cannot parse); B's interface still
	// comes from ModelB.
	BRun     string
	Data     string
	DataOpts data.Options
	// Labels is a .npy of int64 class ids, one per sample, scored against
	// LabelsOutput (default: the first classifier-like output).
	Labels       string
	LabelsOutput string
	// Task TaskLM scores a causal language model on its token ids: the
	// perplexity of A and B and their next-token agreement (Result.LM),
	// from the output named Logits (default: the only float output of
	// rank 3).
	Task   Task
	Logits string
	// Scorer, when set, makes the task plug-in that scores one output
	// against ground truth of its own (Result.Task); Labels is then empty.
	Scorer task.Factory
	// Atol and Rtol per output name; the "" key is the default for all.
	Atol, Rtol map[string]float64
	Check      Stat
	Session    ort.Options
	// Workers is how many sessions of each model run batches side by
	// side. 0: on the CPU with Session.IntraOpThreads 0, one
	// single-threaded session per core (at most MaxWorkers); else one.
	Workers int
	ORTLib  string
	// Reference, when set, keeps A's outputs for the next comparison
	// against the same A on the same data (A then does not run again).
	Reference *Reference
	// Stop, when set, is asked before each batch after the first with the
	// samples compared so far; true ends the comparison there, on a batch
	// boundary (Result.Stopped): a build's budget, or the replay of the
	// build it stopped.
	Stop func(samples int64) bool
}

// Result is what `optc compare` reports; docs/compare.md describes the JSON.
type Result struct {
	ModelA   string                `json:"model_a"`
	ModelB   string                `json:"model_b"`
	Data     string                `json:"data"`
	Samples  int64                 `json:"samples"`
	Batches  int                   `json:"batches"`
	Outputs  []*OutputStats        `json:"outputs"`
	Accuracy *schema.LabelAccuracy `json:"accuracy,omitempty"`
	LM       *LM                   `json:"lm,omitempty"`
	// Task is a task plug-in's figures (Options.Scorer): sequence
	// accuracy, hmean, mIoU.
	Task *task.Figure `json:"task,omitempty"`
	Pass bool         `json:"pass"`
	// Stopped: Options.Stop ended the comparison before the data did;
	// Samples are the ones compared.
	Stopped bool `json:"stopped,omitempty"`
	// Skipped says, one line each, which outputs were not compared
	// because optc cannot fetch them through the ORT binding (sequences,
	// maps, optionals, string tensors).
	Skipped []string `json:"skipped,omitempty"`
}

// NotExpressibleError is the outcome when the models cannot be compared
// at all through the ORT binding: an input it cannot feed, or no output
// it can fetch. It wraps ort.ErrNotExpressible.
type NotExpressibleError struct {
	Reasons []string // one line per value, e.g. `output "y" is a sequence: ...`
}

func (e *NotExpressibleError) Error() string {
	return "nothing to compare: " + strings.Join(e.Reasons, "; ")
}

func (e *NotExpressibleError) Unwrap() error { return ort.ErrNotExpressible }

// DefaultAtol and DefaultRtol are used when no tolerance is given: the
// tolerances onnxsim checks a simplified model with.
const (
	DefaultAtol = 1e-5
	DefaultRtol = 1e-4
)

// Models runs A and B on the same inputs and compares every output they
// share, batch by batch in constant memory.
func Models(opts Options) (*Result, error) {
	if opts.Check == "" {
		opts.Check = StatMax
	}
	if _, err := ort.Init(opts.ORTLib); err != nil {
		return nil, err
	}
	ma, err := load(opts.ModelA, opts.AInMemory)
	if err != nil {
		return nil, err
	}
	defer ma.Close()
	mb, err := load(opts.ModelB, opts.BInMemory)
	if err != nil {
		return nil, err
	}
	defer mb.Close()
	c, err := newComparison(opts, ma, mb)
	if err != nil {
		return nil, err
	}
	src, err := data.Open(opts.Data, data.GraphInputs(ma.Graph), opts.DataOpts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// The first batch sizes what the workers' sessions hold (see workers).
	batch, err := src.Next()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: no samples", opts.Data)
	}
	if err != nil {
		return nil, err
	}
	n, first, open, err := c.sessions(ma, mb, batch)
	if err != nil {
		return nil, err
	}
	defer first.close()
	if err := c.readLabels(); err != nil {
		return nil, err
	}
	run := newRunner(n, first, open, opts.ModelA, opts.ModelB)
	defer run.stop()
	if err := c.feed(run, n, src, batch); err != nil {
		return nil, err
	}
	return c.result()
}

// comparison is one run of Models: what it compares, and the statistics
// it gathers.
type comparison struct {
	opts        Options
	insA, outsA []ort.IO
	insB, outsB []ort.IO
	pairs       []outputPair
	sc          scorers
	replay      [][]*graph.Tensor // A's outputs kept from an earlier run (Options.Reference); nil: A runs
	// replayStopped: the run that recorded replay was stopped (Options.Stop),
	// so the comparison ends where the recording does.
	replayStopped bool
	rec           *recorder
	labels        []int64
	accs          []*Accumulator
	scorer        *scorer
	res           *Result
}

// newComparison pairs A's and B's interfaces: the same inputs, the
// outputs they share (the ones the binding cannot carry left out, with a
// note), the tolerances' names checked, the scorers picked.
func newComparison(opts Options, ma, mb *graph.Model) (*comparison, error) {
	if err := sameInputs(data.GraphInputs(ma.Graph), data.GraphInputs(mb.Graph)); err != nil {
		return nil, fmt.Errorf("%s and %s: %w", opts.ModelA, opts.ModelB, err)
	}
	c := &comparison{opts: opts}
	c.insA, c.outsA = ort.Interface(ma)
	c.insB, c.outsB = ort.Interface(mb)
	if err := feedable(c.insA); err != nil {
		return nil, err
	}
	var skipped, skippedB []string
	c.outsA, skipped = ort.SplitOutputs(c.outsA)
	c.outsB, skippedB = ort.SplitOutputs(c.outsB)
	for _, s := range skippedB {
		if !slices.Contains(skipped, s) {
			skipped = append(skipped, s)
		}
	}
	if len(c.outsA) == 0 || len(c.outsB) == 0 {
		return nil, &NotExpressibleError{Reasons: skipped}
	}
	var err error
	if c.pairs, err = pairOutputs(c.outsA, c.outsB); err != nil {
		return nil, fmt.Errorf("%s and %s: %w", opts.ModelA, opts.ModelB, err)
	}
	for _, t := range []struct {
		flag string
		tols map[string]float64
	}{{"--atol", opts.Atol}, {"--rtol", opts.Rtol}} {
		flag := t.flag
		for name := range t.tols {
			if name != "" && !slices.ContainsFunc(c.pairs, func(p outputPair) bool { return p.name == name }) {
				return nil, fmt.Errorf("%s names output %q, which the models do not share", flag, name)
			}
		}
	}
	if c.sc, err = pickScorers(opts, c.pairs, c.insA, c.outsA); err != nil {
		return nil, err
	}
	outNames := make([]string, len(c.outsA))
	for i, o := range c.outsA {
		outNames[i] = o.Name
	}
	refKey := referenceKey(opts, outNames)
	if c.replay, c.replayStopped = opts.Reference.lookup(refKey); c.replay == nil {
		c.rec = opts.Reference.record(refKey)
	}
	c.accs = make([]*Accumulator, len(c.pairs))
	for i, p := range c.pairs {
		c.accs[i] = NewAccumulator(p.name, tol(opts.Atol, p.name, DefaultAtol), tol(opts.Rtol, p.name, DefaultRtol), opts.Check)
	}
	for _, i := range c.sc.taskPairs {
		c.accs[i].JudgedByTask()
	}
	c.res = &Result{ModelA: opts.ModelA, ModelB: opts.ModelB, Data: opts.Data, Skipped: skipped}
	return c, nil
}

// feedable refuses inputs the binding cannot carry: they must never
// reach a run (fetching an empty optional crashes it), and without them
// there is nothing to compare.
func feedable(ins []ort.IO) error {
	var noFeed []string
	for _, in := range ins {
		if what := in.NotExpressible(); what != "" {
			noFeed = append(noFeed, fmt.Sprintf("input %q is %s: %s", in.Name, what, ort.ErrNotExpressible))
		}
	}
	if len(ins) == 0 {
		noFeed = append(noFeed, fmt.Sprintf("the model has no inputs: %s", ort.ErrNotExpressible))
	}
	if noFeed != nil {
		return &NotExpressibleError{Reasons: noFeed}
	}
	return nil
}

// sessions decides how many workers run the batches (within the memory
// a session pair needs at the first batch's size) and opens the first
// pair; open opens the others. A is not opened when its outputs are
// replayed. B is fed in A's input order.
func (c *comparison) sessions(ma, mb *graph.Model, batch *data.Batch) (int, pair, func() (pair, error), error) {
	opts := c.opts
	orderB := make([]ort.IO, len(c.insA))
	for i, in := range c.insA {
		orderB[i] = c.insB[slices.IndexFunc(c.insB, func(x ort.IO) bool { return x.Name == in.Name })]
	}
	srcB := source(opts.ModelB, opts.BInMemory, orderB, c.outsB)
	if opts.BRun != "" {
		srcB = ort.Source{Path: opts.BRun, Inputs: orderB, Outputs: c.outsB}
	}
	perWorker := int64(-1)
	if opts.Workers == 0 && opts.Session.IntraOpThreads == 0 {
		perWorker = sessionBytes(mb, batch.Tensors)
		if c.replay == nil && perWorker >= 0 {
			if a := sessionBytes(ma, batch.Tensors); a < 0 {
				perWorker = -1
			} else {
				perWorker += a
			}
		}
	}
	n, sess := workers(opts, perWorker)
	open := func() (p pair, err error) {
		if c.replay == nil {
			if p.a, err = ort.NewSession(source(opts.ModelA, opts.AInMemory, c.insA, c.outsA), sess); err != nil {
				return p, fmt.Errorf("%s: %w", opts.ModelA, err)
			}
		}
		if p.b, err = ort.NewSession(srcB, sess); err != nil {
			p.close()
			return p, fmt.Errorf("%s: %w", opts.ModelB, err)
		}
		return p, nil
	}
	first, err := open()
	if err != nil {
		return 0, pair{}, nil, err
	}
	return n, first, open, nil
}

// readLabels reads Options.Labels, whose class ids follow the samples in
// file order.
func (c *comparison) readLabels() error {
	opts := c.opts
	if (opts.Labels != "" || c.sc.task != nil && task.ReadsLabels(c.sc.task)) && opts.DataOpts.Shuffle {
		return fmt.Errorf("labels cannot follow samples drawn in a shuffled order")
	}
	if opts.Labels != "" {
		lt, err := data.ReadNpy(opts.Labels)
		if err != nil {
			return err
		}
		if c.labels, err = lt.Int64s(); err != nil {
			return fmt.Errorf("%s: labels must be integer class ids: %w", opts.Labels, err)
		}
	}
	c.scorer = newScorer(c.labels, opts.LabelsOutput)
	return nil
}

// feed gives the batches to n workers, first the one already read, and
// takes their outputs in batch order.
func (c *comparison) feed(run *runner, n int, src data.Source, batch *data.Batch) error {
	var pending []*job // given to the workers, not yet taken
	var givenSamples int64
	for given := 0; ; given++ {
		if given > 0 {
			if c.stopBefore(given, givenSamples) {
				break
			}
			var err error
			if batch, err = src.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
		}
		givenSamples += int64(batch.Samples)
		j := &job{batch: batch, done: make(chan struct{})}
		if c.replay != nil {
			if given >= len(c.replay) {
				return fmt.Errorf("internal: %s gave more batches than when %s ran on it", c.opts.Data, c.opts.ModelA)
			}
			j.ya = c.replay[given]
		}
		run.submit(j)
		if pending = append(pending, j); len(pending) == n {
			if err := c.take(pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
	}
	for _, j := range pending {
		if err := c.take(j); err != nil {
			return err
		}
	}
	if c.replay != nil && !c.res.Stopped && c.res.Batches != len(c.replay) {
		return fmt.Errorf("internal: %s gave fewer batches than when %s ran on it", c.opts.Data, c.opts.ModelA)
	}
	c.rec.done(c.res.Stopped)
	return nil
}

// stopBefore says whether the comparison ends before its batch number
// given, samples into the data: Options.Stop says so, or A's replayed
// outputs end there because the comparison that recorded them stopped.
func (c *comparison) stopBefore(given int, samples int64) bool {
	stop := c.opts.Stop != nil && c.opts.Stop(samples) ||
		c.replay != nil && c.replayStopped && given >= len(c.replay)
	if stop {
		c.res.Stopped = true
	}
	return stop
}

// take adds a batch's outputs to the statistics, in batch order.
func (c *comparison) take(j *job) error {
	<-j.done
	if j.err != nil {
		return j.err
	}
	if c.replay == nil {
		c.rec.add(j.ya)
	}
	ya, yb := j.ya, j.yb
	sc := c.sc
	if len(sc.taskPairs) > 0 {
		va, vb, err := taskValues(sc.taskPairs, c.pairs, ya, yb)
		if err != nil {
			return err
		}
		if err := sc.task.(task.Multi).AddAll(c.res.Samples, j.batch.Samples, va, vb); err != nil {
			return err
		}
	}
	for i, p := range c.pairs {
		if err := c.takeOutput(i, ya[p.a], yb[p.b], j.batch); err != nil {
			return err
		}
	}
	c.scorer.advance(int64(j.batch.Samples))
	c.res.Samples += int64(j.batch.Samples)
	c.res.Batches++
	return nil
}

// takeOutput adds pair i's outputs of a batch to its statistics and to
// the scorers that read it.
func (c *comparison) takeOutput(i int, a, b *graph.Tensor, batch *data.Batch) error {
	p, sc := c.pairs[i], c.sc
	if !slices.Equal(a.Dims, b.Dims) {
		if len(a.Dims) != len(b.Dims) {
			return fmt.Errorf("output %q: shape %v from A, %v from B", p.name, a.Dims, b.Dims)
		}
		// A dim that depends on the data (a detector's boxes after NMS)
		// differs: the models disagree on these samples, which is a
		// finding, not an error.
		c.accs[i].AddShapeMismatch(a.Dims, b.Dims, batch.Samples)
		return nil
	}
	fa, err := a.Float32s()
	if err != nil {
		return fmt.Errorf("output %q: %w", p.name, err)
	}
	fb, err := b.Float32s()
	if err != nil {
		return fmt.Errorf("output %q: %w", p.name, err)
	}
	if err := c.accs[i].AddSamples(fa, fb, a.Dims, batch.Samples); err != nil {
		return err
	}
	if err := c.scorer.add(p.name, fa, fb, a.Dims); err != nil {
		return fmt.Errorf("%s: %w", c.opts.Labels, err)
	}
	if i == sc.taskPair && len(sc.taskPairs) == 0 {
		if err := sc.task.Add(c.res.Samples, fa, fb, a.Dims); err != nil {
			return err
		}
	}
	if i == sc.lmPair {
		if err := sc.lm.Add(batch.Tensors[sc.lmIn], fa, fb, a.Dims); err != nil {
			return fmt.Errorf("%s: %w", c.opts.Data, err)
		}
	}
	return nil
}

// result is the verdict on every output and the figures of the scorers.
func (c *comparison) result() (*Result, error) {
	res, opts, sc := c.res, c.opts, c.sc
	res.Pass = true
	for _, acc := range c.accs {
		s := acc.Result()
		res.Outputs = append(res.Outputs, s)
		res.Pass = res.Pass && s.Pass
	}
	var err error
	if sc.lm != nil {
		if res.LM, err = sc.lm.Result(); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Data, err)
		}
	}
	if sc.task != nil {
		if res.Task, err = sc.task.Result(res.Samples, opts.DataOpts.Samples > 0 || res.Stopped); err != nil {
			return nil, err
		}
	}
	if opts.Labels != "" {
		if res.Accuracy, err = c.scorer.result(res.Samples, opts.DataOpts.Samples > 0 || res.Stopped); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Labels, err)
		}
	}
	return res, nil
}

// scorers are what scores a comparison beyond its per-output statistics:
// a task plug-in (one output, or a task.Multi's several) and the language
// model's scorer, with the pairs they read.
type scorers struct {
	task      task.Scorer
	taskPair  int   // the pair a one-output task scores; -1: none
	taskPairs []int // a task.Multi's pairs, in its order
	lm        *LMScorer
	lmIn      int // the token ids input
	lmPair    int
}

// pickScorers makes the task's scorer (opts.Scorer, or the detection task
// for a detector's outputs when no task is given) and the LM's, and finds
// the outputs they read.
func pickScorers(opts Options, pairs []outputPair, insA, outsA []ort.IO) (scorers, error) {
	sc := scorers{taskPair: -1, lmIn: -1, lmPair: -1}
	scorerOf := opts.Scorer
	if scorerOf == nil && opts.Task != TaskLM && opts.Labels == "" && detect.Looks(taskOutputs(pairs, outsA)) {
		// A detector's outputs after NMS: no elementwise comparison can
		// judge boxes whose number depends on the data, so they are
		// scored as detections, B's against A's.
		scorerOf = func() (task.Scorer, error) {
			o, err := detect.ParseOptions(nil)
			if err != nil {
				return nil, err
			}
			return detect.New(task.Spec{Name: detect.Name}, o)
		}
	}
	var err error
	if scorerOf != nil {
		if opts.Labels != "" {
			return sc, fmt.Errorf("%s: a task plug-in reads its own ground truth, not class labels", opts.Labels)
		}
		if sc.task, sc.taskPair, sc.taskPairs, err = pickTaskOutput(scorerOf, pairs, outsA); err != nil {
			return sc, err
		}
	}
	if opts.Task == TaskLM {
		if opts.Labels != "" {
			return sc, fmt.Errorf("%s: task lm scores the next token of the data, not labels", opts.Labels)
		}
		in, out, err := LMIO(insA, outsA, opts.Logits)
		if err != nil {
			return sc, fmt.Errorf("%s: %w", opts.ModelA, err)
		}
		if sc.lmPair = slices.IndexFunc(pairs, func(p outputPair) bool { return p.a == out }); sc.lmPair < 0 {
			return sc, fmt.Errorf("%s: task lm: the logits %q are not an output of %s", opts.ModelA, outsA[out].Name, opts.ModelB)
		}
		sc.lmIn = in
		sc.lm = NewLMScorer(insA[in].Name, outsA[out].Name)
	}
	return sc, nil
}

// pickTaskOutput makes the task's scorer and lets it pick the output it
// scores among those the models share: one (pair), or several for a
// task.Multi (pairs, in its order; pair is the first).
func pickTaskOutput(f task.Factory, pairs []outputPair, outsA []ort.IO) (ts task.Scorer, pair int, multi []int, err error) {
	if ts, err = f(); err != nil {
		return nil, -1, nil, err
	}
	outs := taskOutputs(pairs, outsA)
	index := func(name string) int {
		return slices.IndexFunc(pairs, func(p outputPair) bool { return p.name == name })
	}
	if m, ok := ts.(task.Multi); ok {
		names, err := m.PickAll(outs)
		if err != nil {
			return nil, -1, nil, err
		}
		for _, n := range names {
			multi = append(multi, index(n))
		}
		return ts, multi[0], multi, nil
	}
	name, err := ts.Pick(outs)
	if err != nil {
		return nil, -1, nil, err
	}
	return ts, index(name), nil, nil
}

// taskOutputs describes the outputs the models share, for a task to
// pick from.
func taskOutputs(pairs []outputPair, outsA []ort.IO) []task.Output {
	outs := make([]task.Output, len(pairs))
	for i, p := range pairs {
		o := outsA[p.a]
		outs[i] = task.Output{Name: p.name, Shape: o.Shape, Float: isFloat(o.DType)}
	}
	return outs
}

// taskValues are A's and B's values of a task.Multi's outputs, as
// float32 whatever their type (class ids included), with their own dims.
func taskValues(idx []int, pairs []outputPair, ya, yb []*graph.Tensor) (va, vb []task.Value, err error) {
	for _, i := range idx {
		p := pairs[i]
		for _, side := range []struct {
			t   *graph.Tensor
			out *[]task.Value
		}{{ya[p.a], &va}, {yb[p.b], &vb}} {
			f, err := side.t.Float32s()
			if err != nil {
				return nil, nil, fmt.Errorf("output %q: %w", p.name, err)
			}
			*side.out = append(*side.out, task.Value{Data: f, Dims: side.t.Dims})
		}
	}
	return va, vb, nil
}

// load reads a model from its file, or from b when given.
func load(path string, s graph.Serialized) (*graph.Model, error) {
	if s.Bytes != nil {
		return s.Parse()
	}
	return graph.LoadValid(path)
}

func source(path string, s graph.Serialized, ins, outs []ort.IO) ort.Source {
	if s.Bytes != nil {
		return ort.SourceFrom(s, ins, outs)
	}
	return ort.Source{Path: path, Inputs: ins, Outputs: outs}
}

func tol(m map[string]float64, name string, def float64) float64 {
	if v, ok := m[name]; ok {
		return v
	}
	if v, ok := m[""]; ok {
		return v
	}
	return def
}

// sameInputs checks that B takes the inputs A takes.
func sameInputs(a, b []data.Input) error {
	if len(a) != len(b) {
		return fmt.Errorf("A has %d inputs, B has %d", len(a), len(b))
	}
	for _, x := range a {
		i := slices.IndexFunc(b, func(y data.Input) bool { return y.Name == x.Name })
		if i < 0 {
			return fmt.Errorf("input %q of A is not an input of B", x.Name)
		}
		if b[i].DType != x.DType {
			return fmt.Errorf("input %q is %s in A and %s in B", x.Name, x.DType, b[i].DType)
		}
	}
	return nil
}

type outputPair struct {
	name string
	a, b int
}

// pairOutputs matches outputs by name, or by position when the models
// share no output name but have as many outputs.
func pairOutputs(a, b []ort.IO) ([]outputPair, error) {
	var pairs []outputPair
	for i, x := range a {
		if j := slices.IndexFunc(b, func(y ort.IO) bool { return y.Name == x.Name }); j >= 0 {
			pairs = append(pairs, outputPair{x.Name, i, j})
		}
	}
	if len(pairs) > 0 {
		return pairs, nil
	}
	if len(a) != len(b) {
		return nil, fmt.Errorf("the models share no output name and have %d and %d outputs", len(a), len(b))
	}
	for i := range a {
		pairs = append(pairs, outputPair{a[i].Name + "|" + b[i].Name, i, i})
	}
	return pairs, nil
}

// scorer counts correct top-1 predictions of A and B against labels.
type scorer struct {
	labels         []int64
	output         string
	offset         int64
	correctA, corB int64
	scored         int64
}

func newScorer(labels []int64, output string) *scorer {
	return &scorer{labels: labels, output: output}
}

func (s *scorer) add(name string, a, b []float32, shape []int64) error {
	if s.labels == nil || len(shape) != 2 || shape[1] < 2 {
		return nil
	}
	if s.output == "" {
		s.output = name
	}
	if name != s.output {
		return nil
	}
	c := int(shape[1])
	for n := 0; n < int(shape[0]); n++ {
		k := s.offset + int64(n)
		if k >= int64(len(s.labels)) {
			return fmt.Errorf("%d labels for more samples than that", len(s.labels))
		}
		if int64(Argmax(a[n*c:(n+1)*c])) == s.labels[k] {
			s.correctA++
		}
		if int64(Argmax(b[n*c:(n+1)*c])) == s.labels[k] {
			s.corB++
		}
		s.scored++
	}
	return nil
}

func (s *scorer) advance(n int64) { s.offset += n }

// result is the accuracy over the samples run. With a sample limit the
// labels may be more: the first ones belong to the samples read.
func (s *scorer) result(samples int64, limited bool) (*schema.LabelAccuracy, error) {
	if s.output == "" || s.scored == 0 {
		return nil, errors.New("no classifier-like output ([N, classes]) to score labels against")
	}
	if n := int64(len(s.labels)); n < samples || n > samples && !limited {
		return nil, fmt.Errorf("%d labels for %d samples", len(s.labels), samples)
	}
	a := 100 * float64(s.correctA) / float64(s.scored)
	b := 100 * float64(s.corB) / float64(s.scored)
	return &schema.LabelAccuracy{Output: s.output, Labels: s.scored, A: a, B: b, DropPoints: a - b}, nil
}
