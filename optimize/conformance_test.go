package optimize_test

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/tools/conformance"
	"github.com/optc-dev/optc/tools/ortenv"
)

// TestPipelineConformance runs the default (-O2) pipeline over every
// backend test model, with Verify after each pass, and runs each model it
// changed on its test_data_set_0: the recorded outputs must still come
// out (the evaluator for constant folding is ORT).
func TestPipelineConformance(t *testing.T) {
	ortenv.Require(t)
	root, models := conformance.Models(t)
	pipeline, err := passes.Select(2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var tally conformance.Tally
	changed := 0
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail, didChange := optimizeAndRun(t, p, filepath.Join(tmp, filepath.Base(filepath.Dir(p))), pipeline)
		if didChange {
			changed++
		}
		if outcome != "" {
			tally.Add(t, rel, outcome, detail)
		}
	}
	t.Logf("the pipeline changed %d of %d models; of those:", changed, len(models))
	tally.Report(t, changed)
}

// optimizeAndRun returns the outcome for a model the pipeline changed,
// and "" for one it left alone.
func optimizeAndRun(t *testing.T, path, dir string, pipeline []*passes.Pass) (outcome, detail string, changed bool) {
	m, err := graph.LoadFile(path)
	if err != nil {
		return conformance.Mismatch, err.Error(), false
	}
	defer m.Close()
	rep, err := passes.Run(m, pipeline, passes.Options{VerifyEach: true, Eval: evaluator()})
	if err != nil {
		return conformance.Mismatch, err.Error(), true
	}
	for _, p := range rep.Passes {
		changed = changed || p.Stats.Changed()
	}
	if !changed {
		return "", "", false
	}
	if outcome, detail := conformance.Screen(m); outcome != "" {
		return outcome, detail, true
	}
	optimized := filepath.Join(dir + ".onnx")
	if err := graph.Save(m, optimized, graph.SaveOptions{}); err != nil {
		return conformance.Mismatch, err.Error(), true
	}
	outcome, detail = conformance.RunAndCheck(optimized, path, dir)
	// ORT failing on the result counts only when it fails on the original too.
	if outcome == conformance.CannotRun {
		if orig, _ := conformance.RunAndCheck(path, path, dir+".orig"); orig != conformance.CannotRun {
			return conformance.Mismatch, "ORT runs the original but not the optimized model: " + detail, true
		}
	}
	return outcome, detail, true
}
