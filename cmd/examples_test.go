package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestHelpExamples runs every line of every command's Examples: section
// through the CLI, in one folder holding the files they name (the MNIST
// CNN and slices of MNIST), and checks that every command has examples.
func TestHelpExamples(t *testing.T) {
	ortenv.Require(t)
	root := NewRoot(&IO{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if c.HasParent() && c.Example == "" && c.Runnable() && !c.HasSubCommands() {
			t.Errorf("optc %s has no Examples: section", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	dir := t.TempDir()
	model, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "model.onnx"), model)
	slice := func(from, to string, n int64) {
		src, err := data.ReadNpy(testenv.Data(t, "mnist/"+from))
		if err != nil {
			t.Fatal(err)
		}
		b, err := src.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		dims := append([]int64{n}, src.Dims[1:]...)
		dst, err := graph.NewTensor(to, src.DType, dims, b[:n*int64(len(b))/src.Dims[0]])
		if err != nil {
			t.Fatal(err)
		}
		if err := data.WriteNpy(filepath.Join(dir, to), dst); err != nil {
			t.Fatal(err)
		}
	}
	slice("train_images.npy", "calib.npy", 256)
	slice("test_images.npy", "eval.npy", 500)
	slice("test_labels.npy", "labels.npy", 500)
	t.Chdir(dir)
	for _, e := range examples {
		args := strings.Fields(e.line)[1:]
		redirect := ""
		if i := len(args) - 2; i > 0 && args[i] == ">" {
			args, redirect = args[:i], args[i+1]
		}
		status, out, stderr := run(t, args...)
		if status != 0 {
			t.Errorf("%s: status %d: %s", e.line, status, stderr)
			continue
		}
		if redirect != "" {
			writeFile(t, redirect, []byte(out))
		}
	}
	// What the examples wrote is what they say.
	if _, err := os.Stat("optc.yaml"); err == nil {
		if status, _, stderr := run(t, "build", "--config", "optc.yaml", "--print-config"); status != 0 {
			t.Errorf("the printed config does not load: %s", stderr)
		}
	}
	for _, f := range []string{"model.int8.onnx", "model.dynamic.onnx", "model.trt.onnx", "model.external.onnx.data", "outputs", "base/report.json", "out/report.json", "optc.bash"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("an example did not write %s: %v", f, err)
		}
	}
}
