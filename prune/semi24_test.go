package prune

import (
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// at4 returns the flat index of element (a, b, c, d) of a tensor of dims
// (rank 2 or 4; for rank 2 c and d are 0).
func at4(dims []int64, a, b, c, d int64) int64 {
	if len(dims) == 2 {
		return a*dims[1] + b
	}
	return ((a*dims[1]+b)*dims[2]+c)*dims[3] + d
}

// check24By loops over a weight written out per operator, independently of
// the package's axis arithmetic: for each output position, 4 consecutive
// entries of the reduction axis. It fails unless each group keeps exactly
// its 2 largest |w| of before (the values are distinct and non-zero).
func check24By(t *testing.T, layer string, dims []int64, axis int, before, after []float32) {
	t.Helper()
	group := func(idx [4]int64) {
		var kept []int64
		for _, i := range idx {
			if after[i] != 0 {
				if after[i] != before[i] {
					t.Fatalf("%s[%d] changed from %v to %v", layer, i, before[i], after[i])
				}
				kept = append(kept, i)
			}
		}
		if len(kept) != 2 {
			t.Fatalf("%s: %d non-zeros in the group at %v, want 2", layer, len(kept), idx)
		}
		for _, i := range idx {
			if after[i] == 0 && abs32(before[i]) > min(abs32(before[kept[0]]), abs32(before[kept[1]])) {
				t.Fatalf("%s: zeroed %v but kept a smaller one in the group at %v", layer, before[i], idx)
			}
		}
	}
	d := dims
	for len(d) < 4 {
		d = append(slices.Clone(d), 1)
	}
	switch axis {
	case 0: // W[R, x, kh, kw] or B[R, N]
		for b := int64(0); b < d[1]; b++ {
			for c := int64(0); c < d[2]; c++ {
				for e := int64(0); e < d[3]; e++ {
					for r := int64(0); r < d[0]; r += 4 {
						group([4]int64{at4(dims, r, b, c, e), at4(dims, r+1, b, c, e), at4(dims, r+2, b, c, e), at4(dims, r+3, b, c, e)})
					}
				}
			}
		}
	case 1: // W[M, R, kh, kw] or B[N, R]
		for a := int64(0); a < d[0]; a++ {
			for c := int64(0); c < d[2]; c++ {
				for e := int64(0); e < d[3]; e++ {
					for r := int64(0); r < d[1]; r += 4 {
						group([4]int64{at4(dims, a, r, c, e), at4(dims, a, r+1, c, e), at4(dims, a, r+2, c, e), at4(dims, a, r+3, c, e)})
					}
				}
			}
		}
	}
}

func TestSemiStructured(t *testing.T) {
	w := newWeightModel(t)
	before := w.snapshot()
	if got := Check24(w.Model); len(got) != 9 || layerOf(t, got, "conv").Skipped != "not 2:4" {
		t.Fatalf("Check24 before pruning: %+v", got)
	}
	rep, err := SemiStructured(w.Model, Options{Exclude: []string{"mm"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	if rep.Method != "2:4" || rep.Sparsity != 0.5 || rep.ParamsAfter != rep.ParamsBefore {
		t.Errorf("report %q, sparsity %v, params %d -> %d", rep.Method, rep.Sparsity, rep.ParamsBefore, rep.ParamsAfter)
	}
	// The reduction axis of each: Conv 1, ConvTranspose 0, Gemm 0 (1 with
	// transB), MatMul 0.
	for name, axis := range map[string]int{"conv": 1, "convT": 0, "gemm": 0, "gemmT": 1, "shared1": 0} {
		l := layerOf(t, rep.Layers, name)
		if l.Skipped != "" || l.Before != 0 || l.After != 0.5 || l.Ratio != 0.5 {
			t.Errorf("%s: %+v, want sparsity 0 -> 0.5", name, l)
		}
		check24By(t, name, w.weights[name].ConstantTensor().Dims, axis, before[name], w.vals(name))
	}
	for name, reason := range map[string]string{
		"dw": "depthwise", "tiny": "fewer than 1024", "mm": "excluded", "odd": "reduction size 30 not a multiple of 4",
	} {
		l := layerOf(t, rep.Layers, name)
		if !strings.Contains(l.Skipped, reason) || !slices.Equal(w.vals(name), before[name]) {
			t.Errorf("%s: skipped %q, want %q, and unchanged", name, l.Skipped, reason)
		}
	}
	checks := Check24(w.Model)
	for name, want := range map[string]string{
		"conv": "", "convT": "", "gemm": "", "gemmT": "", "shared1": "",
		"mm": "not 2:4", "tiny": "not 2:4", "odd": "reduction size 30 not a multiple of 4", "dw": "reduction size 1 not a multiple of 4",
	} {
		l := layerOf(t, checks, name)
		if l.Skipped != want {
			t.Errorf("Check24 %s: %q, want %q", name, l.Skipped, want)
		}
		if want == "" && l.After != 0.5 {
			t.Errorf("Check24 %s: sparsity %v, want 0.5", name, l.After)
		}
	}
	// Pruning again changes nothing.
	b := w.Marshal()
	if _, err := SemiStructured(w.Model, Options{Exclude: []string{"mm"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Marshal(), b) {
		t.Error("2:4 pruning of a 2:4 model changed it")
	}
}

// Ties keep the lower index; zeros already there count as the smallest.
func TestApply24Ties(t *testing.T) {
	vals := []float32{1, -1, 1, 1, 0, 3, 0, -2, 5, 0, 0, 0}
	apply24(vals, []int64{12, 1}, 0)
	want := []float32{1, -1, 0, 0, 0, 3, 0, -2, 5, 0, 0, 0}
	if !slices.Equal(vals, want) {
		t.Errorf("got %v, want %v", vals, want)
	}
	zeroIn := func(vs []float32) func(int64) bool { return func(i int64) bool { return vs[i] == 0 } }
	if !is24(zeroIn(vals), []int64{12, 1}, 0) || is24(zeroIn([]float32{1, 1, 1, 0}), []int64{4}, 0) {
		t.Error("is24 is wrong")
	}
}

// A ConvTranspose with groups reduces over its share of input channels;
// MatMul with a batched weight over the next-to-last axis.
func TestReductionAxis(t *testing.T) {
	for _, c := range []struct {
		op    string
		attrs []*graph.Attr
		dims  []int64
		axis  int
		size  int64
	}{
		{"ConvTranspose", []*graph.Attr{{Name: "group", Type: graph.AttrInt, Int: 2}}, []int64{16, 4, 3, 3}, 0, 8},
		{"ConvTranspose", []*graph.Attr{{Name: "group", Type: graph.AttrInt, Int: 4}}, []int64{8, 4, 3, 3}, 0, 2},
		{"MatMul", nil, []int64{3, 12, 5}, 1, 12},
		{"Gemm", []*graph.Attr{{Name: "transB", Type: graph.AttrInt, Int: 1}}, []int64{5, 12}, 1, 12},
		{"Conv", []*graph.Attr{{Name: "group", Type: graph.AttrInt, Int: 2}}, []int64{16, 4, 3, 3}, 1, 4},
	} {
		n := &graph.Node{OpType: c.op, Attrs: c.attrs}
		axis, size, skip := reductionAxis(n, c.dims)
		if axis != c.axis || size != c.size || skip != "" {
			t.Errorf("%s %v: axis %d size %d (%q), want %d, %d", c.op, c.dims, axis, size, skip, c.axis, c.size)
		}
	}
}
