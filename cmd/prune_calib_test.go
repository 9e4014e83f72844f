package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// The user's path: optc optimize --prune channels:0.25 with calibration
// data (training digits) keeps MNIST within 1 point on the held-out
// digits, where the same ratio without it loses about 13; every pruned
// layer says it was refit; the same command twice writes the same bytes.
func TestPruneChannelsCalibMNIST(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	args := func(out string) []string {
		return mnistPruneArgs(t, out, "256", "--prune", "channels:0.25")
	}
	res := optimizeJSON(t, args(filepath.Join(dir, "a.onnx"))...)
	a := res.Prune.Cost.Accuracy
	if a == nil || a.DropPoints > 1 {
		t.Errorf("channels:0.25 with --calib-data: accuracy %+v, want a drop of at most 1 point", a)
	}
	pruned := 0
	for _, l := range res.Prune.Reports[0].Layers {
		if l.Removed > 0 {
			pruned++
			if l.Refit != "least squares" {
				t.Errorf("layer %s: refit %q", l.Node, l.Refit)
			}
		}
	}
	if pruned == 0 || res.Prune.Reports[0].ParamsAfter >= res.Prune.Reports[0].ParamsBefore {
		t.Errorf("nothing pruned: %+v", res.Prune.Reports[0])
	}
	optimizeJSON(t, args(filepath.Join(dir, "b.onnx"))...)
	sameModels(t, filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx"))
}

// mnistPruneArgs is `optc optimize` of the MNIST CNN into out with flags,
// calibrated on calibSamples training digits and measured on the held-out
// digits with their labels in batches of 500: the command line of the
// MNIST pruning tests.
func mnistPruneArgs(t *testing.T, out, calibSamples string, flags ...string) []string {
	images, labels := mnistData(t)
	args := append([]string{testenv.Model("mnist_cnn.onnx"), "-o", out}, flags...)
	return append(args, "--calib-data", testenv.Data(t, "mnist/train_images.npy"), "--calib-samples", calibSamples,
		"--data", images, "--labels", labels, "--batch", "500")
}

// sameModels fails the test unless the models at a and b hold the same
// bytes, and some: two runs of one command must write the same model.
func sameModels(t *testing.T, a, b string) {
	t.Helper()
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || string(x) != string(y) {
		t.Errorf("two runs wrote different models (%d and %d bytes)", len(x), len(y))
	}
}

// channels:0.25 --prune-scope global: at least the parameters channels:0.25
// removes layer by layer, allocated across MNIST's channel groups by
// their measured cost, within 1 point; the allocation is reported and the
// same command writes the same bytes.
func TestPruneChannelsGlobalMNIST(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	args := func(out, scope string) []string {
		return mnistPruneArgs(t, out, "256", "--prune", "channels:0.25", "--prune-scope", scope)
	}
	layer := optimizeJSON(t, args(filepath.Join(dir, "layer.onnx"), "layer")...)
	res := optimizeJSON(t, args(filepath.Join(dir, "a.onnx"), "global")...)
	r, u := res.Prune.Reports[0], layer.Prune.Reports[0]
	if r.Method != "channels:0.25 (global)" || len(res.Prune.Global) == 0 {
		t.Fatalf("method %q, allocation %v", r.Method, res.Prune.Global)
	}
	if r.ParamsBefore-r.ParamsAfter < u.ParamsBefore-u.ParamsAfter {
		t.Errorf("global removed %d parameters, layer by layer %d: want at least as many", r.ParamsBefore-r.ParamsAfter, u.ParamsBefore-u.ParamsAfter)
	}
	for _, g := range res.Prune.Global {
		t.Logf("%s: %d channels, uniform %d -> %d, loss %.5f, %d params a channel", g.Layers[0], g.Channels, g.Uniform, g.Removed, g.Loss, g.ParamsPerChannel)
	}
	if a := res.Prune.Cost.Accuracy; a == nil || a.DropPoints > 1 {
		t.Errorf("channels:0.25 global: accuracy %+v, want a drop of at most 1 point", a)
	}
	optimizeJSON(t, args(filepath.Join(dir, "b.onnx"), "global")...)
	sameModels(t, filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx"))
}

// magnitude:0.75 with calibration data (OBS) keeps MNIST's accuracy far
// better than by magnitude alone (88.4%); the fc layer is excluded to keep
// the test fast.
func TestPruneMagnitudeOBSMNIST(t *testing.T) {
	ortenv.Require(t)
	res := optimizeJSON(t, mnistPruneArgs(t, filepath.Join(t.TempDir(), "m.onnx"), "256",
		"--prune", "magnitude:0.75", "--prune-exclude", "/fc/Gemm")...)
	r := res.Prune.Reports[0]
	for _, l := range r.Layers {
		if l.Skipped == "" && (l.Refit != "obs" || l.After < 0.749) {
			t.Errorf("layer %s: refit %q, sparsity %.3f", l.Node, l.Refit, l.After)
		}
	}
	if a := res.Prune.Cost.Accuracy; a == nil || a.DropPoints > 1 {
		t.Errorf("magnitude:0.75 with OBS: accuracy %+v, want a drop of at most 1 point", a)
	}
}

func TestPruneCalibUsage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.onnx")
	m := testenv.Model("mnist_cnn.onnx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"optimize", m, "-o", out, "--calib-data", "x.npy"}, "give --prune too"},
		{[]string{"optimize", m, "-o", out, "--prune", "2:4", "--calib-data", "random"}, "needs real samples"},
		{[]string{"optimize", m, "-o", out, "--prune", "magnitude:0.5", "--prune-scope", "global", "--calib-data", "x.npy"}, "global"},
		{[]string{"optimize", m, "-o", out, "--prune", "channels:0.25", "--prune-scope", "global"}, "give --calib-data"},
		{[]string{"optimize", m, "-o", out, "--prune", "channels:auto", "--prune-scope", "global", "--calib-data", "x.npy", "--min-cosine", "0.9"}, "one channels:R"},
		{[]string{"optimize", m, "-o", out, "--prune", "channels:auto"}, "needs a budget"},
		{[]string{"optimize", m, "-o", out, "--prune", "channels:auto", "--min-cosine", "1.5"}, "--min-cosine"},
	} {
		status, stdout, stderr := run(t, c.args...)
		failsCleanly(t, status, 2, stdout, stderr, c.want)
	}
}

// A calibration file that is not there: one line naming it, exit 1.
func TestPruneCalibMissing(t *testing.T) {
	ortenv.Require(t)
	out := filepath.Join(t.TempDir(), "x.onnx")
	status, stdout, stderr := run(t, "optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "channels:0.25", "--calib-data", "/nonexistent/calib.npy")
	failsCleanly(t, status, 1, stdout, stderr, "/nonexistent/calib.npy")
}

// optc build with prune: in the config prunes model.fp32.onnx with
// reconstruction on the calibration images, says so, and checks the
// artifacts against the unpruned input.
func TestBuildPruneConfig(t *testing.T) {
	ortenv.Require(t)
	// The config sits in a temporary folder: its paths are absolute (a
	// relative one would be read from that folder).
	root := filepath.Join(testenv.RepoRoot(), "testdata", "mnist")
	cfg := filepath.Join(t.TempDir(), "optc.yaml")
	yaml := `model: ` + testenv.Model("mnist_cnn.onnx") + `
image: {color: gray, scale: 0.00392156862745098}
calibration: {data: ` + filepath.Join(root, "calib") + `}
eval: {data: ` + filepath.Join(root, "eval") + `, labels: ` + filepath.Join(root, "eval_labels.npy") + `}
prune: {methods: ["channels:0.25"]}
latency: {batches: [1], duration: 100ms, repeats: 1}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	status, stdout, stderr := run(t, "build", "--config", cfg, "-o", out)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "prune channels:0.25:") || !strings.Contains(stdout, "least squares") {
		t.Errorf("the build summary does not say what pruning did:\n%s", stdout)
	}
	// report.md (and the page grown from it) shows the pruning: the method,
	// the layer table and the cost against the unpruned model.
	reportMDHas(t, out, "Pruning channels:0.25:", "| least squares |", "Pruning against the unpruned float model on")
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(page), "Pruning channels:0.25:") {
		t.Errorf("report.html does not show the pruning (%v)", err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct{ Details build.Result }
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	res := rep.Details
	if res.Optimize == nil {
		t.Fatal("report.json has no details.optimize")
	}
	p := res.Optimize.Prune
	if p == nil || p.Reports[0].ParamsAfter >= p.Reports[0].ParamsBefore {
		t.Fatalf("report.json: prune %+v", p)
	}
	for _, a := range res.Artifacts {
		if a.Path == "model.fp32.onnx" && (a.Check == nil || a.Check.Accuracy == nil || a.Check.Accuracy.DropPoints > 2) {
			t.Errorf("model.fp32.onnx against the unpruned input: %+v", a.Check)
		}
	}
	// The same with prune.reconstruct off is plain L1 pruning.
	status, stdout, stderr = run(t, "build", "--config", cfg, "-o", out, "--force", "--prune-reconstruct=false")
	if status != 0 || !strings.Contains(stdout, "without calibration data") {
		t.Errorf("status %d, --prune-reconstruct=false:\n%s%s", status, stdout, stderr)
	}
}

// channels:auto under a 0.2-point budget with reconstruction: every
// channel group is probed alone, the allocation kept is the largest
// measured level within the budget (every larger level measured is over
// it), its figures are the cost reported, each pruned layer shows its own
// ratio, each layer left whole says why, and the latency is reported.
func TestPruneChannelsAutoMNIST(t *testing.T) {
	ortenv.Require(t)
	res := optimizeJSON(t, mnistPruneArgs(t, filepath.Join(t.TempDir(), "auto.onnx"), "128",
		"--prune", "channels:auto", "--max-accuracy-drop", "0.2", "--samples", "2000")...)
	p := res.Prune
	probed := map[string]bool{}
	var chosen *optimize.SearchStep
	for i, s := range p.Search {
		switch {
		case s.Layer != "":
			probed[s.Layer] = true
		case s.Level > 0 && s.Within && (chosen == nil || s.Level > chosen.Level):
			chosen = &p.Search[i]
		}
	}
	if len(p.Groups) == 0 || len(probed) != len(p.Groups) {
		t.Fatalf("groups %+v, probed %v", p.Groups, probed)
	}
	if chosen == nil {
		t.Fatalf("no allocation within the budget: %+v", p.Search)
	}
	for _, s := range p.Search {
		if s.Level > chosen.Level && s.Within {
			t.Errorf("level %d keeps the budget but %d was kept", s.Level, chosen.Level)
		}
	}
	if p.Cost.Accuracy == nil || p.Cost.Accuracy.DropPoints != chosen.DropPoints || p.Cost.Accuracy.DropPoints > 0.2 {
		t.Errorf("cost %+v, the chosen level measured %+v", p.Cost.Accuracy, chosen)
	}
	for _, l := range p.Reports[0].Layers {
		if l.Removed > 0 && l.Ratio <= 0 || l.Removed == 0 && l.Skipped == "" {
			t.Errorf("layer %+v: removed channels without a ratio, or left whole without a reason", l)
		}
	}
	if p.Reports[0].ParamsAfter >= p.Reports[0].ParamsBefore {
		t.Errorf("auto: params %d -> %d", p.Reports[0].ParamsBefore, p.Reports[0].ParamsAfter)
	}
	if p.Latency == nil || p.Latency.AfterP50 <= 0 {
		t.Errorf("no latency: %+v", p.Latency)
	}
}

// --prune-damp auto: every OBS layer reports a damping it chose among
// prune.AutoDamps, MNIST keeps its accuracy, and two runs write the same
// bytes (the fc layer excluded to keep the test fast).
func TestPruneDampAutoMNIST(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	args := func(out string) []string {
		return mnistPruneArgs(t, out, "256", "--prune", "2:4", "--prune-exclude", "/fc/Gemm", "--prune-damp", "auto")
	}
	res := optimizeJSON(t, args(filepath.Join(dir, "a.onnx"))...)
	pruned := 0
	for _, l := range res.Prune.Reports[0].Layers {
		if l.Skipped != "" {
			continue
		}
		pruned++
		if l.Refit != "obs" || !slices.Contains(prune.AutoDamps, l.Damp) {
			t.Errorf("layer %s: refit %q, damp %g", l.Node, l.Refit, l.Damp)
		}
	}
	if pruned == 0 {
		t.Errorf("nothing pruned")
	}
	if a := res.Prune.Cost.Accuracy; a == nil || a.DropPoints > 1 {
		t.Errorf("2:4 with --prune-damp auto: accuracy %+v, want a drop of at most 1 point", a)
	}
	optimizeJSON(t, args(filepath.Join(dir, "b.onnx"))...)
	sameModels(t, filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx"))
}
