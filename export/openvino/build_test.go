package openvino_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/tools/targettest"
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
	ov, err := os.ReadFile(filepath.Join(out, "openvino/model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	fp32, err := os.ReadFile(filepath.Join(out, "model.fp32.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ov, fp32) {
		t.Error("openvino/model.onnx is not the optimized float model")
	}
}
