package prune

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/report/schema"
)

// Magnitude zeroes the smallest-magnitude weights of every Conv,
// ConvTranspose, Gemm and MatMul whose weight (input 1) is a constant
// float32 tensor, an initializer or a Constant node.
//
// With Scope "layer" (the default) each layer loses exactly
// floor(ratio*n) of its n weights, the smallest |w| first, ties broken by
// index; PerLayer overrides the ratio of the nodes (or weights) it names.
// With Scope "global" one ranking over all prunable weights zeroes
// floor(ratio*N) of their N elements, so layers end up with different
// sparsities; layers named in PerLayer are pruned on their own to their
// ratio and left out of the global ranking.
//
// Weights with fewer than MinElements elements (default 1024; negative
// for no minimum), depthwise convs, excluded nodes or weights, and weights
// read by anything else than a weight op are left alone and reported with
// the reason. A weight shared by several nodes is pruned once. Pruned
// weights get new tensors; the loaded data is never written. Nothing is
// replaced when nothing changes, so ratio 0 leaves the model as it was.
func Magnitude(m *graph.Model, ratio float64, opts Options) (*schema.PruneReport, error) {
	if err := checkRatio(ratio, "magnitude"); err != nil {
		return nil, err
	}
	for name, r := range opts.PerLayer {
		if err := checkRatio(r, "per-layer ratio of "+name); err != nil {
			return nil, err
		}
	}
	scope := opts.Scope
	if scope == "" {
		scope = ScopeLayer
	}
	if !slices.Contains(Scopes, scope) {
		return nil, fmt.Errorf("prune scope %q: want %s", opts.Scope, choice.Or(Scopes))
	}
	rep := &schema.PruneReport{Method: Method{Kind: "magnitude", Ratio: ratio}.String(), ParamsBefore: totalParams(m)}

	type job struct {
		w      *weight
		layer  int // index in rep.Layers
		vals   []float32
		ratio  float64
		own    bool // pruned to its own ratio even in global scope
		offset int64
	}
	var jobs []*job
	for _, w := range findWeights(m) {
		l := w.layer()
		l.Ratio = ratio
		if l.Skipped = commonSkip(w, opts); l.Skipped != "" {
			rep.Layers = append(rep.Layers, l)
			continue
		}
		vals, err := w.tensor.Float32s()
		if err != nil {
			return nil, fmt.Errorf("weight %q: %w", w.value.Name, err)
		}
		j := &job{w: w, layer: len(rep.Layers), vals: vals, ratio: ratio}
		if r, ok := perLayerRatio(w, opts); ok {
			j.ratio, j.own = r, true
		}
		l.Ratio = j.ratio
		l.Before = fraction(countZeros(vals), l.Params)
		rep.Layers = append(rep.Layers, l)
		jobs = append(jobs, j)
	}

	changed := make([]bool, len(jobs))
	var pool []*job // the global ranking
	for i, j := range jobs {
		if scope == ScopeGlobal && !j.own {
			pool = append(pool, j)
			continue
		}
		changed[i] = zeroSmallest(j.vals, exactCount(j.ratio, int64(len(j.vals))))
	}
	if len(pool) > 0 {
		var total int64
		for _, j := range pool {
			j.offset = total
			total += int64(len(j.vals))
		}
		if total > math.MaxUint32 {
			return nil, fmt.Errorf("global magnitude pruning handles at most %d weights, the model has %d", uint64(math.MaxUint32), total)
		}
		keys := make([]uint64, 0, total)
		for _, j := range pool {
			for i, v := range j.vals {
				keys = append(keys, magnitudeKey(v, j.offset+int64(i)))
			}
		}
		slices.Sort(keys)
		poolChanged := make([]bool, len(pool))
		for _, k := range keys[:exactCount(ratio, total)] {
			at := int64(k & math.MaxUint32)
			p := sort.Search(len(pool), func(i int) bool { return pool[i].offset > at }) - 1
			j := pool[p]
			if v := &j.vals[at-j.offset]; *v != 0 {
				*v = 0
				poolChanged[p] = true
			}
		}
		p := 0
		for i, j := range jobs {
			if p < len(pool) && pool[p] == j {
				changed[i] = poolChanged[p]
				p++
			}
		}
	}

	var totals sparsityTotals
	for i, j := range jobs {
		if changed[i] {
			if err := replaceWeight(j.w, j.vals); err != nil {
				return nil, err
			}
		}
		totals.after(&rep.Layers[j.layer], j.vals)
	}
	totals.finish(rep, m)
	return rep, nil
}

func checkRatio(r float64, what string) error {
	if !(r >= 0 && r < 1) {
		return fmt.Errorf("%s: ratio %g is not in [0, 1)", what, r)
	}
	return nil
}

// perLayerRatio is the PerLayer ratio for w: by one of its nodes' names,
// else by the weight's name.
func perLayerRatio(w *weight, opts Options) (float64, bool) {
	for _, n := range w.nodes {
		if r, ok := opts.PerLayer[n.Name]; ok {
			return r, true
		}
	}
	r, ok := opts.PerLayer[w.value.Name]
	return r, ok
}

// exactCount is floor(ratio*n), forgiving the rounding error of the
// product (0.29*100 is 28.999999999999996).
func exactCount(ratio float64, n int64) int64 {
	k := int64(math.Floor(ratio*float64(n) + 1e-9))
	return min(max(k, 0), n)
}

// magnitudeKey orders weights by |v|, then by index i (< 2^32): the bits of
// a non-negative float32 order like the numbers, and NaN sorts above
// infinity, so it is never among the smallest.
func magnitudeKey(v float32, i int64) uint64 {
	return uint64(math.Float32bits(v)&0x7fffffff)<<32 | uint64(i)
}

// zeroSmallest zeroes the k smallest-|v| elements of vals (ties: the lower
// index first) and reports whether any element changed.
func zeroSmallest(vals []float32, k int64) bool {
	if k == 0 {
		return false
	}
	keys := make([]uint64, len(vals))
	for i, v := range vals {
		keys[i] = magnitudeKey(v, int64(i))
	}
	slices.Sort(keys)
	changed := false
	for _, key := range keys[:k] {
		if v := &vals[key&math.MaxUint32]; *v != 0 {
			*v = 0
			changed = true
		}
	}
	return changed
}
