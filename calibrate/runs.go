package calibrate

import (
	"fmt"

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
	bytes, err := shapes.BytesAt(m, inputs)
	if err != nil {
		return sizes
	}
	for n, c := range carrier {
		if b, ok := bytes[m.Graph.Value(c)]; ok {
			sizes[n] = b
		}
	}
	return sizes
}

// SplitByBytes divides names, values of m (nested ones too), into the
// groups that one run each fetches so that no run returns more than limit
// bytes for a batch shaped as inputs (see planRuns): one group when they
// all fit. Sizes come from shape inference on m with its inputs fixed to
// those shapes.
func SplitByBytes(m *graph.Model, names []string, inputs []*graph.Tensor, limit int64) ([][]string, error) {
	c, carrier, err := exposedCopy(m, names)
	if err != nil {
		return nil, err
	}
	groups := planRuns(names, exposedSizes(c, carrier, inputs), limit)
	if groups == nil {
		groups = [][]string{names}
	}
	return groups, nil
}

// Parts runs a model with values exposed, one session per group of them
// (from SplitByBytes), so that a batch's values are fetched a group at a
// time. With more than one group the sessions do without ORT's memory
// arena, so that each keeps nothing between its runs and the peak is that
// of one run, not the sum over the sessions.
type Parts struct {
	Groups [][]string
	sess   []*ort.Session
	out    [][]int // per group, the index in its session's outputs of each value
}

// OpenParts opens a session per group on a copy of m exposing that group
// and computing nothing else (keepOnly).
func OpenParts(m *graph.Model, groups [][]string, opts ort.Options) (p *Parts, err error) {
	p = &Parts{Groups: groups}
	defer func() {
		if err != nil {
			p.Close()
			p = nil
		}
	}()
	if len(groups) > 1 {
		opts.NoMemArena = true
	}
	for _, g := range groups {
		c, carrier, err := exposedCopy(m, g)
		if err != nil {
			return p, err
		}
		if err := keepOnly(c, g, carrier); err != nil {
			return p, err
		}
		src, err := ort.SourceOf(c)
		if err != nil {
			return p, err
		}
		c = nil
		sess, err := ort.NewSession(src, opts)
		if err != nil {
			return p, err
		}
		p.sess = append(p.sess, sess)
		idx := map[string]int{}
		for i, o := range sess.Outputs {
			idx[o.Name] = i
		}
		out := make([]int, len(g))
		for i, n := range g {
			out[i] = idx[carrier[n]]
		}
		p.out = append(p.out, out)
	}
	return p, nil
}

// exposedCopy is a copy of m with names (nested ones too) exposed as
// outputs, and the name of the main-graph value that carries each: how
// calibration checks, sizes and runs the values it fetches without
// touching m.
func exposedCopy(m *graph.Model, names []string) (c *graph.Model, carrier map[string]string, err error) {
	if c, err = m.Clone(); err != nil {
		return nil, nil, err
	}
	if carrier, err = graph.ExposeNested(c, names); err != nil {
		return nil, nil, err
	}
	return c, carrier, nil
}

// keepOnly makes the carriers of group g m's only outputs and drops what
// they do not depend on: ORT (at level disable too) runs every node that
// an output needs, so a part that kept the model's own outputs would run
// the whole model, and a batch in n parts would cost n forward passes
// instead of about one.
func keepOnly(m *graph.Model, g []string, carrier map[string]string) error {
	outs := make([]*graph.Value, 0, len(g))
	seen := make(map[*graph.Value]bool, len(g))
	var flat *graph.Value // the shape [-1], made once
	for _, n := range g {
		v := m.Graph.Value(carrier[n])
		if v == nil {
			return fmt.Errorf("exposed value %q is not in the main graph", carrier[n])
		}
		if v.Type == nil || v.Type.Shape == nil || len(v.Type.Shape) == 0 {
			// A value of unknown rank may be a scalar at run time (a box
			// coordinate's maximum in a detector's NMS head), which the
			// ORT binding cannot return unless the output is declared
			// one. Its values, flattened to one dimension, are what the
			// statistics need, and a rank-1 output it can return.
			if flat == nil {
				t, err := graph.NewInt64Tensor(m.Graph.UniqueName("calibrate_flat_shape"), []int64{1}, []int64{-1})
				if err != nil {
					return err
				}
				if flat, err = m.Graph.AddInitializer(t); err != nil {
					return err
				}
			}
			fv, err := m.Graph.NewValue(m.Graph.UniqueName(v.Name + "_flat"))
			if err != nil {
				return err
			}
			fv.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("elements")})
			if v.Type != nil && v.Type.Elem != 0 {
				fv.Type.Elem = v.Type.Elem
			}
			if _, err := m.Graph.AddNode("Reshape", []*graph.Value{v, flat}, []*graph.Value{fv}); err != nil {
				return err
			}
			carrier[n] = fv.Name
			v = fv
		}
		if !seen[v] {
			seen[v] = true
			outs = append(outs, v)
		}
	}
	m.Graph.Outputs = outs
	if _, err := graph.Prune(m); err != nil {
		return fmt.Errorf("cut the model down to %d exposed values: %w", len(outs), err)
	}
	return nil
}

// Run runs group i's session on inputs and returns its values, in the
// group's order. With more than one group, what ORT freed after the run
// goes back to the system (ort.TrimMemory): each run's buffers are then
// made anew rather than piled up by the C allocator.
func (p *Parts) Run(i int, inputs []*graph.Tensor) ([]*graph.Tensor, error) {
	outs, err := p.sess[i].Run(inputs)
	if len(p.sess) > 1 {
		ort.TrimMemory()
	}
	if err != nil {
		return nil, err
	}
	vals := make([]*graph.Tensor, len(p.out[i]))
	for j, k := range p.out[i] {
		vals[j] = outs[k]
	}
	return vals, nil
}

// Close closes the sessions.
func (p *Parts) Close() {
	for _, s := range p.sess {
		s.Close()
	}
	p.sess = nil
}
