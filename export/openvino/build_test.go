package openvino_test

import (
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/tools/targettest"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestBuildMNIST builds the MNIST CNN for openvino alone with the build's
// defaults: the artifact is the optimized float model, byte for byte, in
// the manifest under its target, and "all" includes the target.
func TestBuildMNIST(t *testing.T) {
	res, out := targettest.BuildMNIST(t, "openvino")
	a := targettest.Artifact(res, "openvino/model.onnx")
	if a == nil || a.Target != "openvino" || a.Kind != "model-copy" || a.From != "model.fp32.onnx" || a.SHA256 == "" {
		t.Fatalf("no openvino/model.onnx artifact as expected in %+v", res.Artifacts)
	}
	if !testenv.SameFile(t, filepath.Join(out, "openvino/model.onnx"), filepath.Join(out, "model.fp32.onnx")) {
		t.Error("openvino/model.onnx is not the optimized float model")
	}
}
