package cmd

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// Models declare their inputs as they come: these tests run optc's
// commands with their defaults on the declarations that used to stop it
// (a static batch of 1, recurrent state with the batch on axis 1, weighted
// nodes inside If branches).

// convWeights is a seeded conv weight [out, in, k, k].
func convWeights(b *testgraph.Builder, name string, out, in, k int64, seed uint64) *graph.Value {
	r := rand.New(rand.NewPCG(seed, 7))
	w := make([]float32, out*in*k*k)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.3)
	}
	return b.Floats(name, []int64{out, in, k, k}, w...)
}

// convBranches gives If node ifn a then branch Relu(Conv(x)) and an else
// branch Sigmoid(Conv(x)), each conv from in to out channels (1x1,
// seeded from seed), their outputs of undeclared shape.
func convBranches(t *testing.T, b *testgraph.Builder, ifn *graph.Node, x *graph.Value, in, out int64, seed uint64) {
	t.Helper()
	for i, br := range []struct{ attr, act string }{{"then_branch", "Relu"}, {"else_branch", "Sigmoid"}} {
		g := graph.NewGraph(br.attr)
		g.Parent, g.Owner = b.Graph, ifn
		w := convWeights(b, br.attr+"_w", out, in, 1, seed+uint64(i))
		cv, _ := g.NewValue(br.attr + "_conv")
		if _, err := g.AddNode("Conv", []*graph.Value{x, w}, []*graph.Value{cv}); err != nil {
			t.Fatal(err)
		}
		g.Nodes[0].Name = br.attr + "_conv"
		av, _ := g.NewValue(br.attr + "_act")
		if _, err := g.AddNode(br.act, []*graph.Value{cv}, []*graph.Value{av}); err != nil {
			t.Fatal(err)
		}
		av.Type = graph.TensorType(graph.Float, nil)
		g.Outputs = []*graph.Value{av}
		ifn.SetAttr(&graph.Attr{Name: br.attr, Type: graph.AttrGraph, Graph: g})
	}
}

func saveModel(t *testing.T, b *testgraph.Builder, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := graph.Save(b.Model, p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// staticBatchConv is conv-relu-conv with input float32[1,3,16,16]: the
// shape torch.onnx.export gives without dynamic_axes.
func staticBatchConv(t *testing.T) string {
	b := testgraph.New(t, "static", 13)
	x := b.Input("x", 1, 3, 16, 16)
	c1 := b.Node("conv1", "Conv", x, convWeights(b, "w1", 8, 3, 3, 1))
	c1.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
	r := b.Node("relu", "Relu", c1.Output(0))
	c2 := b.Node("conv2", "Conv", r.Output(0), convWeights(b, "w2", 4, 8, 1, 2))
	b.Output(c2.Output(0), 1, 4, 16, 16)
	return saveModel(t, b, "static.onnx")
}

func TestStaticBatchModelQuantizes(t *testing.T) {
	ortenv.Require(t)
	m := staticBatchConv(t)
	dir := t.TempDir()
	calib := filepath.Join(dir, "calib.npy")
	r := rand.New(rand.NewPCG(3, 3))
	vals := make([]float32, 32*3*16*16)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	tt, _ := graph.NewFloat32Tensor("x", []int64{32, 3, 16, 16}, vals)
	if err := data.WriteNpy(calib, tt); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"optimize", m, "-o", filepath.Join(dir, "opt.onnx")},
		{"quantize", m, "--calib-data", calib, "-o", filepath.Join(dir, "q.onnx")},
		{"quantize", m, "--calib-data", "random", "-o", filepath.Join(dir, "qr.onnx")},
		{"compare", m, filepath.Join(dir, "q.onnx"), "--data", calib, "--atol", "1"},
	} {
		status, stdout, stderr := run(t, args...)
		if status != 0 {
			t.Fatalf("optc %s: status %d: %s", strings.Join(args[:1], " "), status, stderr)
		}
		if args[0] == "quantize" && !strings.Contains(stdout, "p50 batch 1") {
			t.Errorf("optc %s: no timing at the model's batch of 1:\n%s", args[0], stdout)
		}
	}
	// A batch size the user asks for that the model cannot take is still
	// an error, naming both.
	status, stdout, stderr := run(t, "run", m, "--data", calib, "--batch", "8", "-o", filepath.Join(dir, "run"))
	failsCleanly(t, status, 1, stdout, stderr, "static batch size of 1")
}

// TestStateInputs feeds a model whose second input is recurrent state
// [layers, batch, hidden]: random data and a .npy of the first input alone
// both work, the state filled with zeros.
func TestStateInputs(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "state", 13)
	x := b.Value("x")
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("batch"), graph.StaticDim(4)})
	h := b.Value("h0")
	h.Type = graph.TensorType(graph.Float, graph.Shape{graph.StaticDim(2), graph.SymbolicDim("batch"), graph.StaticDim(4)})
	b.Graph.Inputs = append(b.Graph.Inputs, x, h)
	sum := b.Node("sum", "Add", x, h) // [2, batch, 4]
	y := b.Node("relu", "Relu", sum.Output(0))
	y.Output(0).Type = graph.TensorType(graph.Float, graph.Shape{graph.StaticDim(2), graph.SymbolicDim("batch"), graph.StaticDim(4)})
	b.Graph.Outputs = append(b.Graph.Outputs, y.Output(0))
	m := saveModel(t, b, "state.onnx")

	dir := t.TempDir()
	xs := make([]float32, 6*4)
	for i := range xs {
		xs[i] = float32(i)
	}
	tt, _ := graph.NewFloat32Tensor("x", []int64{6, 4}, xs)
	npy := filepath.Join(dir, "x.npy")
	if err := data.WriteNpy(npy, tt); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", m, "--data", "random", "--batch", "3", "-o", filepath.Join(dir, "r1")},
		{"run", m, "--data", npy, "--batch", "3", "-o", filepath.Join(dir, "r2")},
		{"optimize", m, "-o", filepath.Join(dir, "o.onnx")},
	} {
		status, _, stderr := run(t, args...)
		if status != 0 {
			t.Fatalf("optc %s: status %d: %s", strings.Join(args, " "), status, stderr)
		}
	}
}

// TestIfBranchesQuantize quantizes a model whose convs sit in If
// branches: the branch the calibration data takes is quantized inside
// the branch, the other stays float with a reason.
func TestIfBranchesQuantize(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "ifnet", 13)
	x := b.Value("x")
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(3), graph.StaticDim(8), graph.StaticDim(8)})
	b.Graph.Inputs = append(b.Graph.Inputs, x)
	c1 := b.Node("conv1", "Conv", x, convWeights(b, "w1", 4, 3, 1, 1))
	y1 := b.Node("relu1", "Relu", c1.Output(0)).Output(0)
	mean := b.Node("mean", "ReduceMean", x)
	mean.SetAttr(&graph.Attr{Name: "keepdims", Type: graph.AttrInt, Int: 0})
	zero := b.Floats("zero", []int64{}, 0)
	cond := b.Node("gt", "Greater", mean.Output(0), zero)
	ifn := b.Node("if", "If", cond.Output(0))
	convBranches(t, b, ifn, y1, 4, 4, 10)
	c2 := b.Node("conv2", "Conv", ifn.Output(0), convWeights(b, "w2", 2, 4, 1, 3))
	c2.Output(0).Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(2), graph.StaticDim(8), graph.StaticDim(8)})
	b.Graph.Outputs = append(b.Graph.Outputs, c2.Output(0))
	m := saveModel(t, b, "ifnet.onnx")

	out := filepath.Join(t.TempDir(), "q.onnx")
	// Random data in [0, 1): the mean is positive, the then branch runs.
	status, stdout, stderr := run(t, "quantize", m, "--calib-data", "random", "--range", "0,1", "-o", out)
	if status != 0 {
		t.Fatalf("quantize: status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, `float: "else_branch_conv" (Conv)`) {
		t.Errorf("the branch calibration never took is not reported float:\n%s", stdout)
	}
	q, err := graph.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, n := range q.Graph.Nodes {
		if n.OpType == "If" {
			for _, n := range n.Attr("then_branch").Graph.Nodes {
				ops[n.OpType]++
			}
		}
	}
	if ops["QuantizeLinear"] == 0 || ops["DequantizeLinear"] < 2 {
		t.Errorf("then branch ops %v: want its Conv quantized inside the branch", ops)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
}

// TestSequenceLengthFromTheData: a model with a dynamic sequence length
// (x float32[batch, seq, 8]) quantizes and builds from its calibration
// file without --shape: the length random inputs and timing cannot guess
// comes from the data, and the output says so. Without data, optimize
// still asks for --shape in one line.
func TestSequenceLengthFromTheData(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "seq", 13)
	x := b.Input("x")
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("batch"), graph.SymbolicDim("seq"), graph.StaticDim(8)})
	r := rand.New(rand.NewPCG(5, 5))
	w := make([]float32, 8*8)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.3)
	}
	mm := b.Node("mm", "MatMul", x, b.Floats("w", []int64{8, 8}, w...))
	relu := b.Node("relu", "Relu", mm.Output(0))
	out := relu.Output(0)
	out.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("batch"), graph.SymbolicDim("seq"), graph.StaticDim(8)})
	b.Graph.Outputs = append(b.Graph.Outputs, out)
	m := saveModel(t, b, "seq.onnx")

	dir := t.TempDir()
	calib := filepath.Join(dir, "calib.npy")
	vals := make([]float32, 24*12*8)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	tt, _ := graph.NewFloat32Tensor("x", []int64{24, 12, 8}, vals)
	if err := data.WriteNpy(calib, tt); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := run(t, "quantize", m, "--calib-data", calib, "-o", filepath.Join(dir, "q.onnx"))
	if status != 0 {
		t.Fatalf("optc quantize: status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "shapes       x:?,12,8, from the data") || !strings.Contains(stdout, "p50 batch 8") {
		t.Errorf("optc quantize: no shapes line or no timing:\n%s", stdout)
	}
	status, stdout, stderr = run(t, "build", m, "--int8", "--calib-data", calib, "--target", "ort", "--budget", "1m", "-o", filepath.Join(dir, "build"))
	if status != 0 {
		t.Fatalf("optc build: status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "note: shapes from "+calib+" for what random inputs and timing cannot tell: x:?,12,8") {
		t.Errorf("optc build: no note of the shapes:\n%s", stdout)
	}
	status, stdout, stderr = run(t, "optimize", m, "-o", filepath.Join(dir, "o.onnx"))
	failsCleanly(t, status, 1, stdout, stderr, "--shape x:?,<seq>,8")
}
