package prune

// obsProblem is one layer's OBS problem, in the layout's column order (the
// bias column last): the dense weights, what to prune, and whether to
// refit toward the unpruned outputs first. solve runs it on the Grams of
// some samples at one damping; chooseDamp picks the damping by the error
// on samples held out of the solve.
type obsProblem struct {
	lay     *layout
	cols    int
	dim     int // the patcher's features (the Gram's bias index)
	hasBias bool
	dense   []float64 // rows×cols, not changed
	keep    []bool
	ratio   float64
	nm      bool
	toward  bool // refit toward the unpruned outputs (towardUnpruned) first
}

// src is the Gram index of column j.
func (o *obsProblem) src(j int) int {
	if j == o.lay.cols {
		return o.dim
	}
	return o.lay.perm[j]
}

// hessian is g's Gram in column order, always-zero inputs given 1 (their
// weights are free), damped by damp of its mean diagonal.
func (o *obsProblem) hessian(g *gram, damp float64) []float64 {
	cols := o.cols
	h := make([]float64, cols*cols)
	for i := 0; i < cols; i++ {
		for j := 0; j < cols; j++ {
			h[i*cols+j] = g.g[o.src(i)*g.n+o.src(j)]
		}
	}
	for i := 0; i < cols; i++ {
		if h[i*cols+i] == 0 {
			h[i*cols+i] = 1
		}
	}
	dampen(h, cols, damp)
	return h
}

// solve returns the pruned weights (rows×cols) OBS gives on g at damp.
func (o *obsProblem) solve(g *gram, damp float64) ([]float64, error) {
	h := o.hessian(g, damp)
	mat := append([]float64(nil), o.dense...)
	if o.toward {
		if err := towardUnpruned(mat, o.lay, o.cols, h, g, o.dim, o.hasBias); err != nil {
			return nil, err
		}
	}
	if err := obsPrune(mat, o.lay.rows, o.cols, h, o.ratio, o.nm, o.keep); err != nil {
		return nil, err
	}
	return mat, nil
}

// heldOutError is the mean squared error of the layer's outputs with the
// pruned weights w′ against the unpruned layer's on the vectors of val:
// E‖W′x̃ − Wx‖² = tr(W′·G̃·W′ᵀ) − 2·tr(W′·C·Wᵀ) + tr(W·G·Wᵀ), with G̃ the
// Gram of the pruned model's inputs x̃, C = E[x̃·xᵀ] the cross Gram with
// the unpruned model's x and G = E[x·xᵀ]. Without a reference x̃ = x
// (C = G̃ = G) and this is tr(ΔW·G·ΔWᵀ), ΔW = W′ − W. With one, G is not
// collected; the last term does not depend on w′, so it is left out and
// the figure only ranks candidates.
func (o *obsProblem) heldOutError(wp []float64, val *gram) float64 {
	cols, n := o.cols, val.n
	cross := val.c
	if cross == nil {
		cross = val.g
	}
	e := 0.0
	gw := make([]float64, cols)
	cw := make([]float64, cols)
	for r := 0; r < o.lay.rows; r++ {
		a := wp[r*cols : r*cols+cols]
		b := o.dense[r*cols : r*cols+cols]
		for i := 0; i < cols; i++ {
			gi := val.g[o.src(i)*n:]
			ci := cross[o.src(i)*n:]
			sg, sc := 0.0, 0.0
			for j := 0; j < cols; j++ {
				sg += gi[o.src(j)] * a[j]
				sc += ci[o.src(j)] * b[j]
			}
			gw[i], cw[i] = sg, sc
		}
		for i := 0; i < cols; i++ {
			e += a[i]*gw[i] - 2*a[i]*cw[i]
		}
		if val.c == nil {
			for i := 0; i < cols; i++ {
				s := 0.0
				gi := val.g[o.src(i)*n:]
				for j := 0; j < cols; j++ {
					s += gi[o.src(j)] * b[j]
				}
				e += b[i] * s
			}
		}
	}
	return e
}

// chooseDamp solves on fit at each of damps and returns the one whose
// weights have the least error on val (the first on a tie).
func (o *obsProblem) chooseDamp(fit, val *gram, damps []float64) (float64, error) {
	best, bestErr := damps[0], 0.0
	for k, damp := range damps {
		wp, err := o.solve(fit, damp)
		if err != nil {
			return 0, err
		}
		if e := o.heldOutError(wp, val); k == 0 || e < bestErr {
			best, bestErr = damp, e
		}
	}
	return best, nil
}
