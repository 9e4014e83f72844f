package kernels

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// matMulKernel multiplies as numpy.matmul does: 1-D operands are promoted
// to matrices and the added axis removed, batch axes broadcast. Float
// sums accumulate in float64.
func matMulKernel(c *call) ([]*graph.Tensor, error) {
	a, b, err := c.samePair()
	if err != nil {
		return nil, err
	}
	k := kindOf(a.DType)
	if k != kindFloat && k != kindInt {
		return nil, c.unsupported("%s inputs", a.DType)
	}
	if len(a.Dims) == 0 || len(b.Dims) == 0 {
		return nil, c.invalid("scalar operand")
	}
	da, db := a.Dims, b.Dims
	if len(da) == 1 {
		da = []int64{1, da[0]}
	}
	if len(db) == 1 {
		db = []int64{db[0], 1}
	}
	m, kk := da[len(da)-2], da[len(da)-1]
	n := db[len(db)-1]
	if db[len(db)-2] != kk {
		return nil, c.invalid("shapes %v and %v do not multiply", a.Dims, b.Dims)
	}
	batch, err := broadcast(da[:len(da)-2], db[:len(db)-2])
	if err != nil {
		return nil, c.invalid("%v", err)
	}
	dims := slices.Clone(batch)
	if len(a.Dims) > 1 {
		dims = append(dims, m)
	}
	if len(b.Dims) > 1 {
		dims = append(dims, n)
	}
	if err := c.reserve(a.DType, dims); err != nil {
		return nil, err
	}
	ia := broadcastIndex(da[:len(da)-2], batch)
	ib := broadcastIndex(db[:len(db)-2], batch)
	if k == kindFloat {
		return one(matMulValues(floatValues, a, b, dims, ia, ib, int(m), int(kk), int(n)))
	}
	return one(matMulValues(intValues, a, b, dims, ia, ib, int(m), int(kk), int(n)))
}

// matMulValues multiplies a and b, read as T, into a tensor of dims (see
// mulBatches for the rest).
func matMulValues[T float64 | int64](vs values[T], a, b *graph.Tensor, dims []int64, ia, ib []int, m, k, n int) (*graph.Tensor, error) {
	x, y, err := both(vs.read, a, b)
	if err != nil {
		return nil, err
	}
	out := make([]T, count(dims))
	mulBatches(x, y, out, ia, ib, m, k, n)
	return vs.write(a.DType, dims, out)
}

// mulBatches multiplies the m×k matrices of x by the k×n matrices of y,
// batch i reading x's batch ia[i] and y's ib[i].
func mulBatches[T float64 | int64](x, y, out []T, ia, ib []int, m, k, n int) {
	for bi := range ia {
		xa, ya, o := x[ia[bi]*m*k:], y[ib[bi]*k*n:], out[bi*m*n:]
		for r := range m {
			for col := range n {
				var s T
				for j := range k {
					s += xa[r*k+j] * ya[j*n+col]
				}
				o[r*n+col] = s
			}
		}
	}
}
