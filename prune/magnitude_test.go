package prune

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/difftest"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// checkSmallestZeroed fails unless after is before with exactly the k
// smallest |w| (ties: lower index) zeroed, computed independently of the
// package: a stable sort of the indices by magnitude.
func checkSmallestZeroed(t *testing.T, layer string, before, after []float32, k int) {
	t.Helper()
	order := make([]int, len(before))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(abs32(before[a]), abs32(before[b])) })
	want := slices.Clone(before)
	for _, i := range order[:k] {
		want[i] = 0
	}
	if !slices.Equal(after, want) {
		t.Errorf("%s: the %d smallest weights are not exactly the ones zeroed", layer, k)
	}
}

func TestMagnitudeLayerScope(t *testing.T) {
	w := newWeightModel(t)
	before := w.snapshot()
	oldConv := w.weights["conv"].Const
	rep, err := Magnitude(w.Model, 0.5, Options{Exclude: []string{"gemmT"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if rep.Method != "magnitude:0.5" || rep.ParamsBefore != rep.ParamsAfter || rep.ParamsBefore != totalParams(w.Model) {
		t.Errorf("report %q, params %d -> %d", rep.Method, rep.ParamsBefore, rep.ParamsAfter)
	}
	var zeros, total int
	for _, name := range []string{"conv", "convT", "gemm", "mm", "odd", "shared1"} {
		after := w.vals(name)
		n := len(after)
		l := layerOf(t, rep.Layers, name)
		if l.Skipped != "" || l.Params != int64(n) || l.Before != 0 || l.After != float64(n/2)/float64(n) {
			t.Errorf("%s: %+v, want sparsity 0 -> %d/%d", name, l, n/2, n)
		}
		checkSmallestZeroed(t, name, before[name], after, n/2)
		zeros += zeroCount(after)
		total += n
	}
	if math.Abs(rep.Sparsity-float64(zeros)/float64(total)) > 1e-12 {
		t.Errorf("overall sparsity %v, want %v", rep.Sparsity, float64(zeros)/float64(total))
	}
	for name, reason := range map[string]string{"dw": "depthwise", "tiny": "fewer than 1024", "gemmT": "excluded"} {
		l := layerOf(t, rep.Layers, name)
		if !strings.Contains(l.Skipped, reason) || !slices.Equal(w.vals(name), before[name]) {
			t.Errorf("%s: skipped %q (want %q), changed: %v", name, l.Skipped, reason, !slices.Equal(w.vals(name), before[name]))
		}
	}
	if slices.ContainsFunc(rep.Layers, func(l schema.PruneLayer) bool { return l.Node == "shared2" }) {
		t.Error("the shared weight is reported twice")
	}
	// The old tensor object is left as it was; the value has a new one.
	if old, _ := oldConv.Float32s(); !slices.Equal(old, before["conv"]) || w.weights["conv"].Const == oldConv {
		t.Error("the conv weight was modified in place")
	}
}

func TestMagnitudePerLayerAndMinElements(t *testing.T) {
	w := newWeightModel(t)
	rep, err := Magnitude(w.Model, 0.5, Options{PerLayer: map[string]float64{"gemm": 0.75, "shared2": 0.1}, MinElements: 100})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"gemm": 0.75, "shared1": math.Floor(0.1*1296) / 1296, "tiny": 0.5, "conv": 0.5} {
		if l := layerOf(t, rep.Layers, name); l.Skipped != "" || math.Abs(l.After-want) > 1e-12 || float64(zeroCount(w.vals(name)))/float64(l.Params) != l.After {
			t.Errorf("%s: %+v, want sparsity %v", name, l, want)
		}
	}
	if _, err := Magnitude(w.Model, 0.5, Options{Scope: "model"}); err == nil {
		t.Error("scope \"model\" accepted")
	}
	if _, err := Magnitude(w.Model, 1, Options{}); err == nil {
		t.Error("ratio 1 accepted")
	}
}

func TestMagnitudeGlobalScope(t *testing.T) {
	w := newWeightModel(t)
	before := w.snapshot()
	rep, err := Magnitude(w.Model, 0.5, Options{Scope: "global"})
	if err != nil {
		t.Fatal(err)
	}
	var total, zeros int
	var maxZeroed, minKept float32 = 0, math.MaxFloat32
	levels := map[string]float64{}
	for _, name := range prunable {
		after := w.vals(name)
		total += len(after)
		zeros += zeroCount(after)
		for i, v := range after {
			if v == 0 {
				maxZeroed = max(maxZeroed, abs32(before[name][i]))
			} else {
				if v != before[name][i] {
					t.Fatalf("%s[%d] changed from %v to %v", name, i, before[name][i], v)
				}
				minKept = min(minKept, abs32(v))
			}
		}
		levels[name] = layerOf(t, rep.Layers, name).After
	}
	if zeros != total/2 || rep.Sparsity != float64(total/2)/float64(total) {
		t.Errorf("%d of %d zeroed (report: %v), want exactly half", zeros, total, rep.Sparsity)
	}
	if maxZeroed > minKept {
		t.Errorf("a weight of |w| %v was zeroed while one of %v was kept", maxZeroed, minKept)
	}
	// Scaled by 0.05, conv is almost all gone; gemmT, scaled by 2, keeps
	// almost everything.
	if levels["conv"] < 0.8 || levels["gemmT"] > 0.2 {
		t.Errorf("per-layer sparsity %v: want conv > 0.8, gemmT < 0.2", levels)
	}
	t.Logf("global 0.5: per-layer sparsity %v", levels)
}

func TestMagnitudeZeroChangesNothing(t *testing.T) {
	for _, scope := range []string{"layer", "global"} {
		w := newWeightModel(t)
		want := w.Marshal()
		rep, err := Magnitude(w.Model, 0, Options{Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Marshal(), want) || rep.Sparsity != 0 {
			t.Errorf("%s scope: ratio 0 changed the model (sparsity %v)", scope, rep.Sparsity)
		}
	}
}

// savedWeightModel writes the fixture to a temporary file and returns its
// path and bytes.
func savedWeightModel(t *testing.T) (string, []byte) {
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := graph.Save(newWeightModel(t).Model, path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// The loaded file is mapped read-only: pruning must write new tensors, and
// the file stays as it was.
func TestPruningLeavesTheFileAlone(t *testing.T) {
	path, want := savedWeightModel(t)
	for _, method := range []string{"magnitude", "global", "2:4"} {
		m, err := graph.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var rep *schema.PruneReport
		switch method {
		case "magnitude":
			rep, err = Magnitude(m, 0.5, Options{})
		case "global":
			rep, err = Magnitude(m, 0.5, Options{Scope: "global"})
		default:
			rep, err = SemiStructured(m, Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		pruned, err := graph.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: pruning changed the file it loaded", method)
		}
		if bytes.Equal(pruned, want) || rep.Sparsity < 0.4 {
			t.Errorf("%s: nothing was pruned (sparsity %v)", method, rep.Sparsity)
		}
	}
}

func TestPrunedModelsRunInORT(t *testing.T) {
	ortenv.Require(t)
	path, original := savedWeightModel(t)
	for _, c := range []struct {
		name  string
		prune func(*graph.Model) (*schema.PruneReport, error)
		same  bool
	}{
		{"magnitude:0", func(m *graph.Model) (*schema.PruneReport, error) { return Magnitude(m, 0, Options{}) }, true},
		{"magnitude:0.5", func(m *graph.Model) (*schema.PruneReport, error) { return Magnitude(m, 0.5, Options{}) }, false},
		{"global:0.7", func(m *graph.Model) (*schema.PruneReport, error) { return Magnitude(m, 0.7, Options{Scope: "global"}) }, false},
		{"2:4", func(m *graph.Model) (*schema.PruneReport, error) { return SemiStructured(m, Options{}) }, false},
	} {
		t.Run(strings.ReplaceAll(c.name, ":", "_"), func(t *testing.T) {
			m, err := graph.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if _, err := c.prune(m); err != nil {
				t.Fatal(err)
			}
			pruned, err := graph.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if c.same {
				difftest.Check(t, original, pruned, difftest.Options{})
				return
			}
			// Pruning changes the outputs: only check that the model loads
			// and runs, and that it does compute something else.
			difftest.Check(t, original, pruned, difftest.Options{Atol: math.Inf(1)})
			if difftest.Compare(original, pruned, difftest.Options{}) == nil {
				t.Error("the pruned model computes what the original did")
			}
		})
	}
}

// TestMNISTAccuracy prunes the MNIST CNN and measures the accuracy the
// pruned models keep on the 2004 test images.
func TestMNISTAccuracy(t *testing.T) {
	ortenv.Require(t)
	images := testenv.Data(t, "mnist/test_images.npy")
	labels := testenv.Data(t, "mnist/test_labels.npy")
	path := testenv.Model("mnist_cnn.onnx")
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		method   string
		sparsity float64
		acc      *schema.LabelAccuracy
	}
	var rows []row
	for _, method := range []string{"magnitude:0.25", "magnitude:0.5", "magnitude:0.75", "magnitude:0.9", "2:4"} {
		m, err := graph.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		meth, err := ParseMethod(method)
		if err != nil {
			t.Fatal(err)
		}
		var rep *schema.PruneReport
		if meth.Kind == "2:4" {
			rep, err = SemiStructured(m, Options{})
		} else {
			rep, err = Magnitude(m, meth.Ratio, Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		var pruned []string
		for _, l := range rep.Layers {
			if l.Skipped == "" {
				pruned = append(pruned, l.Node)
				if meth.Kind == "magnitude" && l.After != math.Floor(meth.Ratio*float64(l.Params)+1e-9)/float64(l.Params) {
					t.Errorf("%s, %s: sparsity %v", method, l.Node, l.After)
				}
			}
		}
		if len(pruned) != 3 {
			t.Errorf("%s pruned %v, want conv2, conv3 and the Gemm", method, pruned)
		}
		if meth.Kind == "2:4" {
			for _, l := range Check24(m) {
				if slices.Contains(pruned, l.Node) && l.Skipped != "" {
					t.Errorf("2:4: %s fails Check24: %s", l.Node, l.Skipped)
				}
			}
		}
		b, err := graph.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		res, err := compare.Models(compare.Options{ModelA: path, ModelB: method, BInMemory: graph.Serialized{Bytes: b}, Data: images, DataOpts: data.Options{Batch: 256}, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		if res.Samples != 2004 || res.Accuracy == nil {
			t.Fatalf("%s: %d samples, accuracy %v", method, res.Samples, res.Accuracy)
		}
		rows = append(rows, row{method, rep.Sparsity, res.Accuracy})
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, file) {
		t.Fatalf("the model file changed (%v)", err)
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "\n%-15s %9s %9s %9s %8s\n", "method", "sparsity", "acc A", "acc B", "drop")
	for _, r := range rows {
		fmt.Fprintf(&tab, "%-15s %8.1f%% %8.2f%% %8.2f%% %7.2fpt\n", r.method, 100*r.sparsity, r.acc.A, r.acc.B, r.acc.DropPoints)
	}
	t.Log(tab.String())
	// Accuracies are in percent. Moderate sparsity costs MNIST little:
	// measured 98.70% -> 98.75% at 0.25, 98.25% at 0.5, 97.11% for 2:4.
	if a := rows[0].acc; math.Abs(a.A-98.70) > 0.01 {
		t.Errorf("the original scores %.2f%%, want 98.70%%", a.A)
	}
	for i, most := range []float64{1, 1, -1, -1, 3} {
		if most >= 0 && rows[i].acc.DropPoints > most {
			t.Errorf("%s loses %.2f points, want at most %g", rows[i].method, rows[i].acc.DropPoints, most)
		}
	}
}
