package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testgraph"
)

// branchOnly is a model whose work sits inside If branches (a voice
// activity detector's shape): the main graph is a condition and an If,
// each branch a conv and an activation of the input.
func branchOnly(t *testing.T) string {
	b := testgraph.New(t, "branches", 13)
	x := b.Value("x")
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(3), graph.StaticDim(8), graph.StaticDim(8)})
	b.Graph.Inputs = append(b.Graph.Inputs, x)
	mean := b.Node("mean", "ReduceMean", x)
	mean.SetAttr(&graph.Attr{Name: "keepdims", Type: graph.AttrInt, Int: 0})
	cond := b.Node("gt", "Greater", mean.Output(0), b.Floats("zero", []int64{}, 0))
	ifn := b.NodeTo("if", "If", b.Value("y"), cond.Output(0))
	for i, br := range []struct{ attr, act string }{{"then_branch", "Relu"}, {"else_branch", "Sigmoid"}} {
		g := graph.NewGraph(br.attr)
		g.Parent, g.Owner = b.Graph, ifn
		w := convWeights(b, br.attr+"_w", 4, 3, 1, uint64(20+i))
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
	ifn.Output(0).Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(4), graph.StaticDim(8), graph.StaticDim(8)})
	b.Graph.Outputs = append(b.Graph.Outputs, ifn.Output(0))
	return saveModel(t, b, "branches.onnx")
}

// TestBuildNothingToQuantize: an INT8 build of a model whose main graph
// has nothing to quantize ships FP32 and says why, exit 0: what quantize
// made of the If branches is model.int8.onnx, and placement, with no
// region of the main graph to time, keeps the deployment FP32. A model
// with nothing quantizable at all writes no INT8 model and says so.
// Errors name no temporary folder and no stage twice.
func TestBuildNothingToQuantize(t *testing.T) {
	ortenv.Require(t)
	out := filepath.Join(t.TempDir(), "b")
	status, stdout, stderr := run(t, "build", branchOnly(t), "--int8", "--calib-data", "random", "-o", out, "--target", "ort", "--latency-duration", "50ms", "--latency-batches", "1", "-q")
	if status != 0 {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	if !strings.Contains(stdout, "the main graph has no quantized region to time") || strings.Contains(stderr+stdout, ".tmp-") {
		t.Errorf("stdout does not say why the deployment is FP32:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "model.int8.onnx")); err != nil {
		t.Errorf("the branches' INT8 model: %v", err)
	}

	relu := filepath.Join(t.TempDir(), "relu.onnx")
	b := testgraph.New(t, "relu", 13)
	r := b.NodeTo("relu", "Relu", b.Value("y"), b.Input("x", 1, 16))
	b.Output(r.Output(0), 1, 16)
	if err := graph.Save(b.Model, relu, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "r")
	status, stdout, stderr = run(t, "build", relu, "--int8", "--calib-data", "random", "-o", out, "--target", "all", "--latency-duration", "50ms", "--latency-batches", "1", "-q")
	if status != 0 || !strings.Contains(stdout, "nothing to quantize") {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	for _, f := range []string{"model.int8.onnx", "tensorrt/model.int8.qdq.onnx"} {
		if _, err := os.Stat(filepath.Join(out, f)); !os.IsNotExist(err) {
			t.Errorf("%s written for a model with nothing to quantize", f)
		}
	}
}
