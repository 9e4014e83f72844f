package calibrate

import (
	"bytes"
	"slices"
	"testing"

	"github.com/optc-dev/optc/internal/ortenv"
)

func TestPlanRuns(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	sizes := map[string]int64{"a": 40, "b": 40, "c": 150, "d": 10, "e": -1}
	if got := planRuns(names, sizes, 1000); got != nil {
		t.Errorf("everything fits one run, got %v", got)
	}
	// e is unknown and counts as the largest (150); c is over the limit
	// and runs alone.
	want := [][]string{{"a", "b"}, {"c"}, {"d"}, {"e"}}
	if got := planRuns(names, sizes, 100); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("limit 100: got %v, want %v", got, want)
	}
	want = [][]string{{"a", "b"}, {"c", "d"}, {"e"}}
	if got := planRuns(names, sizes, 160); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("limit 160: got %v, want %v", got, want)
	}
}

// Splitting a batch's activations over several runs changes what a run
// holds, not what any tensor sees: the calibration file is the same byte
// for byte, for the histogram methods and a moving average alike.
func TestCollectSplitRunsIdentical(t *testing.T) {
	ortenv.Require(t)
	m := loadMNIST(t)
	tensors := DefaultTensors(m)
	var want map[Method][]byte
	for _, limit := range []int64{0, 6 << 20, 1} {
		opts := Options{MaxRunBytes: limit, MovingAverage: 0.1}
		s := collectMNIST(t, m, "mnist/train_images.npy", 64, 150, tensors, opts)
		switch {
		case limit == 0 && s.Runs != 1:
			t.Errorf("default limit: %d runs a batch, want 1", s.Runs)
		case limit == 1 && s.Runs != len(tensors)-1: // the input needs no run of its own
			t.Errorf("limit 1 byte: %d runs a batch, want one per exposed tensor (%d)", s.Runs, len(tensors)-1)
		case limit == 6<<20 && (s.Runs < 2 || s.Runs >= len(tensors)-1):
			t.Errorf("limit 6 MiB: %d runs a batch, want a few", s.Runs)
		}
		got := map[Method][]byte{}
		for _, method := range []Method{MinMax, Auto} {
			c, err := s.Cache(method, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got[method], err = c.marshal(); err != nil {
				t.Fatal(err)
			}
		}
		if want == nil {
			want = got
			continue
		}
		for method, b := range got {
			if !bytes.Equal(b, want[method]) {
				t.Errorf("limit %d bytes (%d runs a batch): the %s calibration differs from one run a batch", limit, s.Runs, method)
			}
		}
	}
}
