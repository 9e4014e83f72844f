package testgraph

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

// Float32Tensor returns an unnamed float32 tensor of shape dims holding
// vals, failing the test when they do not fit it.
func Float32Tensor(t testing.TB, dims []int64, vals ...float32) *graph.Tensor {
	t.Helper()
	x, err := graph.NewFloat32Tensor("", dims, vals)
	return made(t, x, err)
}

// Int64Tensor returns an unnamed int64 tensor of shape dims holding vals,
// failing the test when they do not fit it.
func Int64Tensor(t testing.TB, dims []int64, vals ...int64) *graph.Tensor {
	t.Helper()
	x, err := graph.NewInt64Tensor("", dims, vals)
	return made(t, x, err)
}

// made returns x, the result of a tensor constructor, failing the test
// when the constructor failed (err): every tensor this package makes
// passes through it.
func made(t testing.TB, x *graph.Tensor, err error) *graph.Tensor {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return x
}
