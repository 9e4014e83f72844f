package compare_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// TestOutputsTheBindingCannotFetch: test_if_opt returns an empty optional
// (fetching it crashed the process). Alone it leaves nothing to compare,
// which is an error of its own kind, not a pass; with a tensor output
// beside it, the tensor is compared and the optional skipped with a note.
func TestOutputsTheBindingCannotFetch(t *testing.T) {
	ortenv.Require(t)
	path := testenv.Data(t, "onnx-testdata/node/test_if_opt/model.onnx")
	opts := compare.Options{ModelA: path, ModelB: path, Data: "random", Session: ort.DefaultOptions()}
	_, err := compare.Models(opts)
	var nx *compare.NotExpressibleError
	if !errors.As(err, &nx) || !errors.Is(err, ort.ErrNotExpressible) || !strings.Contains(err.Error(), `output "sequence" is an optional`) {
		t.Fatalf("got %v, want nothing to compare, naming the optional", err)
	}

	mixed := testgraph.TensorBesideOptional(t, path)
	opts.ModelA, opts.ModelB = mixed, mixed
	res, err := compare.Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 1 || res.Outputs[0].Name != "flag" || !res.Pass {
		t.Errorf("compared %+v (pass %v), want flag alone, passing", res.Outputs, res.Pass)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], `"sequence"`) {
		t.Errorf("skipped %q, want the optional", res.Skipped)
	}
}
