package prune

import (
	"fmt"
	"math"
)

// The small dense linear algebra the data-driven methods need, in float64
// on row-major n×n matrices: Cholesky factorization, solves and the
// inverse of a symmetric positive definite matrix. Sizes are a layer's
// input features (a few thousand at most), so plain loops suffice.

// cholesky factors the symmetric positive definite a (n×n) in place into
// its lower triangle L with a = L·Lᵀ; the upper triangle is zeroed.
func cholesky(a []float64, n int) error {
	for j := 0; j < n; j++ {
		rj := a[j*n : j*n+j]
		d := a[j*n+j]
		for _, v := range rj {
			d -= v * v
		}
		if !(d > 0) || math.IsInf(d, 0) {
			return fmt.Errorf("matrix is not positive definite (pivot %d is %g)", j, d)
		}
		d = math.Sqrt(d)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			s := a[i*n+j]
			for k, v := range ri {
				s -= v * rj[k]
			}
			a[i*n+j] = s / d
		}
		for k := j + 1; k < n; k++ {
			a[j*n+k] = 0
		}
	}
	return nil
}

// cholSolve solves (L·Lᵀ)·X = B for X in place of b (n×m, row-major),
// given the factor from cholesky.
func cholSolve(l []float64, n int, b []float64, m int) {
	// L·Y = B: row i of L, l[i·n+k], for k < i.
	for i := 0; i < n; i++ {
		substituteRow(l, n, b, m, i, 0, i, i*n, 1)
	}
	// Lᵀ·X = Y: row i of Lᵀ is column i of L, l[k·n+i], for k > i.
	for i := n - 1; i >= 0; i-- {
		substituteRow(l, n, b, m, i, i+1, n, i, n)
	}
}

// substituteRow is one row of a triangular solve with the factor l (n×n)
// on b (n×m, row-major), in place: row i of b less c·(row k) for k in
// [from, to), c = l[base+k·step], then over the diagonal l[i·n+i].
// Forward and back substitution differ only in which rows they subtract
// and where their coefficients stand in l.
func substituteRow(l []float64, n int, b []float64, m, i, from, to, base, step int) {
	bi := b[i*m : i*m+m]
	for k := from; k < to; k++ {
		if c := l[base+k*step]; c != 0 {
			bk := b[k*m : k*m+m]
			for j := range bi {
				bi[j] -= c * bk[j]
			}
		}
	}
	d := l[i*n+i]
	for j := range bi {
		bi[j] /= d
	}
}

// inverseUpperCholesky returns U, upper triangular, with a⁻¹ = Uᵀ·U,
// without forming a⁻¹: with J the order reversal and J·a·J = L·Lᵀ,
// a⁻¹ = J·L⁻ᵀ·L⁻¹·J = Uᵀ·U for U = J·L⁻¹·J. One factorization and one
// triangular inverse (n³/3 each) instead of an inverse and a second
// factorization; a is not changed.
func inverseUpperCholesky(a []float64, n int) ([]float64, error) {
	l := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			l[i*n+j] = a[(n-1-i)*n+(n-1-j)]
		}
	}
	if err := cholesky(l, n); err != nil {
		return nil, err
	}
	// X = L⁻¹ row by row: X[i,:] = (e_i − Σ_{k<i} L[i][k]·X[k,:]) / L[i][i];
	// row k of X is zero right of column k.
	x := make([]float64, n*n)
	for i := 0; i < n; i++ {
		xi := x[i*n : i*n+i+1]
		xi[i] = 1
		for k := 0; k < i; k++ {
			if c := l[i*n+k]; c != 0 {
				xk := x[k*n : k*n+k+1]
				for j, v := range xk {
					xi[j] -= c * v
				}
			}
		}
		d := l[i*n+i]
		for j := range xi {
			xi[j] /= d
		}
	}
	u := l // reused: every element is written
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			u[i*n+j] = x[(n-1-i)*n+(n-1-j)]
		}
	}
	return u, nil
}

// dampen adds frac times the mean of a's diagonal to the diagonal (at
// least a tiny absolute amount, so that a feature that is always zero
// does not make a singular).
func dampen(a []float64, n int, frac float64) {
	mean := 0.0
	for i := 0; i < n; i++ {
		mean += a[i*n+i]
	}
	mean /= float64(max(n, 1))
	d := frac * mean
	if !(d > 1e-12) {
		d = 1e-12
	}
	for i := 0; i < n; i++ {
		a[i*n+i] += d
	}
}
