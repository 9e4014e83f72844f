package compare

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestReferenceReplaysA: a second comparison against the same A on the
// same data replays A's outputs and reports exactly what running A again
// does; outputs over the bound are not kept, and the result is the same.
func TestReferenceReplaysA(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Model("mnist_cnn.onnx")
	sess := ort.DefaultOptions()
	mnist := testenv.Data(t, "mnist/test_images.npy")
	opts := Options{ModelA: model, ModelB: model, Data: mnist, DataOpts: data.Options{Batch: 8, Samples: 64}, Session: sess}
	plain, err := Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max  int64
		kept bool
	}{{ReferenceBytes, true}, {100, false}} {
		ref := &Reference{MaxBytes: c.max}
		opts.Reference = ref
		for i := range 2 {
			res, err := Models(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := asJSON(t, res), asJSON(t, plain); got != want {
				t.Errorf("max %d, run %d: %s, want %s", c.max, i, got, want)
			}
		}
		if len(ref.entries) != 1 {
			t.Fatalf("max %d: %d entries, want 1", c.max, len(ref.entries))
		}
		for _, e := range ref.entries {
			if kept := e.batches != nil; kept != c.kept || len(e.batches) != 8*boolInt(c.kept) || (ref.bytes > 0) != c.kept {
				t.Errorf("max %d: kept %v (%d batches, %d bytes), want %v", c.max, kept, len(e.batches), ref.bytes, c.kept)
			}
		}
	}
	// Other data is another entry.
	opts.DataOpts.Samples = 16
	if _, err := Models(opts); err != nil {
		t.Fatal(err)
	}
	if len(opts.Reference.entries) != 2 {
		t.Errorf("%d entries after other data, want 2", len(opts.Reference.entries))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func asJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStop: Options.Stop ends a comparison on a batch boundary, the
// result says so, and a comparison that replays A's outputs recorded by
// a stopped one ends where they do, with the same figures as the first.
func TestStop(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Model("mnist_cnn.onnx")
	mnist := testenv.Data(t, "mnist/test_images.npy")
	labels := testenv.Data(t, "mnist/test_labels.npy")
	var asked []int64
	opts := Options{ModelA: model, ModelB: model, Data: mnist, Labels: labels, DataOpts: data.Options{Batch: 8}, Session: ort.DefaultOptions(),
		Reference: NewReference(), Stop: func(n int64) bool { asked = append(asked, n); return n >= 20 }}
	first, err := Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Stopped || first.Samples != 24 || first.Batches != 3 || first.Accuracy == nil || first.Accuracy.Labels != 24 {
		t.Fatalf("stopped %v after %d samples, %d batches (accuracy %+v), want stopped after 24 in 3", first.Stopped, first.Samples, first.Batches, first.Accuracy)
	}
	if want := []int64{8, 16, 24}; !slices.Equal(asked, want) {
		t.Errorf("Stop asked at %v, want %v", asked, want)
	}
	opts.Stop = nil
	again, err := Models(opts) // A replayed from the stopped recording
	if err != nil {
		t.Fatal(err)
	}
	if got, want := asJSON(t, again), asJSON(t, first); got != want {
		t.Errorf("replaying a stopped reference: %s, want %s", got, want)
	}
	opts.Reference = nil
	full, err := Models(opts)
	if err != nil {
		t.Fatal(err)
	}
	if full.Stopped || full.Samples != 2004 {
		t.Errorf("without Stop: stopped %v after %d samples, want all 2004", full.Stopped, full.Samples)
	}
}
