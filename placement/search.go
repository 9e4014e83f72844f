package placement

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// Modes are what `--placement` takes besides a placement file.
var Modes = []string{schema.ModeAuto, schema.ModeAllINT8}

// noise is the relative margin within which two medians count as equal:
// INT8 is chosen only when it is faster than FP32 by more than this, and
// must not be slower than FP32 by more than this at any batch size.
const noise = 0.05

// Options say what to place and how to measure it.
type Options struct {
	// Float is the float model quantization starts from (opset >= 13).
	Float  graph.Serialized
	Ranges map[string][2]float64
	// Quant are the accuracy-valid INT8 settings (the layers accuracy
	// control kept float already excluded); Target must be ort.
	Quant quantize.Options
	// Session is the artifact's level and threads: decisions are made there.
	Session ort.Options
	// Inputs is the input specification of the random timing inputs.
	Inputs data.Spec
	// Batches to time (default 1 and 8); regions are profiled and the
	// greedy search runs at the first.
	Batches []int
	// Budget bounds the search (default 60s): a step predicted to end past
	// it is not started, and FP32 is recommended unless INT8 was measured
	// and confirmed faster within it.
	Budget time.Duration
	// Accept checks a candidate against the accuracy budget (nil: every
	// candidate is accepted). All-INT8 is accepted already. The greedy
	// search's reverts are checked as they are made; every other candidate
	// only when the decision would pick it (see search).
	Accept func(int8Model graph.Serialized) (bool, error)
	// CPU and CPUFlags are recorded in the file (the answer depends on the
	// CPU).
	CPU      string
	CPUFlags []string
	// Progress, when set, gets a line as each step of the search starts
	// (profiling, a candidate, a greedy step, a timing window), so that a
	// long search can be followed and a log says where time went.
	Progress func(format string, args ...any)
}

// progress says what the search does next, when someone listens.
func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// AllINT8 is today's behaviour: every region int8, nothing measured.
func AllINT8(opts Options) (*schema.Placement, graph.Serialized, error) {
	q, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, nil)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	f := newFile(opts, schema.ModeAllINT8, q.regions)
	f.Recommended, f.Chosen = schema.RecommendINT8, schema.CandidateAllINT8
	s := SchemeOf(q.report)
	f.Scheme = &s
	f.Reason = fmt.Sprintf("INT8 (all %d regions; --placement all-int8, not measured)", len(f.Regions))
	return f, q.serialized, nil
}

// Replay builds the INT8 model a placement file describes, without
// measuring. The file must list the regions this model and these
// settings quantize. The file returned is the one given, unchanged (its
// mode says how the decisions were made, not that they were replayed), so
// that a replayed build writes the same placement.json byte for byte.
func Replay(opts Options, from *schema.Placement) (*schema.Placement, graph.Serialized, error) {
	if from.Schema != schema.PlacementVersion {
		return nil, graph.Serialized{}, fmt.Errorf("placement file schema %d, want %d", from.Schema, schema.PlacementVersion)
	}
	if from.Recommended != schema.RecommendINT8 && from.Recommended != schema.RecommendFP32 {
		return nil, graph.Serialized{}, fmt.Errorf("placement file recommends %q, want %q or %q", from.Recommended, schema.RecommendINT8, schema.RecommendFP32)
	}
	if a := from.Aligned; a != nil && a.Chosen {
		padded, convs, err := aligned(opts, a.Channels)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		if convs != a.Convs {
			return nil, graph.Serialized{}, fmt.Errorf("placement file pads %d convs to %d channels, this model %d: it was made for another model", a.Convs, a.Channels, convs)
		}
		opts = padded
	}
	all, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, nil)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	if len(all.regions) != len(from.Regions) {
		return nil, graph.Serialized{}, fmt.Errorf("placement file lists %d regions, this model quantizes %d: it was made for another model or other quantization settings", len(from.Regions), len(all.regions))
	}
	for i, r := range from.Regions {
		a := all.regions[i]
		if r.ID != a.ID || r.Index != a.Index || r.Op != a.Op {
			return nil, graph.Serialized{}, fmt.Errorf("placement file region %d is %q (node %d, %s), this model's is %q (node %d, %s): it was made for another model or other quantization settings",
				i, r.ID, r.Index, r.Op, a.ID, a.Index, a.Op)
		}
		if r.Decision != schema.DecisionINT8 && r.Decision != schema.DecisionFloat {
			return nil, graph.Serialized{}, fmt.Errorf("placement file region %q: decision %q, want %q or %q", r.ID, r.Decision, schema.DecisionINT8, schema.DecisionFloat)
		}
	}
	f := *from
	if IsAlternative(from.Chosen) {
		m, rep, err := Build(from.Chosen, opts.Float, opts.Ranges, opts.Quant)
		if err == nil && rep == nil {
			err = fmt.Errorf("placement file chose %s, which this model and these quantization settings do not take (a scheme variant of a setting given explicitly, or dynamic INT8 on a model without MatMul/Gemm)", from.Chosen)
		}
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		b, err := graph.MarshalReferencing(m)
		return &f, b, err
	}
	q, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, from.Regions)
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	return &f, q.serialized, nil
}

// Search measures and decides (see the package comment). Every measuring
// step is started only when its cost, predicted from the steps measured
// before it, fits the budget left; the A/B timing keeps time for the
// confirmation of a win. When the budget ends early the file says so
// (BudgetExhausted, StoppedBefore, the reason) and the best placement
// measured so far is returned: FP32 is recommended unless an INT8
// placement was measured and confirmed faster.
func Search(opts Options) (*schema.Placement, graph.Serialized, error) {
	f, b, _, err := search(opts)
	return f, b, err
}

func search(opts Options) (*schema.Placement, graph.Serialized, *clock, error) {
	if opts.Budget <= 0 {
		opts.Budget = time.Minute
	}
	if len(opts.Batches) == 0 {
		opts.Batches = []int{1, 8}
	}
	start := time.Now()
	s := &searcher{opts: opts, start: start, clk: &clock{deadline: start.Add(opts.Budget)}}
	f, b, err := s.run()
	return f, b, s.clk, err
}

// searcher is one placement search: the candidates it built, and the
// file it fills.
type searcher struct {
	opts  Options
	start time.Time
	clk   *clock
	// all is every region INT8; fp the float model it must beat; prof
	// the FP32 model profiled beside all (fp unless the candidates were
	// made from a padded model).
	all, fp, prof *quantized
	f             *schema.Placement
	alignment     *schema.Alignment
	cands         []string // the candidates, FP32 first
	models        map[string]*quantized
}

// errUnmeasured ends a search the budget stopped before INT8 was timed
// against FP32.
var errUnmeasured = errors.New("placement: unmeasured")

// run is the search, step by step: the candidates, the profiles, the
// optional candidates, the greedy search, the A/B timing, the lazy
// accuracy check, the confirmation of a win and the timings for the
// record.
func (s *searcher) run() (*schema.Placement, graph.Serialized, error) {
	opts := s.opts
	var err error
	if s.all, err = s.build(nil, nil); err != nil {
		return nil, graph.Serialized{}, err
	}
	if len(s.all.regions) == 0 {
		return s.nothingToTime()
	}
	if err := s.baselines(); err != nil {
		return nil, graph.Serialized{}, err
	}
	s.f = newFile(s.opts, schema.ModeAuto, s.all.regions)
	s.f.Aligned = s.alignment
	s.cands = []string{schema.CandidateFP32, schema.CandidateAllINT8}
	s.models = map[string]*quantized{schema.CandidateFP32: s.fp, schema.CandidateAllINT8: s.all}
	slower, err := s.profile()
	if err == nil {
		err = s.optionalCandidates(slower)
	}
	if err == nil {
		s.releaseGraphs()
		err = s.timeCandidates()
	}
	if errors.Is(err, errUnmeasured) {
		// Nothing slower than FP32 may ship, so FP32 it is.
		s.f.Recommended, s.f.Chosen = schema.RecommendFP32, schema.CandidateAllINT8
		s.f.Reason = fmt.Sprintf("FP32: the %s placement budget ended before INT8 was timed against FP32 (stopped before %s)", opts.Budget, s.clk.stoppedBefore)
		return s.done()
	}
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	if err := s.checkAccuracy(); err != nil {
		return nil, graph.Serialized{}, err
	}
	if err := s.confirm(); err != nil {
		return nil, graph.Serialized{}, err
	}
	if err := s.otherThreads(); err != nil {
		return nil, graph.Serialized{}, err
	}
	return s.done()
}

// build makes the candidate with the regions in float kept float, timed
// on the clock.
func (s *searcher) build(float map[int]bool, regions []schema.Region) (*quantized, error) {
	var q *quantized
	d, err := s.clk.step(func() (err error) {
		q, err = quantizeKeeping(s.opts.Float, s.opts.Ranges, s.opts.Quant, withDecisions(regions, float))
		return err
	})
	s.clk.quantize = max(s.clk.quantize, d)
	return q, err
}

// accept checks a candidate's accuracy (Options.Accept), timed on the
// clock; without a check every candidate keeps it.
func (s *searcher) accept(b graph.Serialized) (bool, error) {
	if s.opts.Accept == nil {
		return true, nil
	}
	var ok bool
	d, err := s.clk.step(func() (err error) { ok, err = s.opts.Accept(b); return err })
	s.clk.accept = max(s.clk.accept, d)
	return ok, err
}

// nothingToTime is the search of a model whose main graph has no
// quantized region: what was quantized sits inside If/Loop branches. That
// model is written as it is, and the ORT artifact stays FP32: no
// measurement said INT8 pays.
func (s *searcher) nothingToTime() (*schema.Placement, graph.Serialized, error) {
	f := newFile(s.opts, schema.ModeAuto, []schema.Region{})
	f.Recommended, f.Chosen = schema.RecommendFP32, schema.CandidateAllINT8
	sc := SchemeOf(s.all.report)
	f.Scheme = &sc
	f.Reason = "FP32: the main graph has no quantized region to time (what was quantized is inside If/Loop branches); model.int8.onnx holds it, not measured"
	f.SearchSeconds = round(time.Since(s.start).Seconds())
	return f, s.all.serialized, nil
}

// baselines builds what INT8 must beat (fp: the float model as given)
// and the FP32 model profiled region by region beside all-INT8 (the same
// graph, so fp unless align pads the channels of the INT8 candidates).
func (s *searcher) baselines() error {
	var err error
	if s.fp, err = s.build(indices(s.all.regions, nil), s.all.regions); err != nil {
		return err
	}
	s.prof = s.fp
	var alignment *schema.Alignment
	if s.opts, s.all, alignment, err = align(s.opts, s.all, s.clk); err != nil {
		return err
	}
	if alignment != nil && alignment.Chosen {
		if s.prof, err = s.build(indices(s.all.regions, nil), s.all.regions); err != nil {
			return err
		}
	}
	s.alignment = alignment
	return nil
}

// profile takes each region's cost from ORT's profiler at the first batch
// size, FP32 and all-INT8, and returns the regions INT8 makes slower. The
// FP32 profile is the first measurement: nothing predicts it, so it starts
// when any time is left.
func (s *searcher) profile() (map[int]bool, error) {
	opts, clk, b0 := s.opts, s.clk, s.opts.Batches[0]
	in1, err := inputs(s.fp.model, opts.Inputs, b0)
	if err != nil {
		return nil, err
	}
	const fpStep, int8Step = "profiling the FP32 model", "profiling the INT8 model"
	if !clk.fits(fpStep, 0, 0) {
		return nil, errUnmeasured
	}
	opts.progress("placement: profiling FP32 and all-INT8 per region at batch %d", b0)
	fpTimes, err := s.nodeTimesStep(fpStep, s.prof.serialized, in1)
	if err != nil {
		return nil, err
	}
	if !clk.fits(int8Step, clk.profile(b0), 0) {
		return nil, errUnmeasured
	}
	int8Times, err := s.nodeTimesStep(int8Step, s.all.serialized, in1)
	if err != nil {
		return nil, err
	}
	fpCost, int8Cost := regionCosts(s.prof, fpTimes), regionCosts(s.all, int8Times)
	slower := map[int]bool{}
	for i := range s.f.Regions {
		s.f.Regions[i].FP32Ms, s.f.Regions[i].INT8Ms = round(fpCost[i]), round(int8Cost[i])
		if fpCost[i] > 0 && int8Cost[i] >= fpCost[i] {
			slower[s.f.Regions[i].Index] = true
		}
	}
	return slower, nil
}

// nodeTimesStep profiles model at the first batch size as one step of the
// clock, its cost teaching the clock, and names the step in its error:
// profile's FP32 and INT8 measurements.
func (s *searcher) nodeTimesStep(step string, model graph.Serialized, in1 []*graph.Tensor) (map[string]float64, error) {
	var times map[string]float64
	if _, err := s.clk.step(func() (err error) {
		var k cost
		times, k, err = nodeTimes(model, s.opts.Session, in1)
		s.clk.observe(k, s.opts.Batches[0])
		return err
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	return times, nil
}

// add makes q a candidate.
func (s *searcher) add(name string, q *quantized) {
	// Only all, fp and prof are profiled by node: an optional candidate
	// keeps its bytes alone, not the graph they were written from.
	q.model, q.nodes = nil, nil
	s.cands, s.models[name] = append(s.cands, name), q
}

// releaseGraphs lets go of the candidates' graphs once nothing reads them
// (the profiles and the greedy search are done) and returns the memory to
// the system before the timing opens its sessions: on a ResNet-50 at
// 224x224 the garbage of building the candidates (400 MB of Go heap) was
// still resident while ORT's sessions grew to their peak beside it.
func (s *searcher) releaseGraphs() {
	for _, q := range []*quantized{s.all, s.fp, s.prof} {
		if q != nil {
			q.model, q.nodes = nil, nil
		}
	}
	debug.FreeOSMemory()
}

// optionalCandidates builds the candidates beyond FP32 and all-INT8, each
// only when the timing the decision needs still fits after it: the
// profile-guided one (the regions INT8 makes slower kept float), the
// whole-model alternatives (dynamic INT8, the scheme variants) and the
// greedy search's. A candidate's accuracy is checked only when the
// decision would pick it (checkAccuracy): a slower one's check would
// change nothing.
func (s *searcher) optionalCandidates(slower map[int]bool) error {
	opts, clk, b0 := s.opts, s.clk, s.opts.Batches[0]
	// reserve is what the A/B timing at the first batch size and the
	// confirmation of a win need after the optional steps.
	reserve := func(candidates int) time.Duration { return clk.timing(candidates, b0) + clk.confirmation(b0) }
	if len(slower) > 0 && len(slower) < len(s.all.regions) &&
		clk.fits("the profile-guided candidate", clk.quantize, reserve(len(s.cands)+1)) {
		opts.progress("placement: the profile-guided candidate (%d of %d regions float)", len(slower), len(s.all.regions))
		g, err := s.build(slower, s.all.regions)
		if err != nil {
			return err
		}
		s.add(schema.CandidateGuided, g)
	}
	if err := s.alternatives(); err != nil {
		return err
	}
	// The greedy search gets the budget left but what the A/B timing at
	// every batch size and the confirmations are predicted to need (batch
	// sizes past the first predicted from the first's cost per sample,
	// which errs long); the other thread counts, for the record, get what
	// is left after them.
	stop := clk.deadline.Add(-s.abReserve(len(s.cands) + 1))
	gr, steps, err := greedy(opts, s.prof, s.all, clk, stop, s.build, s.accept)
	if err != nil {
		return err
	}
	s.f.Greedy = steps
	if gr != nil {
		s.add(schema.CandidateGreedy, gr)
	}
	return nil
}

// abReserve is what the A/B timing of candidates at every batch size and
// the confirmations are predicted to need.
func (s *searcher) abReserve(candidates int) time.Duration {
	var d time.Duration
	for _, b := range s.opts.Batches {
		d += s.clk.timing(candidates, b) + s.clk.confirmation(b)
	}
	return d
}

// alternatives builds the whole-model alternatives (dynamic INT8, the
// scheme variants), each when it applies to the model and these
// settings, and only when the A/B timing of every batch size and the
// confirmations, one candidate more, still fit after it: an optional
// candidate must not crowd out the measurements the decision needs.
// Those the budget leaves out are named.
func (s *searcher) alternatives() error {
	for i, a := range alternatives {
		if !s.clk.fits("the "+a.name+" candidate", s.clk.quantize, s.abReserve(len(s.cands)+1)) {
			for _, b := range alternatives[i:] {
				s.f.NotTried = append(s.f.NotTried, b.name)
			}
			return nil
		}
		var alt *quantized
		s.opts.progress("placement: the %s candidate", a.name)
		d, err := s.clk.step(func() (err error) { alt, err = alternativeModel(a, s.opts, s.all); return err })
		s.clk.quantize = max(s.clk.quantize, d)
		if err != nil {
			return fmt.Errorf("the %s candidate: %w", a.name, err)
		}
		if alt != nil {
			s.add(a.name, alt)
		}
	}
	return nil
}

// timeAt times the candidates names at threads and batch; its turns stop
// at stop (after the least), so that the steps reserved after it keep
// their time.
func (s *searcher) timeAt(threads, batch int, names []string, stop time.Time, retire func([][]float64, []bool)) (*schema.PlacementTiming, error) {
	bs := make([]graph.Serialized, len(names))
	for i, n := range names {
		bs[i] = s.models[n].serialized
	}
	sess := s.opts.Session
	sess.IntraOpThreads = threads
	s.opts.progress("placement: timing %s at batch %d, %s", strings.Join(names, ", "), batch, threadWords(threads))
	var p50 []float64
	var k cost
	_, err := s.clk.step(func() (err error) {
		p50, k, err = timeInterleaved(bs, sess, s.opts.Inputs, batch, stop, retire)
		s.clk.observe(k, batch)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("timing the candidates at batch %d, %d threads: %w", batch, threads, err)
	}
	t := &schema.PlacementTiming{Threads: threads, Batch: batch, P50Ms: map[string]float64{}, Runs: map[string]int{}}
	for i, n := range names {
		if k.runs[i] == 0 {
			t.LeftOut = append(t.LeftOut, n)
			continue
		}
		t.P50Ms[n] = round(p50[i])
		t.Runs[n] = k.runs[i]
	}
	return t, nil
}

// timeCandidates is the whole-model A/B at the artifact's threads, each
// batch size; a batch size is timed only when its confirmation, and that
// of the batch sizes before it, fits after it.
func (s *searcher) timeCandidates() error {
	opts, clk := s.opts, s.clk
	var confirmCost time.Duration
	for i, b := range opts.Batches {
		confirmCost += clk.confirmation(b)
		names := s.cands
		if i > 0 {
			// Fastest first at the first batch size (FP32 always first):
			// what memory or the budget leaves out are the slowest.
			names = byFirstTiming(s.f.Timings[0], s.cands)
			if clk.timing(len(names), b) >= time.Until(clk.deadline)-confirmCost {
				// Every candidate does not fit: the contenders may.
				names = contenders(s.f.Timings[0], names)
			}
		}
		if !clk.fits(fmt.Sprintf("timing the candidates at batch %d", b), clk.timing(len(names), b), confirmCost) {
			break
		}
		// Its turns leave the later batch sizes and every confirmation
		// their predicted time, with half as much again: a prediction
		// made now is revised by what this timing measures.
		after := confirmCost
		for _, c := range opts.Batches[i+1:] {
			after += clk.timing(len(s.cands), c) + clk.confirmation(c)
		}
		t, err := s.timeAt(opts.Session.IntraOpThreads, b, names, clk.deadline.Add(-after*3/2), retireLosers) // names[0] is FP32
		if err != nil {
			return err
		}
		s.f.Timings = append(s.f.Timings, *t)
	}
	if len(s.f.Timings) == 0 {
		return errUnmeasured
	}
	return nil
}

// checkAccuracy is the lazy check: the decision is made among the
// candidates that keep the accuracy budget, checked fastest first: one
// that misses it is dropped and the next fastest checked. All-INT8 (the
// guard's model) and the greedy placement (each revert checked) are known
// to keep it.
func (s *searcher) checkAccuracy() error {
	f := s.f
	checked := map[string]bool{schema.CandidateAllINT8: true, schema.CandidateGreedy: true}
	for choose(f, s.cands, s.models); !checked[f.Chosen]; choose(f, s.cands, s.models) {
		if s.opts.Accept != nil {
			s.opts.progress("placement: checking the accuracy of %s, the fastest INT8 candidate left", f.Chosen)
		}
		ok, err := s.accept(s.models[f.Chosen].serialized)
		if err != nil {
			return fmt.Errorf("checking the %s candidate: %w", f.Chosen, err)
		}
		checked[f.Chosen] = true
		if s.opts.Accept != nil {
			f.Checked = append(f.Checked, f.Chosen)
		}
		if ok {
			break
		}
		f.Rejected = append(f.Rejected, f.Chosen+": misses the accuracy budget")
		s.cands = slices.DeleteFunc(s.cands, func(c string) bool { return c == f.Chosen })
	}
	return nil
}

// confirm times a win again: one measured once can be noise (or a burst
// of load on the other candidate), so INT8 is confirmed against FP32 with
// fresh sessions at every batch size measured, each for a whole window.
// A win the budget leaves unconfirmed is not shipped.
func (s *searcher) confirm() error {
	f, clk := s.f, s.clk
	if f.Recommended != schema.RecommendINT8 {
		return nil
	}
	var confirm []schema.PlacementTiming
	for i, t := range f.Timings {
		var after time.Duration // the confirmations still to come
		for _, u := range f.Timings[i+1:] {
			after += clk.confirmation(u.Batch)
		}
		// A confirmation takes its whole window (timePerBatch): one cut
		// to the least turns by a short budget is too noisy to ship INT8
		// on, so it is not started.
		need := clk.confirmation(t.Batch)
		if !clk.fits(fmt.Sprintf("confirming INT8 at batch %d", t.Batch), need, after) {
			break
		}
		c, err := s.timeAt(t.Threads, t.Batch, []string{schema.CandidateFP32, f.Chosen}, time.Now().Add(need), nil)
		if err != nil {
			return err
		}
		c.Confirmation = true
		confirm = append(confirm, *c)
	}
	searched := len(f.Timings)
	f.Timings = append(f.Timings, confirm...)
	switch sp, w := speedup(confirm, f.Threads, f.Chosen); {
	case len(confirm) < searched:
		f.Recommended = schema.RecommendFP32
		f.Reason = fmt.Sprintf("FP32: INT8 was faster when searched (%s) but the %s placement budget ended before the win was confirmed at every batch size", f.Reason, s.opts.Budget)
	case !wins(sp, w):
		f.Recommended = schema.RecommendFP32
		f.Reason = fmt.Sprintf("FP32: INT8 was faster when searched (%s) but %.2fx the speed of FP32 when confirmed: within noise", f.Reason, sp)
	}
	return nil
}

// otherThreads times FP32 against the chosen placement at the other
// thread counts (1 and all cores), for the record, while they fit.
func (s *searcher) otherThreads() error {
	for _, threads := range otherThreads(s.opts.Session.IntraOpThreads) {
		for _, b := range s.opts.Batches {
			if !s.clk.fits(fmt.Sprintf("timing at batch %d, %s (for the record)", b, threadWords(threads)), s.clk.timing(2, b), 0) {
				return nil
			}
			t, err := s.timeAt(threads, b, []string{schema.CandidateFP32, s.f.Chosen}, s.clk.deadline, nil)
			if err != nil {
				return err
			}
			s.f.Timings = append(s.f.Timings, *t)
		}
	}
	return nil
}

// done ends the search: the regions' decisions are the chosen
// candidate's, and a search the budget cut short says where.
func (s *searcher) done() (*schema.Placement, graph.Serialized, error) {
	f := s.f
	chosen := s.models[f.Chosen]
	f.Regions = withDecisions(f.Regions, indices(chosen.regions, isFloat))
	for name, q := range s.models {
		if name != schema.CandidateFP32 && q.report != nil {
			f.Schemes[name] = SchemeOf(q.report)
		}
	}
	if q := chosen.report; q != nil {
		sc := SchemeOf(q)
		f.Scheme = &sc
	}
	if s.clk.stoppedBefore != "" {
		f.BudgetExhausted = true
		f.StoppedBefore = s.clk.stoppedBefore
	}
	f.SearchSeconds = round(time.Since(s.start).Seconds())
	return f, chosen.serialized, nil
}

// contenders are FP32 and the INT8 candidates within 2x of the fastest
// one in t: what a later batch size times when the budget does not fit
// every candidate (one 2x slower at the first batch size would have to
// be 2x faster than the fastest at every later one to win the geometric
// mean).
func contenders(t schema.PlacementTiming, cands []string) []string {
	best := math.Inf(1)
	for _, c := range cands {
		if c != schema.CandidateFP32 {
			best = min(best, t.P50Ms[c])
		}
	}
	var out []string
	for _, c := range cands {
		if c == schema.CandidateFP32 || t.P50Ms[c] <= 2*best {
			out = append(out, c)
		}
	}
	return out
}

// byFirstTiming orders the candidates as t timed them, fastest first,
// FP32 first of all and those t did not time last (ties and the untimed
// in their order).
func byFirstTiming(t schema.PlacementTiming, cands []string) []string {
	key := func(c string) float64 {
		switch p, ok := t.P50Ms[c]; {
		case c == schema.CandidateFP32:
			return -1
		case !ok || p <= 0:
			return math.Inf(1)
		default:
			return p
		}
	}
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// choose picks the fastest INT8 candidate (by the geometric mean of its
// speed-up over FP32 across batch sizes at the artifact's threads; only
// the candidates timed at every batch size timed) and
// recommends it when it wins (see wins); otherwise FP32 is recommended and
// the fastest INT8 candidate is still what the INT8 model holds.
func choose(f *schema.Placement, cands []string, models map[string]*quantized) {
	best, bestSpeedup, worst := "", 0.0, 0.0
	for _, c := range cands {
		if c == schema.CandidateFP32 || slices.ContainsFunc(f.Timings, func(t schema.PlacementTiming) bool { return t.Threads == f.Threads && t.P50Ms[c] == 0 }) {
			continue
		}
		if s, w := speedup(f.Timings, f.Threads, c); s > bestSpeedup {
			best, bestSpeedup, worst = c, s, w
		}
	}
	if best == "" {
		// Every INT8 candidate timed at every batch size missed the
		// accuracy budget (those the budget's contenders rule kept).
		f.Chosen, f.Recommended = schema.CandidateAllINT8, schema.RecommendFP32
		f.Reason = "FP32: no INT8 candidate timed at every batch size keeps the accuracy budget"
		return
	}
	f.Chosen = best
	what := fmt.Sprintf("INT8 (all %d regions)", len(f.Regions))
	if n := len(indices(models[best].regions, isFloat)); n > 0 {
		what = fmt.Sprintf("INT8 with %d of %d regions float", n, len(f.Regions))
	}
	if w := models[best].what; w != "" {
		what = w
	}
	at := fmt.Sprintf("batch %s, %s", batchList(f), threadWords(f.Threads))
	if wins(bestSpeedup, worst) {
		f.Recommended = schema.RecommendINT8
		f.Reason = fmt.Sprintf("%s: %.2fx faster than FP32 (%s)", what, bestSpeedup, at)
		return
	}
	f.Recommended = schema.RecommendFP32
	if bestSpeedup >= 1 {
		f.Reason = fmt.Sprintf("FP32: the fastest INT8 placement (%s) was %.2fx the speed of FP32, within noise or slower at one batch size (%s)", what, bestSpeedup, at)
		return
	}
	f.Reason = fmt.Sprintf("FP32: INT8 was %.2fx slower on this CPU (fastest placement: %s; %s)", 1/bestSpeedup, what, at)
}

// wins: faster than FP32 by more than the noise overall and not slower
// than the noise at any batch size.
func wins(speedup, worst float64) bool { return speedup > 1+noise && worst >= 1-noise }

// speedup is the geometric mean over batch sizes of FP32's median over the
// candidate's, and the worst of those ratios, in timings at threads.
func speedup(timings []schema.PlacementTiming, threads int, c string) (mean, worst float64) {
	logSum, n := 0.0, 0
	worst = math.Inf(1)
	for _, t := range timings {
		if t.Threads == threads && t.P50Ms[c] > 0 {
			r := t.P50Ms[schema.CandidateFP32] / t.P50Ms[c]
			logSum += math.Log(r)
			worst = min(worst, r)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return math.Exp(logSum / float64(n)), worst
}

func newFile(opts Options, mode string, regions []schema.Region) *schema.Placement {
	return &schema.Placement{Schema: schema.PlacementVersion, Mode: mode, CPU: opts.CPU, CPUFlags: opts.CPUFlags,
		Level: opts.Session.Level.String(), Threads: opts.Session.IntraOpThreads, Regions: regions,
		BudgetSeconds: opts.Budget.Seconds(), Schemes: map[string]schema.Scheme{}}
}

// otherThreads are the thread counts measured besides the artifact's: 1
// and one per core (0, ORT's default), without repeats.
func otherThreads(threads int) []int {
	var out []int
	for _, t := range []int{1, 0} {
		if t != threads && !(t == 0 && threads == runtime.NumCPU()) && !(t == 1 && threads == 0 && runtime.NumCPU() == 1) {
			out = append(out, t)
		}
	}
	return out
}

func threadWords(threads int) string {
	if threads == 0 {
		return fmt.Sprintf("all %d cores", runtime.NumCPU())
	}
	if threads == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", threads)
}

func batchList(f *schema.Placement) string {
	s := ""
	for _, t := range f.Timings {
		if t.Threads == f.Threads {
			if s != "" {
				s += " and "
			}
			s += fmt.Sprint(t.Batch)
		}
	}
	return s
}

func isFloat(r schema.Region) bool { return r.Decision == schema.DecisionFloat }

// indices are the node indices of the regions keep selects (all when nil).
func indices(regions []schema.Region, keep func(schema.Region) bool) map[int]bool {
	ids := map[int]bool{}
	for _, r := range regions {
		if keep == nil || keep(r) {
			ids[r.Index] = true
		}
	}
	return ids
}

// round keeps four decimals, so that placement.json stays readable.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }
