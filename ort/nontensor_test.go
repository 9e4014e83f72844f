package ort_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestNonTensorOutputIsRefused: test_if_opt returns an empty optional,
// and onnxruntime_go v1.27.0 crashes the process (SIGSEGV) fetching one.
// A session may name such an output (opening one writes an .ort), but a
// run must refuse it, named, before the binding sees it; also when the
// interface it is given leaves the type open and only ORT knows it.
func TestNonTensorOutputIsRefused(t *testing.T) {
	path, ins, outs := testModelInterface(t, "onnx-testdata/node/test_if_opt/model.onnx")
	kept, skipped := ort.SplitOutputs(outs)
	if len(kept) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0], `"sequence" is an optional`) {
		t.Errorf("SplitOutputs: kept %v, skipped %q", kept, skipped)
	}
	untyped := []ort.IO{{Name: outs[0].Name}}
	for _, o := range [][]ort.IO{outs, untyped} {
		s, err := ort.NewSession(ort.Source{Path: path, Inputs: ins, Outputs: o}, ort.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		cond, _ := graph.NewTensor("cond", graph.Bool, nil, []byte{1})
		_, err = s.Run([]*graph.Tensor{cond})
		s.Close()
		if !errors.Is(err, ort.ErrNotExpressible) || !strings.Contains(err.Error(), `output "sequence" is an optional`) {
			t.Errorf("outputs %+v: got %v", o, err)
		}
	}
}

// TestSequenceInputIsRefused: a sequence input cannot be fed.
func TestSequenceInputIsRefused(t *testing.T) {
	path, ins, outs := testModelInterface(t, "onnx-testdata/node/test_sequence_insert_at_back/model.onnx")
	_, err := ort.NewSession(ort.Source{Path: path, Inputs: ins, Outputs: outs}, ort.DefaultOptions())
	if !errors.Is(err, ort.ErrNotExpressible) || !strings.Contains(err.Error(), `input "sequence" is a sequence`) {
		t.Errorf("got %v", err)
	}
}

// testModelInterface opens ONNX test model rel, skipping the test where
// ORT is missing, and returns its path and interface.
func testModelInterface(t *testing.T, rel string) (path string, ins, outs []ort.IO) {
	t.Helper()
	ortenv.Require(t)
	path = testenv.Data(t, rel)
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ins, outs = ort.Interface(m)
	return path, ins, outs
}
