package openvino_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestBuildMNIST builds the MNIST CNN for openvino alone with the build's
// defaults: the artifact is the optimized float model, byte for byte, in
// the manifest under its target, and "all" includes the target.
func TestBuildMNIST(t *testing.T) {
	ortenv.Require(t)
	c := config.Default()
	c.Model = testenv.Model("mnist_cnn.onnx")
	c.Output = filepath.Join(t.TempDir(), "out")
	c.Targets = []string{"openvino"}
	c.Latency.Duration = config.Duration{Duration: 50 * time.Millisecond}
	res, err := build.Run(context.Background(), build.Options{Config: c, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, a := range res.Artifacts {
		if a.Path == "openvino/model.onnx" {
			found = a.Target == "openvino" && a.Kind == "model-copy" && a.From == "model.fp32.onnx" && a.SHA256 != ""
		}
	}
	if !found {
		t.Fatalf("no openvino/model.onnx artifact as expected in %+v", res.Artifacts)
	}
	ov, err := os.ReadFile(filepath.Join(c.Output, "openvino/model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	fp32, err := os.ReadFile(filepath.Join(c.Output, "model.fp32.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ov, fp32) {
		t.Error("openvino/model.onnx is not the optimized float model")
	}
	c.Targets = []string{"all"}
	if all, err := c.ExpandTargets(); err != nil || !slices.Contains(all, "openvino") {
		t.Errorf("all = %v, %v: want openvino in it", all, err)
	}
}
