package weightonly

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/prune"
)

// DefaultDamp is the fraction of the Gram diagonal's mean added to it
// before GPTQ inverts it (the value of the GPTQ paper).
const DefaultDamp = 0.01

// roundGPTQ is GPTQ (Frantar et al. 2023): wt is n×k (one row per
// output), h the k×k Gram of the layer's inputs. Columns are quantized in
// order; the rounding error of each column, scaled by the inverse Gram's
// Cholesky factor, is taken out of the columns not yet quantized, which
// minimizes the change of the layer's output on the calibration inputs.
// A block's scale and zero point are chosen (by min/max, as RTN does)
// when its first column is reached, from the weights as updated so far.
// The same column-by-column update drives prune's OBS pruning; the
// factor comes from prune's linear algebra.
func roundGPTQ(wt []float64, n, k, blockSize int, lv levels, h []float64) ([]int, []blockParams, error) {
	// A feature that is always zero carries no information: its weights
	// may take any value, so they are set to zero and the Gram made
	// regular there.
	for i := 0; i < k; i++ {
		if h[i*k+i] == 0 {
			h[i*k+i] = 1
			for r := 0; r < n; r++ {
				wt[r*k+i] = 0
			}
		}
	}
	prune.Dampen(h, k, DefaultDamp)
	u, err := prune.InverseUpperCholesky(h, k)
	if err != nil {
		return nil, nil, err
	}
	nb := blocksOf(k, blockSize)
	q := make([]int, n*k)
	ps := make([]blockParams, n*nb)
	for col := 0; col < k; col++ {
		b := col / blockSize
		d := u[col*k+col]
		urow := u[col*k : col*k+k]
		for r := 0; r < n; r++ {
			row := wt[r*k : r*k+k]
			if col%blockSize == 0 {
				ps[r*nb+b] = lv.params(row[col:min(col+blockSize, k)])
			}
			p := ps[r*nb+b]
			c := lv.code(row[col], p)
			q[r*k+col] = c
			e := (row[col] - p.value(c)) / d
			if e == 0 {
				continue
			}
			for j := col + 1; j < k; j++ {
				row[j] -= e * urow[j]
			}
		}
	}
	for _, v := range wt {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("the update is not finite (an ill-conditioned input Gram)")
		}
	}
	return q, ps, nil
}
