package calibrate

import (
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/shapes"
)

// DefaultMaxRunBytes is what one calibration run may fetch when
// Options.MaxRunBytes is 0: the exposed activations of one batch, as ORT
// returns them. ORT and the Go copy each hold them once at the end of a
// run, so the peak is about twice this, plus the model and ORT's working
// memory.
const DefaultMaxRunBytes = 256 << 20

// planRuns splits the exposed values of one batch into runs whose fetched
// bytes stay within limit, in the order of names (so that each tensor sees
// the batches in the same order whatever the split, and statistics are
// those of one run per batch). sizes holds each value's bytes for the
// first batch; a value whose size is unknown (-1) counts as the largest
// known one. A value over limit alone gets a run of its own. Nil when one
// run fetches everything.
func planRuns(names []string, sizes map[string]int64, limit int64) [][]string {
	var largest, total int64
	for _, n := range names {
		largest = max(largest, sizes[n])
	}
	size := func(n string) int64 {
		if s := sizes[n]; s >= 0 {
			return s
		}
		return largest
	}
	for _, n := range names {
		total += size(n)
	}
	if total <= limit {
		return nil
	}
	var runs [][]string
	var cur []string
	var bytes int64
	for _, n := range names {
		s := size(n)
		if len(cur) > 0 && bytes+s > limit {
			runs = append(runs, cur)
			cur, bytes = nil, 0
		}
		cur = append(cur, n)
		bytes += s
	}
	return append(runs, cur)
}

// exposedSizes returns the bytes of each exposed value (by its name in
// carrier) for a batch shaped as inputs, by shape inference on m (the model
// with the values exposed) with its inputs fixed to those shapes; -1 where
// inference cannot tell. m's input types are restored before it returns.
func exposedSizes(m *graph.Model, carrier map[string]string, inputs []*graph.Tensor) map[string]int64 {
	sizes := map[string]int64{}
	for n := range carrier {
		sizes[n] = -1
	}
	var fed []*graph.Value
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			fed = append(fed, v)
		}
	}
	if len(fed) != len(inputs) {
		return sizes
	}
	saved := make([]*graph.Type, len(fed))
	for i, v := range fed {
		saved[i] = v.Type
		v.Type = graph.TensorType(inputs[i].DType, graph.StaticShape(inputs[i].Dims...))
	}
	defer func() {
		for i, v := range fed {
			v.Type = saved[i]
		}
	}()
	res, err := shapes.Infer(m)
	if err != nil {
		return sizes
	}
	for n, c := range carrier {
		v := m.Graph.Value(c)
		if v == nil {
			continue
		}
		t := res.Types[v]
		if t == nil || t.Elem == 0 || !t.Shape.IsStatic() {
			continue
		}
		elems := int64(1)
		for _, d := range t.Shape.Dims() {
			if d > 0 && elems > (1<<62)/d {
				elems = -1 // too large to be real: ByteSize refuses it
				break
			}
			elems *= d
		}
		if b, ok := t.Elem.ByteSize(elems); ok {
			sizes[n] = b
		}
	}
	return sizes
}

// run is one of the runs a batch takes: a session fetching some of the
// exposed values.
type run struct {
	sess *ort.Session
	// out is the index in sess.Outputs of each calibrated value this run
	// fetches.
	out map[string]int
}

// openRuns opens the sessions a batch is run in: one on exposed (m with
// every value of expose made an output, carrier naming the output of
// each) when a batch's activations fit limit, else one per group of
// planRuns, each on a copy of m exposing only its group. Those sessions
// do without ORT's memory arena, so that each keeps nothing between its
// runs and the peak is that of one run.
func openRuns(m, exposed *graph.Model, expose []string, carrier map[string]string, first []*graph.Tensor, limit int64, opts ort.Options) (runs []run, err error) {
	defer func() {
		if err != nil {
			for _, r := range runs {
				r.sess.Close()
			}
			runs = nil
		}
	}()
	open := func(mm *graph.Model, carrier map[string]string, opts ort.Options) error {
		s, err := ort.SourceOf(mm)
		if err != nil {
			return err
		}
		sess, err := ort.NewSession(s, opts)
		if err != nil {
			return err
		}
		idx := map[string]int{}
		for i, o := range sess.Outputs {
			idx[o.Name] = i
		}
		r := run{sess: sess, out: map[string]int{}}
		for n, c := range carrier {
			r.out[n] = idx[c]
		}
		runs = append(runs, r)
		return nil
	}
	groups := planRuns(expose, exposedSizes(exposed, carrier, first), limit)
	if groups == nil {
		return runs, open(exposed, carrier, opts)
	}
	opts.NoMemArena = true
	for _, g := range groups {
		c, err := m.Clone()
		if err != nil {
			return runs, err
		}
		car, err := graph.ExposeNested(c, g)
		if err != nil {
			return runs, err
		}
		if err := open(c, car, opts); err != nil {
			return runs, err
		}
	}
	return runs, nil
}
