package compare

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/shapes"
)

// MaxWorkers bounds the sessions a comparison runs side by side: each
// holds its own copy of the model's weights and a batch's activations.
const MaxWorkers = 4

// ParallelBytes bounds what the sessions a comparison runs side by side
// hold: each worker's models' weights (every session keeps its own copy)
// and the sum of every value's bytes at the first batch's shapes (shape
// inference). That sum is more than ORT holds (it reuses buffers), so the
// bound errs low: PaddleOCR det at 320x320 sums 170 MiB a sample and runs
// alone; the classifier's 13 MiB runs on every core.
const ParallelBytes = 512 << 20

// workers is how many session pairs run the batches, and the options each
// opens its sessions with. A comparison is throughput over many batches:
// on the CPU, with no thread count asked for, one single-threaded session
// per core beats one session whose threads share each run (measured on 2
// cores: the PaddleOCR classifier on 1,000 lines took 1.9 s with one
// thread, 2.5 s with two, 2.2 s for two single-threaded comparisons at
// once), as long as they fit ParallelBytes (perWorker: what one worker's
// sessions hold, -1 when that cannot be sized); else one session with
// ORT's threads. A single-threaded session computes the same bits on every
// machine, whatever its core count.
func workers(opts Options, perWorker int64) (int, ort.Options) {
	s := opts.Session
	if opts.Workers > 0 {
		return opts.Workers, s
	}
	if s.IntraOpThreads != 0 || (s.Provider != "" && !strings.EqualFold(s.Provider, "cpu")) || perWorker < 0 {
		return 1, s
	}
	n := min(runtime.NumCPU(), MaxWorkers)
	if perWorker > 0 {
		n = min(n, int(ParallelBytes/perWorker))
	}
	if n < 2 {
		return 1, s
	}
	s.IntraOpThreads = 1
	return n, s
}

// sessionBytes is what a session of m holds when it is fed batch: its
// weights, and every node output's bytes (shape inference); -1 when an
// output cannot be sized.
func sessionBytes(m *graph.Model, batch []*graph.Tensor) int64 {
	sizes, err := shapes.BytesAt(m, batch)
	if err != nil || sizes == nil {
		return -1
	}
	var sum int64
	for _, v := range m.Graph.Initializers {
		sum += v.Const.ByteSize()
	}
	for _, n := range m.Graph.Nodes {
		for _, v := range n.Outputs() {
			if v == nil {
				continue
			}
			b, ok := sizes[v]
			if !ok {
				return -1
			}
			sum += b
		}
	}
	return sum
}

// job is one batch on its way through a worker: A's outputs (given when
// they are replayed), B's, and the error of either run.
type job struct {
	batch  *data.Batch
	ya, yb []*graph.Tensor
	err    error
	done   chan struct{}
}

// pair is one worker's sessions; a is nil when A's outputs are replayed.
type pair struct{ a, b *ort.Session }

// runner runs batches on its workers' session pairs, the k-th batch on
// worker k mod n, so that at most n run at once; the caller takes their
// outputs in the order it gave the batches, which keeps every statistic
// the same as one session's.
type runner struct {
	open         func() (pair, error) // a further worker's sessions, opened in its goroutine; errors name the model
	first        pair                 // worker 0's, opened before any batch so that a bad model fails first
	nameA, nameB string               // the models, for errors
	in           []chan *job
	wg           sync.WaitGroup
	next         int
}

func newRunner(n int, first pair, open func() (pair, error), nameA, nameB string) *runner {
	r := &runner{open: open, first: first, nameA: nameA, nameB: nameB, in: make([]chan *job, n)}
	for i := range r.in {
		r.in[i] = make(chan *job, 1)
	}
	return r
}

// submit hands j to the next worker, starting it on its first batch.
func (r *runner) submit(j *job) {
	i := r.next % len(r.in)
	if r.next < len(r.in) {
		r.wg.Add(1)
		go r.work(i)
	}
	r.next++
	r.in[i] <- j
}

func (r *runner) work(i int) {
	defer r.wg.Done()
	p, err := r.first, error(nil)
	if i > 0 {
		if p, err = r.open(); err == nil {
			defer p.close()
		}
	}
	for j := range r.in[i] {
		switch {
		case err != nil:
			j.err = err
		case p.a != nil:
			if j.ya, j.err = p.a.Run(j.batch.Tensors); j.err != nil {
				j.err = fmt.Errorf("%s: %w", r.nameA, j.err)
				break
			}
			fallthrough
		default:
			if j.yb, j.err = p.b.Run(j.batch.Tensors); j.err != nil {
				j.err = fmt.Errorf("%s: %w", r.nameB, j.err)
			}
		}
		close(j.done)
	}
}

// stop ends the workers once their batches are done; the sessions they
// opened are closed, worker 0's stay with the caller.
func (r *runner) stop() {
	for _, c := range r.in {
		close(c)
	}
	r.wg.Wait()
}

func (p pair) close() {
	if p.a != nil {
		p.a.Close()
	}
	if p.b != nil {
		p.b.Close()
	}
}
