package ptq_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestFallbackBudget: the accuracy control stops at its share of the
// budget. A range forced narrow on the MNIST CNN's third conv input makes
// the guard fire; unbounded, the fallback keeps that conv float and
// passes; with no time at all it refuses and says the budget stopped it.
func TestFallbackBudget(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	opts := ptq.Options{Input: testenv.Model("mnist_cnn.onnx"), Output: filepath.Join(dir, "q.onnx"),
		CalibData: testenv.Data(t, "mnist/train_images.npy"), CalibOpts: data.Options{Samples: 256, Batch: 64},
		EvalData: testenv.Data(t, "mnist/test_images.npy"), EvalOpts: data.Options{Samples: 500, Batch: 100},
		EvalLabels: testenv.Data(t, "mnist/test_labels.npy"), NoLatency: true}
	opts.CalibCache = narrowedCache(t, opts, dir, "bad.json", func(float64) float64 { return 0.5 })
	res, err := ptq.Run(opts)
	if err != nil || len(res.FellBack) == 0 {
		t.Fatalf("unbounded fallback: %v (fell back %v)", err, res.FellBack)
	}
	opts.FallbackBudget = time.Nanosecond
	_, err = ptq.Run(opts)
	var ge *ptq.GuardError
	if !errors.As(err, &ge) || !strings.Contains(ge.Guard.Fallback, "share of the budget") {
		t.Fatalf("with no time: %v", err)
	}
}
