package prune

import (
	"fmt"
	"math"
)

// GPTQ is GPTQ's column loop (Frantar et al. 2023), shared by weightonly's
// low-bit codes and ptq's INT8 weights: wt is n×k row-major (one row per
// output), h the k×k Gram of the layer's inputs (changed: damped). Columns
// are quantized in order, round giving the value row[col] is stored as
// (it may read the row as updated so far, to choose a block's scale when
// it reaches the block's first column); the rounding error of each
// column, scaled by the inverse Gram's Cholesky factor, is taken out of
// the columns not yet quantized, which minimizes the change of the
// layer's output on the calibration inputs (the objective AdaRound
// optimizes by gradient descent, here solved greedily). A feature that is
// always zero carries no information: its weights are set to zero. On
// return wt holds the stored values.
func GPTQ(wt []float64, n, k int, h []float64, damp float64, round func(r, col int, row []float64) float64) error {
	for i := 0; i < k; i++ {
		if h[i*k+i] == 0 {
			h[i*k+i] = 1
			for r := 0; r < n; r++ {
				wt[r*k+i] = 0
			}
		}
	}
	dampen(h, k, damp)
	u, err := inverseUpperCholesky(h, k)
	if err != nil {
		return err
	}
	for col := 0; col < k; col++ {
		d := u[col*k+col]
		urow := u[col*k : col*k+k]
		for r := 0; r < n; r++ {
			row := wt[r*k : r*k+k]
			v := round(r, col, row)
			e := (row[col] - v) / d
			row[col] = v
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
			return fmt.Errorf("the update is not finite (an ill-conditioned input Gram)")
		}
	}
	return nil
}
