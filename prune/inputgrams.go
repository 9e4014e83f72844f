package prune

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// The pieces of OBS other data-driven weight methods share (weightonly's
// GPTQ): the input Gram of a layer collected in ORT, and the inverse
// Cholesky factor its column-by-column updates need.

// InputGrams runs m over the calibration data in ORT, once, and returns
// for each node (a Conv of group 1, a Gemm without transA or a MatMul with
// a constant 2-D weight) the mean Gram E[x·xᵀ] of the vectors its weight
// multiplies, dim×dim row-major (dim: the weight's input features).
func (d *Data) InputGrams(m *graph.Model, nodes []*graph.Node) ([][]float64, error) {
	layers := make([]*layerInput, len(nodes))
	for i, n := range nodes {
		w := n.Input(1)
		if w == nil || w.Const == nil {
			return nil, fmt.Errorf("%s has no constant weight", n)
		}
		p, err := newPatcher(n, w.Const.Dims)
		if err != nil {
			return nil, err
		}
		layers[i] = &layerInput{name: n.Name, value: n.Input(0).Name, p: p}
	}
	if err := d.inputGrams(m, nil, layers); err != nil {
		return nil, err
	}
	hs := make([][]float64, len(layers))
	for i, l := range layers {
		n, full := l.p.dim, l.g.n
		h := make([]float64, n*n)
		for r := 0; r < n; r++ {
			copy(h[r*n:r*n+n], l.g.g[r*full:r*full+n])
		}
		hs[i] = h
	}
	return hs, nil
}

// InverseUpperCholesky returns U, upper triangular, with a⁻¹ = Uᵀ·U (a is
// n×n symmetric positive definite, row-major, not changed).
func InverseUpperCholesky(a []float64, n int) ([]float64, error) { return inverseUpperCholesky(a, n) }

// Dampen adds frac times the mean of a's diagonal to the diagonal.
func Dampen(a []float64, n int, frac float64) { dampen(a, n, frac) }
