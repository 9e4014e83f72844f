package optimize

import (
	"strings"
	"testing"

	"optc/graph"
	"optc/internal/ortenv"
	"optc/internal/testenv"
)

// TestCheckRefusesAChangedModel: the check is what stops a wrong result
// from being written, so feed it a model that computes something else.
func TestCheckRefusesAChangedModel(t *testing.T) {
	ortenv.Require(t)
	in := testenv.Model("mnist_cnn.onnx")
	m, err := graph.LoadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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
	c, err := check(Options{Input: in, Output: "out.onnx"}, graph.Serialized{Bytes: b})
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
	if c, err := check(Options{Input: in, Output: "out.onnx"}, graph.Serialized{Bytes: ob}); err != nil || !c.Pass {
		t.Errorf("the original failed its own check: %v %+v", err, c)
	}
}
