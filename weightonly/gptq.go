package weightonly

import "github.com/optc-dev/optc/prune"

// DefaultDamp is the fraction of the Gram diagonal's mean added to it
// before GPTQ inverts it (the value of the GPTQ paper).
const DefaultDamp = 0.01

// roundGPTQ is GPTQ (prune.GPTQ) with this package's blocks: wt is n×k
// (one row per output), h the k×k Gram of the layer's inputs. A block's
// scale and zero point are chosen (by min/max, as RTN does) when its
// first column is reached, from the weights as updated so far.
func roundGPTQ(wt []float64, n, k, blockSize int, lv levels, h []float64) ([]int, []blockParams, error) {
	nb := blocksOf(k, blockSize)
	q := make([]int, n*k)
	ps := make([]blockParams, n*nb)
	err := prune.GPTQ(wt, n, k, h, DefaultDamp, func(r, col int, row []float64) float64 {
		b := col / blockSize
		if col%blockSize == 0 {
			ps[r*nb+b] = lv.params(row[col:min(col+blockSize, k)])
		}
		p := ps[r*nb+b]
		c := lv.code(row[col], p)
		q[r*k+col] = c
		return p.value(c)
	})
	if err != nil {
		return nil, nil, err
	}
	return q, ps, nil
}
