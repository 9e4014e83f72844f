package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// optimizeJSON runs optc optimize --json and decodes the result.
func optimizeJSON(t *testing.T, args ...string) *optimize.Result {
	t.Helper()
	status, stdout, stderr := run(t, append([]string{"optimize", "--json"}, args...)...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res optimize.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

func TestPruneMagnitudeMNIST(t *testing.T) {
	ortenv.Require(t)
	images, labels := mnistData(t)
	out := filepath.Join(t.TempDir(), "p.onnx")
	res := optimizeJSON(t, testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "magnitude:0.5",
		"--data", images, "--labels", labels, "--batch", "500")
	r := res.Prune.Reports[0]
	if r.Sparsity < 0.499 || r.Sparsity > 0.501 {
		t.Errorf("magnitude:0.5 reached %.3f sparsity", r.Sparsity)
	}
	a := res.Prune.Cost.Accuracy
	if a == nil || a.A < 98 || a.DropPoints > 1 {
		t.Errorf("accuracy %+v", a)
	}
	// The written model is the pruned one.
	status, stdout, _ := run(t, "inspect", out)
	if status != 0 || !strings.Contains(stdout, "2:4 sparsity: 0 of 4") {
		t.Errorf("inspect of the pruned model:\n%s", stdout)
	}
}

func TestPrune24AndBudget(t *testing.T) {
	ortenv.Require(t)
	images, labels := mnistData(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "p24.onnx")
	res := optimizeJSON(t, testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "2:4")
	if len(res.Prune.Reports[0].Layers) == 0 {
		t.Fatal("no layers reported")
	}
	status, stdout, _ := run(t, "inspect", out)
	if status != 0 || !strings.Contains(stdout, "2:4 sparsity: 3 of 4 weighted layers satisfy it") {
		t.Errorf("inspect after 2:4:\n%s", stdout)
	}
	// A budget the full pruning breaks makes optc spare layers until it holds.
	res = optimizeJSON(t, testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(dir, "b.onnx"), "--prune", "magnitude:0.75",
		"--data", images, "--labels", labels, "--batch", "500", "--max-accuracy-drop", "1")
	p := res.Prune
	if len(p.Search) == 0 || p.Cost.Accuracy.DropPoints > 1 || len(p.Spared) == 0 {
		t.Errorf("budget search: spared %v, steps %+v, drop %.2f", p.Spared, p.Search, p.Cost.Accuracy.DropPoints)
	}
}

func TestPruneUsage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.onnx")
	for _, args := range [][]string{
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "magnitude:1.5"},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "random:0.5"},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--labels", "l.npy"},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "magnitude:0.5", "--prune-scope", "model"},
	} {
		status, stdout, stderr := run(t, args...)
		failsCleanly(t, status, 2, stdout, stderr, "")
	}
	status, stdout, stderr := run(t, "optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--prune", "magnitude:0.5", "--max-accuracy-drop", "1")
	failsCleanly(t, status, 2, stdout, stderr, "needs --labels") // a missing flag: usage
}
