package optimize

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// TestCheckRefusesAChangedModel: the check is what stops a wrong result
// from being written, so feed it a model that computes something else.
func TestCheckRefusesAChangedModel(t *testing.T) {
	ortenv.Require(t)
	in := testenv.Model("mnist_cnn.onnx")
	m := testgraph.LoadFile(t, in)
	for _, n := range m.Graph.Nodes {
		if n.OpType == "BatchNormalization" {
			n.SetAttr(&graph.Attr{Name: "epsilon", Type: graph.AttrFloat, Float: 0.5})
			break
		}
	}
	b, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := check(Options{Input: in, Output: "out.onnx"}, m, graph.Serialized{Bytes: b})
	if err != nil {
		t.Fatal(err)
	}
	if c.Pass {
		t.Fatal("a model with a different BatchNormalization epsilon passed the check")
	}
	if msg := firstFailure(c); !strings.Contains(msg, `"logits"`) {
		t.Errorf("failure %q does not name the output", msg)
	}
	// The unchanged model passes.
	orig, _ := graph.LoadFile(in)
	defer orig.Close()
	ob, _ := graph.Marshal(orig)
	if c, err := check(Options{Input: in, Output: "out.onnx"}, orig, graph.Serialized{Bytes: ob}); err != nil || !c.Pass {
		t.Errorf("the original failed its own check: %v %+v", err, c)
	}
}

// TestCheckAvoidsIntegerDivisionByZero: the check's default random
// integers are all 0, and ORT's integer Div kills the process (SIGFPE) on
// a zero divisor. The check draws from [1, 2) instead and says so; a range
// the user gave that holds 0 is refused with one line.
func TestCheckAvoidsIntegerDivisionByZero(t *testing.T) {
	ortenv.Require(t)
	b := testgraph.New(t, "div", 17)
	x, y := b.Value("x"), b.Value("y")
	for _, v := range []*graph.Value{x, y} {
		v.Type = graph.TensorType(graph.Int32, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(3)})
		b.Graph.Inputs = append(b.Graph.Inputs, v)
	}
	q := b.Node("q", "Div", x, y).Output(0)
	q.Type = x.Type.Clone()
	b.Graph.Outputs = []*graph.Value{q}
	in := filepath.Join(t.TempDir(), "div.onnx")
	if err := graph.Save(b.Model, in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := Options{Input: in, Output: filepath.Join(t.TempDir(), "out.onnx"), Level: 2, Check: true}
	res, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Check.Notes) != 1 || !strings.Contains(res.Check.Notes[0], `"y" drawn from [1, 2)`) {
		t.Errorf("notes %q, want one about the range of the divisor y", res.Check.Notes)
	}
	opts.DataOpts = data.Options{Low: -5, High: 5}
	if _, err := Run(opts); err == nil || !strings.Contains(err.Error(), "--range y:1,10") || !errors.Is(err, ErrCheck) {
		t.Errorf("a range holding 0: got %v, want a check error naming --range", err)
	}
	// A divisor that only a shape feeds is no hazard.
	b = testgraph.New(t, "div-by-shape", 17)
	x = b.Value("x")
	x.Type = graph.TensorType(graph.Int64, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(3)})
	b.Graph.Inputs = []*graph.Value{x}
	q = b.Node("q", "Div", x, b.Node("s", "Shape", x).Output(0)).Output(0)
	b.Graph.Outputs = []*graph.Value{q}
	if n, _, _, _ := zeroHazard(b.Model); n != nil {
		t.Errorf("Div by a shape: hazard %s", n)
	}
}
