package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestBuildNCHWc builds PaddleOCR cls (FP32) with the nchwc stage at a
// block of 16: the shaped model is checked exact and timed against the
// -O2 model; whichever way the timing goes, what the build deploys, lists
// and writes must agree with the stage's record.
func TestBuildNCHWc(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	c := clsConfig(t, out)
	c.Runtime.NCHWc = "16"
	res := run(t, c)
	l := res.Layout
	if l == nil || l.Block != 16 || l.Convs == 0 || l.Bridges != 18 || l.Timing == nil || l.Reason == "" {
		t.Fatalf("nchwc record %+v, want a block of 16, padded convs, cls's 18 HardSwish bridged, a timing", l)
	}
	t.Logf("nchwc: %d convs, %d bridges: %s", l.Convs, l.Bridges, l.Reason)
	listed := false
	for _, a := range res.Artifacts {
		if a.Path == layoutModel {
			listed = true
		}
		if a.Path == "ort/model.ort" {
			want := "model.fp32.onnx"
			if l.Deployed {
				want = layoutModel
			}
			if a.From != want {
				t.Errorf("ort/model.ort was written from %s, want %s (deployed %v)", a.From, want, l.Deployed)
			}
		}
	}
	_, err := os.Stat(filepath.Join(out, layoutModel))
	if listed != l.Deployed || (err == nil) != l.Deployed {
		t.Errorf("deployed %v but listed %v, on disk %v", l.Deployed, listed, err == nil)
	}
	if l.Deployed {
		if !l.Timing.Faster || !strings.Contains(strings.Join(res.Notes, "\n"), "nchwc: the ORT and Triton artifacts are "+layoutModel) {
			t.Errorf("deployed without a confirmed win or a note: %+v, notes %q", l.Timing, res.Notes)
		}
		m, err := graph.LoadFile(filepath.Join(out, layoutModel))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, n := range m.Graph.Nodes {
			if w := n.Input(1); n.OpType == "Conv" && w.Const != nil && w.Const.Dims[0]%16 != 0 {
				t.Errorf("conv %s has %d output channels", n.Name, w.Const.Dims[0])
			}
		}
	}
}

func TestNCHWcBlockChoice(t *testing.T) {
	for _, tc := range []struct {
		nchwc, level string
		want         int
		why          string
	}{
		{"off", "all", 0, "off"},
		{"auto", "extended", 0, "level extended"},
		{"8", "all", 8, ""},
		{"on", "all", ort.NCHWcBlock(), ""},
		{"auto", "all", ort.NCHWcBlock(), ""},
	} {
		b := &builder{c: config.Default()}
		b.c.Runtime.NCHWc, b.c.Runtime.Level = tc.nchwc, tc.level
		got, why := b.nchwcBlock()
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("nchwc %s at level %s: block %d (%q), want %d (%q)", tc.nchwc, tc.level, got, why, tc.want, tc.why)
		}
	}
}

// runtime.nchwc on replays a recorded decision: the shaped model is
// deployed without timing, so two builds write the same artifacts.
func TestBuildNCHWcOn(t *testing.T) {
	if ort.NCHWcBlock() == 0 {
		t.Skip("ORT has no NCHWc layout on this CPU")
	}
	var sums [2]string
	for i := range sums {
		out := filepath.Join(t.TempDir(), "out")
		c := clsConfig(t, out)
		c.Runtime.NCHWc = "on"
		res := run(t, c)
		if l := res.Layout; l == nil || !l.Deployed || l.Timing != nil || l.Convs == 0 {
			t.Fatalf("nchwc on: %+v, want the shaped model deployed untimed", l)
		}
		sums[i] = fileSHA(t, filepath.Join(out, layoutModel)) // the .ort file ORT does not write deterministically
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds with nchwc on wrote different %s files", layoutModel)
	}
}

// clsConfig is an FP32 build of PaddleOCR cls for the ORT target, timed
// briefly on one thread.
func clsConfig(t *testing.T, out string) config.Config {
	ortenv.Require(t)
	c := config.Default()
	c.Model = testenv.Data(t, filepath.Join("ocr-models", "ch_ppocr_mobile_v2.0_cls_infer.onnx"))
	c.Output = out
	c.Shapes = map[string][]int64{"x": {-1, 3, 48, 192}}
	c.Latency.Duration = config.Duration{Duration: 50 * time.Millisecond}
	c.Runtime.Threads = 1
	return c
}
