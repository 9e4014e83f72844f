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
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Int64Tensor returns an unnamed int64 tensor of shape dims holding vals,
// failing the test when they do not fit it.
func Int64Tensor(t testing.TB, dims []int64, vals ...int64) *graph.Tensor {
	t.Helper()
	x, err := graph.NewInt64Tensor("", dims, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
