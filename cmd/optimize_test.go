package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

func TestOptimizeMNIST(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.onnx")
	orig, _ := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	os.WriteFile(in, orig, 0o644)
	out := filepath.Join(dir, "out.onnx")
	status, stdout, stderr := run(t, "optimize", in, "-o", out, "--verify-each", "--json", "--dump-after", "fuse-conv-bn")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res optimize.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	for _, o := range res.After.OpTypes {
		if o.Op == "BatchNormalization" {
			t.Errorf("%d BatchNormalization left", o.Count)
		}
	}
	if res.Check == nil || !res.Check.Pass || res.After.NodesTotal >= res.Before.NodesTotal {
		t.Errorf("check %+v, nodes %d -> %d", res.Check, res.Before.NodesTotal, res.After.NodesTotal)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.after-fuse-conv-bn.onnx")); err != nil {
		t.Errorf("no dump: %v", err)
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, orig) {
		t.Error("the input changed")
	}
	// The optimized model classifies the test digits as the original does.
	images, labels := mnistData(t)
	status, _, stderr = run(t, "compare", in, out, "--data", images, "--labels", labels, "--batch", "500", "--atol", "1e-3")
	if status != 0 {
		t.Errorf("optimized model differs: %s", stderr)
	}
}

func TestOptimizeTableAndUsage(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "o.onnx")
	status, stdout, stderr := run(t, "optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "-O", "1")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"before", "after", "pipeline rounds", "check of the passes in ORT", "same outputs"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, args := range [][]string{
		{"optimize", testenv.Model("mnist_cnn.onnx")},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--passes", "nope"},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "-O", "7"},
		{"optimize", testenv.Model("mnist_cnn.onnx"), "-o", out, "--dump-after", "nope"},
	} {
		status, stdout, stderr := run(t, args...)
		failsCleanly(t, status, 2, stdout, stderr, "")
	}
	status, stdout, stderr = run(t, "optimize", out, "-o", out)
	failsCleanly(t, status, 1, stdout, stderr, "refusing to overwrite the input")
	status, stdout, _ = run(t, "passes")
	if status != 0 || !strings.Contains(stdout, "fuse-conv-bn") || !strings.Contains(stdout, "-O2") {
		t.Errorf("optc passes:\n%s", stdout)
	}
}

// --ort-contrib lets the transformer fusions write ONNX Runtime's own
// operators; without it the result stays standard ONNX (torch's opset-13
// LayerNorm and GELU have no standard operator there).
// The user's path for attention fusion: optc optimize on the zoo's
// bert_tiny with its defaults (the static export: the check feeds random
// ids and masks itself) and on the dynamic export with padded masks, with
// and without --ort-contrib; the check in ORT must pass.
func TestOptimizeORTContribAttention(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		model string
		args  []string
	}{
		{"zoo/bert_tiny/static.onnx", nil},
		{"zoo/bert_tiny/dynamic.onnx", []string{"--shape", "input_ids:4,16", "--shape", "attention_mask:4,16", "--range", "attention_mask:0,2"}},
	} {
		in := testenv.Data(t, tc.model)
		for _, contrib := range []bool{false, true} {
			out := filepath.Join(dir, fmt.Sprintf("%s-%v.onnx", filepath.Base(tc.model), contrib))
			res, ops := optimizeOps(t, contrib, append([]string{in, "-o", out}, tc.args...)...)
			mha, softmax := 0, 2
			if contrib {
				mha, softmax = 2, 0
			}
			if ops["com.microsoft.MultiHeadAttention"] != mha || ops["Softmax"] != softmax {
				t.Errorf("%s --ort-contrib %v: ops %v, want %d MultiHeadAttention and %d Softmax", tc.model, contrib, ops, mha, softmax)
			}
			if res.Check == nil || !res.Check.Pass {
				t.Errorf("%s --ort-contrib %v: check %+v", tc.model, contrib, res.Check)
			}
		}
	}
}

// optimizeOps runs optc optimize --json with args, and --ort-contrib when
// contrib, and returns the result and how many nodes of each op type the
// optimized model has: what the --ort-contrib tests compare.
func optimizeOps(t *testing.T, contrib bool, args ...string) (*optimize.Result, map[string]int) {
	t.Helper()
	if contrib {
		args = append(args[:len(args):len(args)], "--ort-contrib")
	}
	res := optimizeJSON(t, args...)
	ops := map[string]int{}
	for _, o := range res.After.OpTypes {
		ops[o.Op] = o.Count
	}
	return res, ops
}

func TestOptimizeORTContrib(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	for _, contrib := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprintf("o-%v.onnx", contrib))
		res, ops := optimizeOps(t, contrib, testenv.Model("block_opset13.onnx"), "-o", out)
		want := map[string]int{}
		if contrib {
			want = map[string]int{"LayerNormalization": 1, "com.microsoft.Gelu": 1, "com.microsoft.FastGelu": 1, "com.microsoft.SkipLayerNormalization": 1}
		}
		for _, op := range []string{"LayerNormalization", "com.microsoft.Gelu", "com.microsoft.FastGelu", "com.microsoft.SkipLayerNormalization", "Erf", "Tanh", "ReduceMean"} {
			w := want[op]
			if op == "Erf" || op == "Tanh" {
				w = 1 - min(1, want["com.microsoft.Gelu"])
			}
			if op == "ReduceMean" {
				w = 4 * (1 - min(1, want["LayerNormalization"]))
			}
			if ops[op] != w {
				t.Errorf("--ort-contrib %v: %d %s, want %d (ops %v)", contrib, ops[op], op, w, ops)
			}
		}
		if res.Check == nil || !res.Check.Pass {
			t.Errorf("--ort-contrib %v: check %+v", contrib, res.Check)
		}
	}
}

// TestOptimizeCheckOnData: a model ORT cannot run on random inputs (a
// Reshape whose shape input must fit its data) fails the check with
// ORT's message naming the op and a pointer to --data; with its recorded
// inputs as --data the check runs on them and the model is written.
func TestOptimizeCheckOnData(t *testing.T) {
	ortenv.Require(t)
	dir := filepath.Join(testenv.Data(t, "onnx-testdata/node"), "test_reshape_extended_dims")
	out := filepath.Join(t.TempDir(), "r.onnx")
	status, _, stderr := run(t, "optimize", filepath.Join(dir, "model.onnx"), "-o", out)
	if status != 1 || !strings.Contains(stderr, "checking the result on random inputs") || !strings.Contains(stderr, "Reshape node") ||
		!strings.Contains(stderr, "give them with --data") {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a model whose check failed was written: %v", err)
	}
	status, stdout, stderr := run(t, "optimize", filepath.Join(dir, "model.onnx"), "-o", out, "--data", filepath.Join(dir, "test_data_set_0"))
	if status != 0 || !strings.Contains(stdout, "samples of "+filepath.Join(dir, "test_data_set_0")) {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	// A Slice whose start is out of bounds gives an empty output on its
	// recorded inputs: a valid result (the check used to divide by its
	// zero elements and crash).
	dir = filepath.Join(testenv.Data(t, "onnx-testdata/node"), "test_slice_start_out_of_bounds")
	out = filepath.Join(t.TempDir(), "s.onnx")
	if status, stdout, stderr := run(t, "optimize", filepath.Join(dir, "model.onnx"), "-o", out, "--data", filepath.Join(dir, "test_data_set_0")); status != 0 {
		t.Fatalf("empty output: status %d: %s\n%s", status, stderr, stdout)
	}
}
