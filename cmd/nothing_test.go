package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
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
	convBranches(t, b, ifn, x, 3, 4, 20)
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

// dataDependent has what a detector's post-processing has: inside an If
// branch a scalar of undeclared shape (a maximum plus one, as in NMS's
// per-class offsets) and, in the main graph, an output whose length
// depends on the data (NonZero of scores over a threshold).
func dataDependent(t *testing.T) string {
	b := testgraph.New(t, "detector", 13)
	x := b.Input("x", 1, 8)
	mm := b.Node("score", "MatMul", x, b.Floats("w", []int64{8, 8}, seededFloats(31, 64, 0.5)...))
	sum := b.Node("sum", "ReduceSum", x)
	sum.SetAttr(&graph.Attr{Name: "keepdims", Type: graph.AttrInt, Int: 0})
	cond := b.Node("gt", "Greater", sum.Output(0), b.Floats("zero", []int64{}, 0))
	ifn := b.NodeTo("if", "If", b.Value("offset"), cond.Output(0))
	for _, br := range []struct{ attr, reduce string }{{"then_branch", "ReduceMax"}, {"else_branch", "ReduceMin"}} {
		g := graph.NewGraph(br.attr)
		g.Parent, g.Owner = b.Graph, ifn
		r, _ := g.NewValue(br.attr + "_r")
		n, err := g.AddNode(br.reduce, []*graph.Value{mm.Output(0)}, []*graph.Value{r})
		if err != nil {
			t.Fatal(err)
		}
		n.SetAttr(&graph.Attr{Name: "keepdims", Type: graph.AttrInt, Int: 0})
		o, _ := g.NewValue(br.attr + "_plus_one")
		if _, err := g.AddNode("Add", []*graph.Value{r, b.Floats(br.attr+"_one", []int64{}, 1)}, []*graph.Value{o}); err != nil {
			t.Fatal(err)
		}
		g.Outputs = []*graph.Value{o}
		ifn.SetAttr(&graph.Attr{Name: br.attr, Type: graph.AttrGraph, Graph: g})
	}
	shifted := b.NodeTo("shift", "Sub", b.Value("shifted"), mm.Output(0), ifn.Output(0))
	b.Output(shifted.Output(0), 1, 8)
	pos := b.Node("pos", "Greater", mm.Output(0), b.Floats("thr", []int64{}, 0.25))
	nz := b.NodeTo("nz", "NonZero", b.Value("kept"), pos.Output(0))
	kept := nz.Output(0)
	kept.Type = graph.TensorType(graph.Int64, graph.Shape{graph.StaticDim(2), graph.SymbolicDim("k")})
	b.Graph.Outputs = append(b.Graph.Outputs, kept)
	return saveModel(t, b, "detector.onnx")
}

// TestQuantizeDataDependentShapes: calibration fetches a scalar of
// undeclared shape from an If branch (it used to stop with "Invalid
// tensor shape: The shape has no dimensions"), and a check where the
// number of kept elements differs between float and INT8 counts those
// runs as disagreeing instead of failing the comparison.
func TestQuantizeDataDependentShapes(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	var res struct {
		Accuracy struct {
			Outputs []struct {
				Name            string `json:"name"`
				ShapeMismatches int64  `json:"shape_mismatches"`
			} `json:"outputs"`
		} `json:"accuracy"`
		Guard struct {
			Checks []struct {
				Metric string `json:"metric"`
				Output string `json:"output"`
				Pass   bool   `json:"pass"`
			} `json:"checks"`
		} `json:"guard"`
	}
	decode(t, run2json(t, "quantize", dataDependent(t), "-o", filepath.Join(dir, "q.onnx"), "--calib-data", "random", "--no-guard", "--json"), &res)
	seen := map[string]bool{}
	for _, o := range res.Accuracy.Outputs {
		seen[o.Name] = true
		if o.ShapeMismatches > 0 {
			found := false
			for _, c := range res.Guard.Checks {
				found = found || (c.Output == o.Name && strings.HasPrefix(c.Metric, "runs whose output shape differs") && !c.Pass)
			}
			if !found {
				t.Errorf("%s: %d shape mismatches, and no failed check says so: %+v", o.Name, o.ShapeMismatches, res.Guard.Checks)
			}
		}
	}
	if !seen["shifted"] || !seen["kept"] {
		t.Errorf("outputs compared: %v", seen)
	}
}
