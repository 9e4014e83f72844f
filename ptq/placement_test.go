package ptq_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
)

// --placement all-int8 writes byte for byte what optc quantize wrote
// before placement existed, and says so in its placement record.
func TestPlacementAllINT8IsToday(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	run := func(mode, out string) *ptq.Result {
		res, err := ptq.Run(ptq.Options{Input: testenv.Model("mnist_cnn.onnx"), Output: filepath.Join(dir, out),
			CalibData: testenv.Data(t, "mnist/train_images.npy"), CalibOpts: data.Options{Samples: 64, Batch: 16},
			CalibCache: filepath.Join(dir, "calib.json"), Method: calibrate.Percentile,
			Quant: quantize.Options{Target: quantize.TargetORTCPU}, Session: ort.DefaultOptions(), NoLatency: true, Placement: mode})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	today, all := run("", "today.onnx"), run(placement.ModeAllINT8, "all.onnx")
	a, err := os.ReadFile(filepath.Join(dir, "today.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "all.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("--placement all-int8 wrote another model than optc quantize without placement")
	}
	p := all.Placement
	if today.Placement != nil || p == nil || p.Mode != placement.ModeAllINT8 || p.Recommended != placement.RecommendINT8 ||
		len(p.Regions) != len(all.Quantize.Quantized) || len(p.KeepFloat()) != 0 {
		t.Errorf("placement records: without %+v, all-int8 %+v", today.Placement, p)
	}
}
