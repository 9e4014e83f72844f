package calibrate

import (
	"bytes"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
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

// A part's model returns only its group and keeps only the nodes they
// depend on: the first conv's activation needs none of what follows it, and
// the model's own output, not in the group, is no longer returned.
func TestPartComputesOnlyItsGroup(t *testing.T) {
	m := loadMNIST(t)
	tensors := DefaultTensors(m)
	first := tensors[1] // tensors[0] is the input
	c, err := m.Clone()
	if err != nil {
		t.Fatal(err)
	}
	carrier, err := graph.ExposeNested(c, []string{first})
	if err != nil {
		t.Fatal(err)
	}
	if err := keepOnly(c, []string{first}, carrier); err != nil {
		t.Fatal(err)
	}
	if len(c.Graph.Outputs) != 1 || c.Graph.Outputs[0].Name != carrier[first] {
		t.Fatalf("outputs %v, want only %q", c.Graph.Outputs, carrier[first])
	}
	if len(c.Graph.Nodes) >= len(m.Graph.Nodes) {
		t.Fatalf("%d nodes left of %d: nothing pruned", len(c.Graph.Nodes), len(m.Graph.Nodes))
	}
	// Every node left feeds the exposed value.
	need := map[*graph.Value]bool{c.Graph.Outputs[0]: true}
	for i := len(c.Graph.Nodes) - 1; i >= 0; i-- {
		n := c.Graph.Nodes[i]
		used := false
		for _, o := range n.Outputs() {
			used = used || need[o]
		}
		if !used {
			t.Errorf("node %s left, but %q does not depend on it", n, first)
		}
		for _, in := range n.Inputs() {
			need[in] = true
		}
	}
	for _, v := range c.Graph.Initializers {
		if !need[v] {
			t.Errorf("initializer %q left, but nothing reads it", v.Name)
		}
	}
	if err := c.Verify(); err != nil {
		t.Fatal(err)
	}
}
