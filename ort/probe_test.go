package ort_test

import (
	"errors"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

func transposeIntoHalfMatMul(t *testing.T) ort.Source {
	src, err := ort.SourceOf(testgraph.TransposeIntoHalfMatMul(t))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestCrashBecomesError: a model that crashes ORT while it optimizes it
// is opened first in a child process, so the crash is an error naming the
// signal and the level, and this process lives on to open it at a level
// that does not crash.
func TestCrashBecomesError(t *testing.T) {
	ortenv.Require(t)
	src := transposeIntoHalfMatMul(t)
	_, err := ort.NewSession(src, ort.Options{Level: ort.LevelAll})
	var crash *ort.CrashError
	if !errors.As(err, &crash) || !errors.Is(err, ort.ErrCrashed) {
		t.Fatalf("level all: got %v, want a crash in the probe (if ORT %s no longer crashes here, this test needs a new crasher)", err, ort.LibraryVersion)
	}
	if crash.Level != ort.LevelAll || crash.Signal == "" {
		t.Errorf("crash %+v: want level all and the signal", crash)
	}
	s, err := ort.NewSession(src, ort.Options{Level: ort.LevelExtended})
	if err != nil {
		t.Fatalf("level extended: %v", err)
	}
	defer s.Close()
	x, _ := graph.NewFloat32Tensor("x", []int64{8, 1, 32}, make([]float32, 8*32))
	if _, err := s.Run([]*graph.Tensor{x}); err != nil {
		t.Fatal(err)
	}
	// The verdict is remembered: the second ask costs no child.
	if _, err := ort.NewSession(src, ort.Options{Level: ort.LevelAll}); !errors.Is(err, ort.ErrCrashed) {
		t.Errorf("second open at level all: %v", err)
	}
}
