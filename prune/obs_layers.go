package prune

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// OBS prunes like Magnitude (magnitude:S, scope layer) or SemiStructured
// (2:4), but chooses each layer's mask and updates the weights it keeps
// from the calibration data: the Gram H = XᵀX of the layer's input
// vectors (im2col patches for convs), collected in ONNX Runtime on the
// model as pruned so far, layer by layer in graph order, drives SparseGPT
// (obsPrune). The layer's bias absorbs error too (a bias is added to a
// Conv or Gemm without one when it changes). Layers are skipped for the
// same reasons as the plain methods; a layer OBS cannot handle (a shared
// weight, a grouped conv, a subgraph) is pruned by magnitude and says why
// in Layer.Refit.
func OBS(m *graph.Model, meth Method, opts Options, d *Data) (*schema.PruneReport, error) {
	nm := meth.Kind == "2:4"
	if !nm && meth.Kind != "magnitude" {
		return nil, fmt.Errorf("OBS pruning is for magnitude:S and 2:4, not %s", meth)
	}
	if !nm {
		if err := checkRatio(meth.Ratio, "magnitude"); err != nil {
			return nil, err
		}
		if opts.Scope == ScopeGlobal {
			return nil, fmt.Errorf("magnitude pruning with calibration data is per layer: --prune-scope global has no data-driven form")
		}
	}
	rep := &schema.PruneReport{Method: meth.String(), ParamsBefore: totalParams(m)}
	unpruned, err := m.Clone()
	if err != nil {
		return nil, err
	}
	var totals sparsityTotals
	changed := false // a layer before this one changed: the inputs differ
	for _, w := range findWeights(m) {
		var ref *graph.Model
		if changed {
			ref = unpruned
		}
		l := w.layer()
		l.Ratio = meth.Ratio
		if nm {
			l.Ratio = 0.5
		}
		if l.Skipped = commonSkip(w, opts); l.Skipped != "" {
			rep.Layers = append(rep.Layers, l)
			continue
		}
		axis := 0
		if nm {
			var skip string
			if axis, skip = reduction24(w); skip != "" {
				l.Skipped = skip
				rep.Layers = append(rep.Layers, l)
				continue
			}
		} else if r, ok := perLayerRatio(w, opts); ok {
			l.Ratio = r
		}
		vals, err := w.tensor.Float32s()
		if err != nil {
			return nil, fmt.Errorf("weight %q: %w", w.value.Name, err)
		}
		l.Before = fraction(countZeros(vals), l.Params)
		if l.Ratio > 0 {
			refit, damp, err := obsLayer(m, ref, w, l.Ratio, nm, d)
			l.Damp = damp
			changed = changed || refit == "obs"
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", w.node.Name, err)
			}
			if refit != "obs" {
				// The plain method, for what OBS cannot handle.
				plain := false
				if nm {
					plain = apply24(vals, w.tensor.Dims, axis)
				} else {
					plain = zeroSmallest(vals, exactCount(l.Ratio, int64(len(vals))))
				}
				changed = changed || plain
				if plain {
					if err := replaceWeight(w, vals); err != nil {
						return nil, err
					}
				}
			}
			l.Refit = refit
			if vals, err = w.tensor.Float32s(); err != nil {
				return nil, err
			}
		}
		totals.after(&l, vals)
		rep.Layers = append(rep.Layers, l)
	}
	totals.finish(rep, m)
	return rep, nil
}

// obsLayer prunes one weight with SparseGPT and returns "obs", or, when it
// cannot, leaves the weight alone and returns why ("none: ...").
// It also returns the damping used.
func obsLayer(m, ref *graph.Model, w *weight, ratio float64, nm bool, d *Data) (string, float64, error) {
	n := w.node
	if len(w.nodes) > 1 {
		return "none: the weight is shared by several layers", 0, nil
	}
	if n.Graph() != m.Graph {
		return "none: the layer is in a subgraph", 0, nil
	}
	p, err := newPatcher(n, w.tensor.Dims)
	if err != nil {
		return "none: " + err.Error(), 0, nil
	}
	lay, err := newLayout(n, w.tensor.Dims, p, true)
	if err != nil {
		return "none: " + err.Error(), 0, nil
	}
	li := &layerInput{name: n.Name, value: n.Input(0).Name, p: p, holdout: d.AutoDamp}
	if err := d.inputGrams(m, ref, []*layerInput{li}); err != nil {
		return "", 0, err
	}
	bias, hasBias, err := readBias(n, lay.rows)
	if err != nil {
		return "none: " + err.Error(), 0, nil
	}
	cols := lay.cols
	if hasBias {
		cols++
	}
	vals, err := w.tensor.Float32s()
	if err != nil {
		return "", 0, err
	}
	// The dense weights, in the layout's column order, the bias last.
	dense := make([]float64, lay.rows*cols)
	for r := 0; r < lay.rows; r++ {
		for j := 0; j < lay.cols; j++ {
			dense[r*cols+j] = float64(vals[lay.index(r, j)])
		}
		if hasBias {
			dense[r*cols+lay.cols] = float64(bias[r])
		}
	}
	keep := make([]bool, cols)
	if hasBias {
		keep[lay.cols] = true
	}
	o := &obsProblem{lay: lay, cols: cols, dim: p.dim, hasBias: hasBias, dense: dense, keep: keep, ratio: ratio, nm: nm}
	all := li.g
	if li.val != nil {
		all = merged(li.g, li.val)
	}
	// Refit toward the unpruned outputs only where the data determines
	// the fit: with fewer vectors than features (a Gemm reading a large
	// flattened map, one vector per sample) it fits the calibration
	// samples and loses accuracy elsewhere. Decided on all the samples,
	// so that every damping tried solves the same problem.
	o.toward = all.c != nil && all.rows >= minRowsPerFeature*int64(cols)
	damp := d.damp()
	if li.val != nil && li.val.rows > 0 && li.g.rows > 0 {
		if damp, err = o.chooseDamp(li.g, li.val, AutoDamps); err != nil {
			return "", 0, err
		}
	}
	mat, err := o.solve(all, damp)
	if err != nil {
		return "", 0, err
	}
	for r := 0; r < lay.rows; r++ {
		for j := 0; j < lay.cols; j++ {
			vals[lay.index(r, j)] = float32(mat[r*cols+j])
		}
		if hasBias {
			bias[r] = float32(mat[r*cols+lay.cols])
		}
	}
	if err := replaceWeight(w, vals); err != nil {
		return "", 0, err
	}
	if hasBias {
		if err := setBias(m.Graph, n, bias); err != nil {
			return "", 0, err
		}
	}
	return "obs", damp, nil
}

// layout maps a weight tensor to the rows×cols matrix the data-driven
// methods work on: one row per output, one column per input feature, in
// an order where a 2:4 group (4 consecutive input channels at one kernel
// position) is 4 consecutive columns when for24, else the patch vector's
// order. perm[j] is column j's feature in the patch vector (patcher order).
type layout struct {
	rows, cols int
	perm       []int
	index      func(r, j int) int // element of the weight tensor
}

func newLayout(n *graph.Node, dims []int64, p *patcher, for24 bool) (*layout, error) {
	switch weightOp(n) {
	case "Conv":
		m, c, kk := int(dims[0]), int(dims[1]), int(dims[2]*dims[3])
		l := &layout{rows: m, cols: c * kk, perm: make([]int, c*kk)}
		for k := 0; k < kk; k++ {
			for ch := 0; ch < c; ch++ {
				if for24 {
					l.perm[k*c+ch] = ch*kk + k
				} else {
					l.perm[ch*kk+k] = ch*kk + k
				}
			}
		}
		if c*kk != p.dim {
			return nil, fmt.Errorf("%s reads %d features, its weight has %d", n, p.dim, c*kk)
		}
		l.index = func(r, j int) int { return r*c*kk + l.perm[j] }
		return l, nil
	case "Gemm", "MatMul":
		trans := weightOp(n) == "Gemm" && n.AttrInt("transB", 0) != 0
		k, nOut := int(dims[0]), int(dims[1])
		if trans {
			k, nOut = nOut, k
		}
		if k != p.dim {
			return nil, fmt.Errorf("%s reads %d features, its weight has %d", n, p.dim, k)
		}
		l := &layout{rows: nOut, cols: k, perm: make([]int, k)}
		for j := range l.perm {
			l.perm[j] = j
		}
		if trans {
			l.index = func(r, j int) int { return r*k + j }
		} else {
			l.index = func(r, j int) int { return j*nOut + r }
		}
		return l, nil
	}
	return nil, fmt.Errorf("%s is not reconstructed", n)
}

// readBias returns n's per-output bias (zeros when it has none and can
// take one), and whether the data-driven methods may rewrite it: Conv
// input 2, Gemm C of shape [N] or [1, N] with alpha = beta = 1. MatMul has
// none.
func readBias(n *graph.Node, rows int) ([]float32, bool, error) {
	switch weightOp(n) {
	case "Conv":
		if n.Domain != "" {
			return nil, false, nil
		}
	case "Gemm":
		if n.AttrFloat("alpha", 1) != 1 || n.AttrFloat("beta", 1) != 1 {
			return nil, false, nil
		}
	default:
		return nil, false, nil
	}
	b := n.Input(2)
	if b == nil {
		return make([]float32, rows), true, nil
	}
	t := float32Const(b)
	if t == nil {
		return nil, false, nil
	}
	if k, _ := t.NumElements(); k != int64(rows) || len(t.Dims) > 2 || len(t.Dims) == 2 && t.Dims[0] != 1 {
		return nil, false, nil
	}
	f, err := t.Float32s()
	return f, err == nil, err
}

// setBias gives n the bias vals (input 2), creating it when n has none.
func setBias(g *graph.Graph, n *graph.Node, vals []float32) error {
	dims := []int64{int64(len(vals))}
	if old := n.Input(2); old != nil {
		dims = old.ConstantTensor().Dims
	}
	return setConstInput(g, n, 2, dims, vals)
}

// setConstInput gives input i of n the float32 constant vals of dims: in
// place when its initializer is read by n alone, else as a new
// initializer (named after the old one, or after n).
func setConstInput(g *graph.Graph, n *graph.Node, i int, dims []int64, vals []float32) error {
	old := n.Input(i)
	if old != nil && old.Const != nil && len(old.Uses()) == 1 && !old.IsReturned() {
		t, err := graph.NewFloat32Tensor(old.Const.Name, dims, vals)
		if err != nil {
			return err
		}
		old.Const = t
		return nil
	}
	name := fmt.Sprintf("%s_input%d", n.Name, i)
	if old != nil {
		name = old.Name
	}
	t, err := graph.NewFloat32Tensor(g.UniqueName(name), dims, vals)
	if err != nil {
		return err
	}
	v, err := g.AddInitializer(t)
	if err != nil {
		return err
	}
	n.SetInput(i, v)
	return nil
}

// minRowsPerFeature is how many input vectors per feature a layer needs
// before OBS refits it toward the unpruned outputs.
const minRowsPerFeature = 4

// towardUnpruned replaces mat (rows×cols, the layout's columns then the
// bias) by the solution of (H̃ + Λ)·W′ᵀ = C·Wᵀ + Λ·Wᵀ, h = H̃ + Λ being the
// damped Gram in the same order (Λ diagonal: the damping, and 1 on inputs
// that are always zero) and g.c the cross Gram Σ x̃·xᵀ: the dense weights
// whose outputs on the pruned model's inputs best match the unpruned
// model's outputs, kept as they are where the data says nothing.
func towardUnpruned(mat []float64, lay *layout, cols int, h []float64, g *gram, dim int, hasBias bool) error {
	src := func(j int) int {
		if j == lay.cols {
			return dim
		}
		return lay.perm[j]
	}
	rows := lay.rows
	rhs := make([]float64, cols*rows)
	for i := 0; i < cols; i++ {
		crow := g.c[src(i)*g.n : src(i)*g.n+g.n]
		// What h adds to H̃ on this feature (the damping, or all of it for
		// an input that is always zero) pulls toward the weight as it is.
		prior := h[i*cols+i] - g.g[src(i)*g.n+src(i)]
		for r := 0; r < rows; r++ {
			s := prior * mat[r*cols+i]
			for j := 0; j < cols; j++ {
				s += crow[src(j)] * mat[r*cols+j]
			}
			rhs[i*rows+r] = s
		}
	}
	l := append([]float64(nil), h...)
	if err := cholesky(l, cols); err != nil {
		return err
	}
	cholSolve(l, cols, rhs, rows)
	for r := 0; r < rows; r++ {
		for i := 0; i < cols; i++ {
			mat[r*cols+i] = rhs[i*rows+r]
		}
	}
	return nil
}
