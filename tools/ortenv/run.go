package ortenv

import (
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// Run opens a session for src with opts, runs inputs through it once and
// returns the outputs, failing the test on any error: the chore of every
// test that checks what a model computes in ORT. The session is closed
// before Run returns.
func Run(t testing.TB, src ort.Source, opts ort.Options, inputs []*graph.Tensor) []*graph.Tensor {
	t.Helper()
	s, err := ort.NewSession(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(inputs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunFloat32 runs src as Run does and returns its first output's values,
// which must be float32.
func RunFloat32(t testing.TB, src ort.Source, opts ort.Options, inputs []*graph.Tensor) []float32 {
	t.Helper()
	v, err := Run(t, src, opts, inputs)[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// WriteOptimized has ORT write the model it optimizes from src with opts
// to path (ORT's own format when path ends in .ort; see
// ort.Options.OptimizedModelPath) by opening a session and closing it
// again, failing the test on any error.
func WriteOptimized(t testing.TB, src ort.Source, opts ort.Options, path string) {
	t.Helper()
	opts.OptimizedModelPath = path
	s, err := ort.NewSession(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
