package prune

import (
	"math"
	"math/rand"
	"testing"
)

// TestInverseUpperCholesky checks Uᵀ·U·a = I on a random SPD matrix, and
// that U is upper triangular.
func TestInverseUpperCholesky(t *testing.T) {
	const n = 7
	rng := rand.New(rand.NewSource(1))
	b := make([]float64, n*n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			for k := 0; k < n; k++ {
				a[i*n+j] += b[i*n+k] * b[j*n+k]
			}
		}
		a[i*n+i] += 0.1
	}
	u, err := inverseUpperCholesky(a, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			if u[i*n+j] != 0 {
				t.Fatalf("U[%d][%d] = %g below the diagonal", i, j, u[i*n+j])
			}
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			s := 0.0 // (Uᵀ·U·a)[i][j]
			for k := 0; k < n; k++ {
				inv := 0.0
				for m := 0; m < n; m++ {
					inv += u[m*n+i] * u[m*n+k]
				}
				s += inv * a[k*n+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-9 {
				t.Fatalf("(Uᵀ·U·a)[%d][%d] = %g, want %g", i, j, s, want)
			}
		}
	}
	// cholSolve on the same matrix.
	l := append([]float64(nil), a...)
	if err := cholesky(l, n); err != nil {
		t.Fatal(err)
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i) - 3
	}
	rhs := make([]float64, n)
	for i := 0; i < n; i++ {
		for k := 0; k < n; k++ {
			rhs[i] += a[i*n+k] * x[k]
		}
	}
	cholSolve(l, n, rhs, 1)
	for i := range x {
		if math.Abs(rhs[i]-x[i]) > 1e-9 {
			t.Fatalf("solve: x[%d] = %g, want %g", i, rhs[i], x[i])
		}
	}
}
