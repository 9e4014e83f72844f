package prune

import "math"

// obsSelectMaxDim is the largest consumer input (features) for which
// chooseChannelsOBS inverts the Gram; above it (a Gemm reading a large
// flattened map) the cheaper covariance greedy (chooseChannels) is used.
const obsSelectMaxDim = 1536

// chooseChannelsOBS returns the channels to keep (ascending), removing
// removed of them, by group Optimal Brain Surgeon: the error a set S of
// input features leaves in a consumer's output after the best refit of
// the rest is Σ_rows W_S·[(H⁻¹)_SS]⁻¹·W_Sᵀ. Channels (blocks of span
// features) are removed greedily, each time the one whose removal adds the
// least error summed over consumers (each normalized by its output
// variance); after each removal W takes the compensating update and H⁻¹
// loses the channel, so that redundant channels (one a multiple of
// another) are told apart, which a criterion without refit cannot do.
// Ties go to the lower channel.
func chooseChannelsOBS(cs []*consumerStats, channels, removed int, damp float64) ([]int, error) {
	type state struct {
		c    *consumerStats
		n    int
		w    []float64 // rows×n, bias column last
		hinv []float64
		norm float64
	}
	var ss []*state
	for _, c := range cs {
		g := c.in.g
		n, dim, rows := g.n, c.in.p.dim, c.lay.rows
		h := append([]float64(nil), g.g...)
		for i := 0; i < n; i++ {
			if h[i*n+i] == 0 {
				h[i*n+i] = 1
			}
		}
		dampen(h, n, damp)
		l := append([]float64(nil), h...)
		if err := cholesky(l, n); err != nil {
			return nil, err
		}
		hinv := make([]float64, n*n)
		for i := 0; i < n; i++ {
			hinv[i*n+i] = 1
		}
		cholSolve(l, n, hinv, n)
		w := make([]float64, rows*n)
		for r := 0; r < rows; r++ {
			for j := 0; j < dim; j++ {
				w[r*n+j] = float64(c.w[c.lay.index(r, j)])
			}
		}
		// Output variance: Σ_rows w·Cov·wᵀ.
		mean := g.g[dim*n : dim*n+dim]
		norm := 0.0
		for r := 0; r < rows; r++ {
			wr := w[r*n : r*n+dim]
			for j, a := range wr {
				if a == 0 {
					continue
				}
				for k, b := range wr {
					norm += a * b * (g.g[j*n+k] - mean[j]*mean[k])
				}
			}
		}
		if !(norm > 0) {
			norm = 1
		}
		ss = append(ss, &state{c: c, n: n, w: w, hinv: hinv, norm: norm})
	}
	gone := make([]bool, channels)
	for range removed {
		best, bestErr := -1, math.Inf(1)
		for ch := 0; ch < channels; ch++ {
			if gone[ch] {
				continue
			}
			e := 0.0
			for _, s := range ss {
				e += blockError(s.w, s.hinv, s.n, s.c.lay.rows, ch*s.c.span, s.c.span) / s.norm
			}
			if e < bestErr {
				best, bestErr = ch, e
			}
		}
		if best < 0 {
			break
		}
		gone[best] = true
		for _, s := range ss {
			removeBlock(s.w, s.hinv, s.n, s.c.lay.rows, best*s.c.span, s.c.span)
		}
	}
	var keep []int
	for i, g := range gone {
		if !g {
			keep = append(keep, i)
		}
	}
	return keep, nil
}

// blockInverse returns [(H⁻¹)_SS]⁻¹ for S = [at, at+span), or nil when
// it is singular.
func blockInverse(hinv []float64, n, at, span int) []float64 {
	b := make([]float64, span*span)
	for i := 0; i < span; i++ {
		for j := 0; j < span; j++ {
			b[i*span+j] = hinv[(at+i)*n+at+j]
		}
	}
	l := append([]float64(nil), b...)
	if cholesky(l, span) != nil {
		return nil
	}
	inv := make([]float64, span*span)
	for i := 0; i < span; i++ {
		inv[i*span+i] = 1
	}
	cholSolve(l, span, inv, span)
	return inv
}

// blockError is Σ_rows W_S·[(H⁻¹)_SS]⁻¹·W_Sᵀ.
func blockError(w, hinv []float64, n, rows, at, span int) float64 {
	inv := blockInverse(hinv, n, at, span)
	if inv == nil {
		return math.Inf(1)
	}
	e := 0.0
	for r := 0; r < rows; r++ {
		ws := w[r*n+at : r*n+at+span]
		for i, a := range ws {
			for j, b := range ws {
				e += a * inv[i*span+j] * b
			}
		}
	}
	return e
}

// removeBlock applies the OBS update for removing S: W ← W − W_S·B·H⁻¹[S,:]
// and H⁻¹ ← H⁻¹ − H⁻¹[:,S]·B·H⁻¹[S,:], with B = [(H⁻¹)_SS]⁻¹.
func removeBlock(w, hinv []float64, n, rows, at, span int) {
	inv := blockInverse(hinv, n, at, span)
	if inv == nil {
		return
	}
	// t = B·H⁻¹[S,:] (span×n)
	t := make([]float64, span*n)
	for i := 0; i < span; i++ {
		for k := 0; k < span; k++ {
			if c := inv[i*span+k]; c != 0 {
				row := hinv[(at+k)*n : (at+k)*n+n]
				ti := t[i*n : i*n+n]
				for j, v := range row {
					ti[j] += c * v
				}
			}
		}
	}
	for r := 0; r < rows; r++ {
		wr := w[r*n : r*n+n]
		for i := 0; i < span; i++ {
			if c := wr[at+i]; c != 0 {
				ti := t[i*n : i*n+n]
				for j, v := range ti {
					wr[j] -= c * v
				}
			}
		}
	}
	col := make([]float64, n*span) // H⁻¹[:,S], copied before the update
	for j := 0; j < n; j++ {
		for i := 0; i < span; i++ {
			col[j*span+i] = hinv[j*n+at+i]
		}
	}
	for j := 0; j < n; j++ {
		hj := hinv[j*n : j*n+n]
		for i := 0; i < span; i++ {
			if c := col[j*span+i]; c != 0 {
				ti := t[i*n : i*n+n]
				for k, v := range ti {
					hj[k] -= c * v
				}
			}
		}
	}
}
