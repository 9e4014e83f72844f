package passes

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// cleanupPassNames are the cleanup passes, run with eliminate-dead-code
// by the tests on real models.
var cleanupPassNames = []string{
	"constants-to-initializers", "eliminate-identity", "eliminate-noop",
	"merge-transposes", "merge-reshapes", "merge-squeeze-unsqueeze",
	"eliminate-common-subexpressions", "dedup-initializers",
	"fuse-pad-into-conv", "matmul-add-to-gemm", "eliminate-dead-code",
}

// runCleanupPipeline applies the cleanup passes to m until nothing
// changes, verifying the model after every pass.
func runCleanupPipeline(m *graph.Model) (*Report, error) {
	pipeline, err := Select(1, cleanupPassNames, nil)
	if err != nil {
		return nil, err
	}
	return Run(m, pipeline, Options{VerifyEach: true, MaxRounds: 16})
}

func clCountNodes(m *graph.Model) int {
	n := 0
	m.Graph.Walk(func(g *graph.Graph) { n += len(g.Nodes) })
	return n
}

// TestCleanupRealModels runs the cleanup passes on MNIST and the PaddleOCR
// models and has ONNX Runtime compare the result with the original.
func TestCleanupRealModels(t *testing.T) {
	ortenv.Require(t)
	ocr := func(name string) func(t *testing.T) string {
		return func(t *testing.T) string { return testenv.Data(t, filepath.Join("ocr-models", name)) }
	}
	for _, tc := range []struct {
		name   string
		path   func(t *testing.T) string
		input  string
		shape  []int64
		before int // nodes in the original, to catch a changed model
		after  int // nodes after the cleanup, as of this writing
	}{
		// The PyTorch export of MNIST is already clean.
		{"mnist_cnn", func(*testing.T) string { return testenv.Model("mnist_cnn.onnx") }, "input", []int64{1, 1, 28, 28}, 11, 11},
		{"ppocr cls", ocr("ch_ppocr_mobile_v2.0_cls_infer.onnx"), "x", []int64{1, 3, 48, 192}, 471, 221},
		{"ppocr det", ocr("ch_PP-OCRv4_det_infer.onnx"), "x", []int64{1, 3, 64, 64}, 672, 330},
		{"ppocr rec", ocr("ch_PP-OCRv4_rec_infer.onnx"), "x", []int64{1, 3, 48, 160}, 765, 428},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := graph.LoadFile(tc.path(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			before := testgraph.Marshal(t, m)
			nodesBefore, opsBefore := clCountNodes(m), testgraph.OpCounts(m.Graph)
			if nodesBefore != tc.before {
				t.Fatalf("the model has %d nodes, expected %d: a different file?", nodesBefore, tc.before)
			}
			rep, err := runCleanupPipeline(m)
			if err != nil {
				t.Fatal(err)
			}
			after := testgraph.Marshal(t, m)
			t.Logf("%s: %d nodes -> %d in %d rounds", tc.name, nodesBefore, clCountNodes(m), rep.Rounds)
			t.Logf("ops before: %s", clOpCounts(opsBefore))
			t.Logf("ops after:  %s", clOpCounts(testgraph.OpCounts(m.Graph)))
			for _, p := range rep.Passes {
				if p.Stats.Changed() {
					t.Logf("  %-32s %+v", p.Name, p.Stats)
				}
			}
			if got := clCountNodes(m); got > tc.after {
				t.Errorf("%d nodes left, want at most %d", got, tc.after)
			}
			difftest.Check(t, before, after, difftest.Options{
				Atol: 1e-5, Rtol: 1e-4,
				DataOpts: data.Options{Spec: data.Spec{Shapes: map[string][]int64{tc.input: tc.shape}}, Samples: 2},
			})
			// A second run finds nothing left to do.
			rep, err = runCleanupPipeline(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Passes {
				if p.Stats.Changed() {
					t.Errorf("second run: %s still changed %+v", p.Name, p.Stats)
				}
			}
		})
	}
}

// opCounts lists operator counts, largest first.
func clOpCounts(c map[string]int) string {
	ops := make([]string, 0, len(c))
	for op := range c {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if c[ops[i]] != c[ops[j]] {
			return c[ops[i]] > c[ops[j]]
		}
		return ops[i] < ops[j]
	})
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %d", op, c[op])
	}
	return strings.Join(parts, ", ")
}

// TestCleanupConformance applies the cleanup passes to every model of the
// ONNX backend test data: each must still verify and marshal, and where a
// pass changed something and ONNX Runtime runs the original on its
// test_data_set_0, the transformed model must give the same outputs.
func TestCleanupConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs over 1,000 models")
	}
	root := testenv.Data(t, "onnx-testdata")
	var models []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "model.onnx" {
			models = append(models, p)
		}
		return err
	})
	sort.Strings(models)
	_, err := ort.Init("")
	ortAvailable := err == nil
	counts := map[string]int{}
	byPass := map[string]int{} // models each pass changed
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail := cleanupConformance(p, ortAvailable, byPass)
		counts[outcome]++
		switch outcome {
		case "failed", "mismatch":
			t.Errorf("%s: %s: %s", rel, outcome, detail)
		case "changed, not comparable":
			if testing.Verbose() {
				t.Logf("%s: %s", rel, detail)
			}
		}
	}
	t.Logf("%d models: %d invalid as loaded, %d unchanged, %d changed and matched in ORT, %d changed but not comparable (ORT cannot run the original or its outputs vary), %d mismatched, %d failed",
		len(models), counts["invalid"], counts["unchanged"], counts["match"], counts["changed, not comparable"], counts["mismatch"], counts["failed"])
	t.Logf("models changed per pass: %s", clOpCounts(byPass))
	if counts["match"] < 50 {
		t.Errorf("only %d changed models were compared in ORT", counts["match"])
	}
}

func cleanupConformance(path string, ortAvailable bool, byPass map[string]int) (outcome, detail string) {
	m, err := graph.LoadFile(path)
	if err != nil {
		return "failed", err.Error()
	}
	defer m.Close()
	if err := m.Verify(); err != nil {
		return "invalid", err.Error()
	}
	before, err := graph.Marshal(m)
	if err != nil {
		return "failed", err.Error()
	}
	rep, err := runCleanupPipeline(m)
	if err != nil {
		return "failed", err.Error()
	}
	after, err := graph.Marshal(m)
	if err != nil {
		return "failed", "marshal: " + err.Error()
	}
	if _, err := graph.Parse(after, ""); err != nil {
		return "failed", "reparse: " + err.Error()
	}
	changed := false
	for _, p := range rep.Passes {
		if p.Stats.Changed() {
			changed = true
			byPass[p.Name]++
		}
	}
	if !changed {
		return "unchanged", ""
	}
	if !ortAvailable {
		return "changed, not comparable", "no ONNX Runtime"
	}
	set := filepath.Join(filepath.Dir(path), "test_data_set_0")
	opts := difftest.Options{Data: set, Atol: 1e-5, Rtol: 1e-3}
	// The original must run, and agree with itself: models ORT cannot
	// run, whose data the binding cannot carry, or that draw random
	// numbers say nothing about the passes.
	if err := difftest.Compare(before, before, opts); err != nil {
		return "changed, not comparable", err.Error()
	}
	if err := difftest.Compare(before, after, opts); err != nil {
		return "mismatch", err.Error()
	}
	return "match", ""
}
