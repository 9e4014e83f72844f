package prune

import (
	"fmt"
	"math"
	"sort"
)

// obsBlock is how many columns SparseGPT treats at once: the mask of an
// unstructured block is chosen over the whole block, and the error of a
// block is carried to the columns after it in one product.
const obsBlock = 128

// obsPrune is SparseGPT (Frantar & Alistarh 2023), the blockwise form of
// Optimal Brain Surgeon: w is rows×cols (row-major; one row per output),
// h the cols×cols Gram of the layer's inputs (H = XᵀX / n, already
// damped). Columns are visited in order; each column's masked weights are
// zeroed and the error they make, scaled by the inverse Hessian's
// Cholesky factor, is spread over the columns not yet visited, so that the
// layer's output on the calibration data changes as little as it can.
//
// With nm (2:4), every group of 4 consecutive columns keeps the 2 weights
// of each row with the largest w²/[H⁻¹]ᵢᵢ; otherwise each block of
// columns loses the fraction sparsity of its weights, smallest w²/[H⁻¹]ᵢᵢ
// first. keep[j] marks columns never pruned (the bias column); they only
// absorb error. Ties go to the lower index, so the result is deterministic.
func obsPrune(w []float64, rows, cols int, h []float64, sparsity float64, nm bool, keep []bool) error {
	u, err := inverseUpperCholesky(h, cols)
	if err != nil {
		return err
	}
	mask := make([]bool, rows*obsBlock)
	errs := make([]float64, rows*obsBlock)
	for i1 := 0; i1 < cols; i1 += obsBlock {
		i2 := min(i1+obsBlock, cols)
		count := i2 - i1
		clear(mask)
		if !nm {
			blockMask(w, rows, cols, u, i1, i2, sparsity, keep, mask)
		}
		for i := 0; i < count; i++ {
			col := i1 + i
			d := u[col*cols+col]
			if nm && i%4 == 0 && !keep[col] {
				for r := 0; r < rows; r++ {
					groupMask(w[r*cols+col:r*cols+col+4], u, cols, col, mask[r*obsBlock+i:r*obsBlock+i+4])
				}
			}
			for r := 0; r < rows; r++ {
				row := w[r*cols : r*cols+cols]
				q := row[col]
				if mask[r*obsBlock+i] {
					q = 0
				}
				e := (row[col] - q) / d
				row[col] = q
				errs[r*obsBlock+i] = e
				if e == 0 {
					continue
				}
				urow := u[col*cols : col*cols+cols]
				for j := col + 1; j < i2; j++ {
					row[j] -= e * urow[j]
				}
			}
		}
		// The block's error, carried to every later column at once.
		for r := 0; r < rows; r++ {
			row := w[r*cols : r*cols+cols]
			for i := 0; i < count; i++ {
				e := errs[r*obsBlock+i]
				if e == 0 {
					continue
				}
				urow := u[(i1+i)*cols : (i1+i)*cols+cols]
				for j := i2; j < cols; j++ {
					row[j] -= e * urow[j]
				}
			}
		}
		clear(errs)
	}
	for _, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("the update is not finite (an ill-conditioned input Gram)")
		}
	}
	return nil
}

// blockMask marks, in columns [i1, i2), the fraction sparsity of all
// weights with the smallest w²/U[j][j]².
func blockMask(w []float64, rows, cols int, u []float64, i1, i2 int, sparsity float64, keep []bool, mask []bool) {
	type cand struct {
		score float64
		idx   int // r*obsBlock + i
	}
	var cs []cand
	for r := 0; r < rows; r++ {
		for j := i1; j < i2; j++ {
			if keep[j] {
				continue
			}
			d := u[j*cols+j]
			v := w[r*cols+j]
			cs = append(cs, cand{v * v / (d * d), r*obsBlock + j - i1})
		}
	}
	k := int(math.Floor(sparsity*float64(len(cs)) + 1e-9))
	sort.Slice(cs, func(a, b int) bool {
		if cs[a].score != cs[b].score {
			return cs[a].score < cs[b].score
		}
		return cs[a].idx < cs[b].idx
	})
	for _, c := range cs[:k] {
		mask[c.idx] = true
	}
}

// groupMask marks the 2 of 4 weights g (columns col..col+3 of one row)
// with the smallest w²/U[j][j]².
func groupMask(g []float64, u []float64, cols, col int, mask []bool) {
	var s [4]float64
	for k := range s {
		d := u[(col+k)*cols+col+k]
		s[k] = g[k] * g[k] / (d * d)
	}
	idx := []int{0, 1, 2, 3}
	sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] < s[idx[b]] })
	mask[idx[0]], mask[idx[1]] = true, true
}
