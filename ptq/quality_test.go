package ptq

import (
	"testing"

	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
)

// The tensorrt model's quality is measured at level basic at most (its Q/DQ
// as float arithmetic, not ORT's CPU integer kernels); ort's at the
// level asked for. The deployment's threads are for timing: a check's are
// compare's to choose (0).
func TestQualitySession(t *testing.T) {
	for _, c := range []struct {
		target      quantize.Target
		level, want ort.Level
	}{
		{quantize.TargetTensorRT, ort.LevelAll, ort.LevelBasic},
		{quantize.TargetTensorRT, ort.LevelExtended, ort.LevelBasic},
		{quantize.TargetTensorRT, ort.LevelDisable, ort.LevelDisable},
		{quantize.TargetORT, ort.LevelAll, ort.LevelAll},
		{"", ort.LevelAll, ort.LevelAll},
	} {
		opts := Options{Session: ort.Options{Level: c.level, IntraOpThreads: 3}, Quant: quantize.Options{Target: c.target}}
		got := qualitySession(opts)
		if got.Level != c.want || got.IntraOpThreads != 0 {
			t.Errorf("%q at %v: %+v, want level %v and threads 0", c.target, c.level, got, c.want)
		}
	}
}
