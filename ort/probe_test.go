package ort_test

import (
	"errors"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testgraph"
	"github.com/optc-dev/optc/ort"
)

// transposeIntoHalfMatMul is the smallest model known to crash ONNX
// Runtime 1.24.1 (SIGSEGV creating the session at level all): a float16
// Transpose that moves the batch axis, feeding a float16 MatMul. The GRU
// model of the zoo becomes one when converted to float16 for TensorRT.
func transposeIntoHalfMatMul(t *testing.T) ort.Source {
	b := testgraph.New(t, "crash", 13)
	x := b.TypedValue("x", graph.Float, 8, 1, 32)
	b.Graph.Inputs = append(b.Graph.Inputs, x)
	half := b.Node("half", "Cast", x)
	half.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float16)})
	tr := b.Node("swap", "Transpose", half.Output(0))
	tr.SetAttr(&graph.Attr{Name: "perm", Type: graph.AttrInts, Ints: []int64{1, 0, 2}})
	w := b.Init("w", graph.Float16, []int64{32, 10}, make([]byte, 32*10*2))
	mm := b.Node("mm", "MatMul", tr.Output(0), w)
	back := b.Node("back", "Cast", mm.Output(0))
	back.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float)})
	b.Output(back.Output(0), 1, 8, 10)
	src, err := ort.SourceOf(b.Model)
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
