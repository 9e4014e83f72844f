// Package targettest builds the committed MNIST CNN for one deployment
// target, as a target package's own test does: the build's defaults, short
// timing windows, the result and the output folder.
package targettest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// BuildMNIST builds mnist_cnn.onnx for target alone into a temporary
// folder, and fails t unless "all" includes the target.
func BuildMNIST(t *testing.T, target string) (*build.Result, string) {
	t.Helper()
	ortenv.Require(t)
	c := config.Default()
	c.Model = testenv.Model("mnist_cnn.onnx")
	c.Output = filepath.Join(t.TempDir(), "out")
	c.Targets = []string{target}
	c.Latency.Duration = config.Duration{Duration: 50 * time.Millisecond}
	res, err := build.Run(context.Background(), build.Options{Config: c, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c.Targets = []string{"all"}
	if all, err := c.ExpandTargets(); err != nil || !slices.Contains(all, target) {
		t.Errorf("all = %v, %v: want %s in it", all, err, target)
	}
	return res, c.Output
}

// Artifact is the artifact at path, nil when the build wrote none.
func Artifact(res *build.Result, path string) *build.Artifact {
	for _, a := range res.Artifacts {
		if a.Path == path {
			return a
		}
	}
	return nil
}
