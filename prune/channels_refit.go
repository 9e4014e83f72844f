package prune

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// chooseChannels returns the channels to keep (ascending) of a group of
// channels read by the consumers cs, removing removed of them.
//
// Removing a set S of channels from a consumer's input changes its output
// by −Σ_{c∈S} W_c·x_c; with the mean absorbed by the bias, the expected
// squared change is Σ_{c,d∈S} A[c][d] with A[c][d] = Σ W_c∘Cov_cd∘W_d
// summed over outputs (Cov: the covariance of the input features of
// channels c and d). A is normalized per consumer by its output variance
// and summed over consumers; channels are removed greedily, each time the
// one that adds least (ThiNet's greedy, with pairs counted). Ties go to
// the lower channel.
func chooseChannels(cs []*consumerStats, channels, removed int) []int {
	a := make([]float64, channels*channels)
	for _, c := range cs {
		addContribution(a, channels, c)
	}
	inc := make([]float64, channels)
	for i := range inc {
		inc[i] = a[i*channels+i]
	}
	gone := make([]bool, channels)
	for range removed {
		best := -1
		for i := range inc {
			if !gone[i] && (best < 0 || inc[i] < inc[best]) {
				best = i
			}
		}
		gone[best] = true
		for i := range inc {
			inc[i] += 2 * a[i*channels+best]
		}
	}
	var keep []int
	for i, g := range gone {
		if !g {
			keep = append(keep, i)
		}
	}
	return keep
}

// addContribution adds consumer c's normalized A (see chooseChannels).
func addContribution(a []float64, channels int, c *consumerStats) {
	g := c.in.g
	n, dim := g.n, c.in.p.dim
	rows := c.lay.rows
	mean := g.g[dim*n : dim*n+dim] // the row of the trailing 1: E[x]
	// U = WᵀW over the outputs.
	u := make([]float64, dim*dim)
	col := make([]float64, rows)
	for j := 0; j < dim; j++ {
		for r := 0; r < rows; r++ {
			col[r] = float64(c.w[c.lay.index(r, j)])
		}
		for k := j; k < dim; k++ {
			s := 0.0
			for r := 0; r < rows; r++ {
				s += col[r] * float64(c.w[c.lay.index(r, k)])
			}
			u[j*dim+k], u[k*dim+j] = s, s
		}
	}
	local := make([]float64, channels*channels)
	total := 0.0
	for j := 0; j < dim; j++ {
		cj := j / c.span
		for k := 0; k < dim; k++ {
			v := u[j*dim+k] * (g.g[j*n+k] - mean[j]*mean[k])
			local[cj*channels+k/c.span] += v
			total += v
		}
	}
	if !(total > 0) {
		return
	}
	for i := range local {
		a[i] += local[i] / total
	}
}

// refitConsumer solves for c's new weights (and bias) over the kept
// channels after slicing, and writes them into the graph:
//
//	(G̃_KK + λI)·Θ = C_K·[W b]ᵀ + λ·[W_K b]ᵀ
//
// with G̃ the Gram of the pruned model's input vectors, C their cross Gram
// with the unpruned ones (G̃ itself when nothing before this group
// changed), K the kept features plus the trailing 1 (when the bias can be
// rewritten).
func refitConsumer(g *graph.Graph, c *consumerStats, keep []int, damp float64) error {
	st := c.in.g
	n, dim := st.n, c.in.p.dim
	cross := st.c
	if cross == nil {
		cross = st.g
	}
	bias, hasBias, err := readBias(c.node, c.lay.rows)
	if err != nil {
		return err
	}
	var feats []int
	for _, ch := range keep {
		for k := 0; k < c.span; k++ {
			feats = append(feats, ch*c.span+k)
		}
	}
	kept := len(feats)
	if hasBias {
		feats = append(feats, dim)
	}
	k := len(feats)
	rows := c.lay.rows
	// The original weights with the bias as a last column: [W b], rows×n.
	wa := make([]float64, rows*n)
	for r := 0; r < rows; r++ {
		for j := 0; j < dim; j++ {
			wa[r*n+j] = float64(c.w[c.lay.index(r, j)])
		}
		if hasBias {
			wa[r*n+dim] = float64(bias[r])
		}
	}
	h := make([]float64, k*k)
	for i, fi := range feats {
		for j, fj := range feats {
			h[i*k+j] = st.g[fi*n+fj]
		}
	}
	for i := 0; i < k; i++ {
		if h[i*k+i] == 0 {
			h[i*k+i] = 1e-12
		}
	}
	lambda := 0.0
	for i := 0; i < k; i++ {
		lambda += h[i*k+i]
	}
	lambda = damp * lambda / float64(k)
	for i := 0; i < k; i++ {
		h[i*k+i] += lambda
	}
	// Right-hand side, k×rows.
	rhs := make([]float64, k*rows)
	for i, fi := range feats {
		crow := cross[fi*n : fi*n+n]
		if !hasBias {
			crow = crow[:dim]
		}
		for r := 0; r < rows; r++ {
			w := wa[r*n : r*n+len(crow)]
			s := 0.0
			for j, v := range crow {
				s += v * w[j]
			}
			rhs[i*rows+r] = s + lambda*wa[r*n+fi]
		}
	}
	if err := cholesky(h, k); err != nil {
		return err
	}
	cholSolve(h, k, rhs, rows)
	// Write W′ into the sliced weight (kept channels in ascending order,
	// the layout's feature order within) and b′.
	t := c.node.Input(1).ConstantTensor()
	if t == nil {
		return fmt.Errorf("%s: the weight is no longer constant", c.node)
	}
	vals, err := t.Float32s()
	if err != nil {
		return err
	}
	vals = slices.Clone(vals)
	lay, err := newLayout(c.node, t.Dims, &patcher{dim: kept}, false)
	if err != nil {
		return err
	}
	if lay.rows != rows || lay.cols != kept {
		return fmt.Errorf("%s: sliced weight %v does not hold %d×%d", c.node, t.Dims, rows, kept)
	}
	for r := 0; r < rows; r++ {
		for i := 0; i < kept; i++ {
			vals[lay.index(r, i)] = float32(rhs[i*rows+r])
		}
		if hasBias {
			bias[r] = float32(rhs[kept*rows+r])
		}
	}
	if err := setConstInput(g, c.node, 1, t.Dims, vals); err != nil {
		return err
	}
	if hasBias {
		return setBias(g, c.node, bias)
	}
	return nil
}
