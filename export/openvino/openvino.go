// Package openvino is the OpenVINO target of optc build: the optimized
// float model as standard ONNX, which OpenVINO's ONNX frontend (and ovc,
// its converter to IR) reads. The build's passes emit ONNX Runtime's own
// operators (com.microsoft) only on request, so the float model is
// standard unless the input was not; a node of another domain fails the
// target, naming the node, rather than writing a model OpenVINO refuses.
package openvino

import (
	"fmt"

	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
)

// Target is the openvino target.
type Target struct{}

func (Target) Name() string { return "openvino" }
func (Target) Doc() string {
	return "OpenVINO: the optimized float model as standard ONNX (no ONNX Runtime operators), for its ONNX frontend or ovc"
}
func (Target) Section() string         { return "" }
func (Target) Scheme() quantize.Target { return "" }
func (Target) Artifacts() []string     { return []string{"openvino/model.onnx"} }

// Export writes openvino/model.onnx. It computes what model.fp32.onnx
// computes (the same graph), so the build checks it once, as that model.
func (Target) Export(h target.Host) (any, error) {
	m, err := graph.LoadFile(h.Float())
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := standard(m.Graph); err != nil {
		return nil, err // the build names the input model, where the node comes from
	}
	out, err := h.Path("openvino/model.onnx")
	if err != nil {
		return nil, err
	}
	if err := graph.Save(m, out, graph.SaveOptions{}); err != nil {
		return nil, err
	}
	h.Add("openvino/model.onnx", "model-copy", "fp32", h.Rel(h.Float()))
	return nil, nil
}

// standard refuses a node outside the default ONNX domain, in g or any
// subgraph: com.microsoft is ONNX Runtime's, and optc does not know which
// operators of other domains (ai.onnx.ml included) OpenVINO reads.
func standard(g *graph.Graph) error {
	for _, n := range g.Nodes {
		if n.Domain != "" && n.Domain != "ai.onnx" {
			return fmt.Errorf("node %s is not a standard ONNX operator; the openvino target writes standard ONNX only (OpenVINO's ONNX frontend does not read other domains)", n)
		}
		for _, sub := range n.Subgraphs() {
			if err := standard(sub); err != nil {
				return err
			}
		}
	}
	return nil
}
