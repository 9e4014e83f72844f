package infer_test

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/conformance"
	"github.com/optc-dev/optc/tools/ortenv"
)

// TestConformance runs every model of the ONNX backend test data the way
// `optc run MODEL --data test_data_set_0 -o DIR` does, and compares the
// .npy outputs with the recorded output_N.pb. Models ORT cannot load or
// run, and models whose inputs or outputs the binding cannot carry, are
// counted; every model that runs must match.
func TestConformance(t *testing.T) {
	ortenv.Require(t)
	root, models := conformance.Models(t)
	tmp := t.TempDir()
	var tally conformance.Tally
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail := runModel(p, filepath.Join(tmp, filepath.Base(filepath.Dir(p))))
		tally.Add(t, rel, outcome, detail)
	}
	tally.Report(t, len(models))
	if tally.Count(conformance.Match) < 900 {
		t.Errorf("only %d models matched; expected most of the ~1,070", tally.Count(conformance.Match))
	}
}

func runModel(path, out string) (outcome, detail string) {
	m, err := graph.LoadFile(path)
	if err != nil {
		return conformance.Mismatch, err.Error()
	}
	defer m.Close()
	if outcome, detail := conformance.Screen(m); outcome != "" {
		return outcome, detail
	}
	return conformance.RunAndCheck(path, path, out)
}
