package openvino

import (
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testgraph"
)

// TestStandardRefusesOtherDomains: a com.microsoft node is refused by
// name; a standard graph passes.
func TestStandardRefusesOtherDomains(t *testing.T) {
	b := testgraph.New(t, "ov", 17)
	x := b.Input("x", 2)
	r := b.Node("relu", "Relu", x)
	b.Output(r.Output(0), 2)
	if err := standard(b.Model.Graph); err != nil {
		t.Fatalf("standard graph refused: %v", err)
	}
	g := b.Node("gelu", "Gelu", r.Output(0))
	g.Domain = "com.microsoft"
	b.Output(g.Output(0), 2)
	err := standard(b.Model.Graph)
	if err == nil || !strings.Contains(err.Error(), `node "gelu" (com.microsoft.Gelu) is not a standard ONNX operator`) {
		t.Fatalf("got %v", err)
	}
}
