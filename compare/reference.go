package compare

import (
	"fmt"
	"sync"

	"github.com/optc-dev/optc/graph"
)

// Reference keeps model A's outputs over one data set, so that several
// models compared against the same A, on the same data and with the same
// session settings, run A once: optc build checks every artifact against
// its input. It holds at most MaxBytes of outputs; when a run would need
// more it keeps none for that key and A runs every time, so memory stays
// bounded whatever the size of the data. The zero value keeps nothing.
type Reference struct {
	// MaxBytes bounds the outputs kept (see ReferenceBytes).
	MaxBytes int64

	mu      sync.Mutex
	entries map[string]*refEntry
	bytes   int64
}

type refEntry struct {
	batches [][]*graph.Tensor // A's outputs, batch by batch
	tooBig  bool              // over MaxBytes: A runs every time
	stopped bool              // the recording comparison stopped early (Options.Stop)
}

// ReferenceBytes is the bound optc's own callers give a Reference: the
// outputs of a classifier over thousands of samples fit, a detector's
// maps over a large data set do not and are computed again.
const ReferenceBytes = 64 << 20

// NewReference is a Reference bounded by ReferenceBytes.
func NewReference() *Reference { return &Reference{MaxBytes: ReferenceBytes} }

// referenceKey is what makes A's outputs the same: the model, the data
// and how it is read, the session, and the outputs fetched.
func referenceKey(opts Options, outs []string) string {
	return fmt.Sprintf("%s|%d|%s|%+v|%+v|%q", opts.ModelA, len(opts.AInMemory.Bytes), opts.Data, opts.DataOpts, opts.Session, outs)
}

// lookup returns A's recorded outputs for key, or nil, and whether the
// comparison that recorded them stopped before the data ended.
func (r *Reference) lookup(key string) ([][]*graph.Tensor, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[key]; e != nil && !e.tooBig {
		return e.batches, e.stopped
	}
	return nil, false
}

// recorder gathers A's outputs during one comparison, and lets go of
// them as soon as they outgrow what the Reference has room for.
type recorder struct {
	r       *Reference
	key     string
	room    int64
	bytes   int64
	batches [][]*graph.Tensor
	tooBig  bool
}

// record starts recording A's outputs for key (nil: not wanted).
func (r *Reference) record(key string) *recorder {
	if r == nil || r.MaxBytes <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[key] != nil {
		return nil
	}
	return &recorder{r: r, key: key, room: r.MaxBytes - r.bytes}
}

func (rec *recorder) add(ys []*graph.Tensor) {
	if rec == nil || rec.tooBig {
		return
	}
	for _, t := range ys {
		rec.bytes += t.ByteSize()
	}
	if rec.bytes > rec.room {
		rec.batches, rec.tooBig = nil, true
		return
	}
	rec.batches = append(rec.batches, ys)
}

// done stores what was recorded (or that it did not fit), and whether
// the comparison stopped before the data ended.
func (rec *recorder) done(stopped bool) {
	if rec == nil {
		return
	}
	r := rec.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = map[string]*refEntry{}
	}
	if rec.tooBig || r.bytes+rec.bytes > r.MaxBytes {
		r.entries[rec.key] = &refEntry{tooBig: true}
		return
	}
	r.entries[rec.key] = &refEntry{batches: rec.batches, stopped: stopped}
	r.bytes += rec.bytes
}
