package segment

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/task"
)

// writeLabels writes class ids as seg_labels.npy, int64.
func writeLabels(t *testing.T, dims []int64, ids []int64) string {
	t.Helper()
	tn, err := graph.NewInt64Tensor("labels", dims, ids)
	if err != nil {
		t.Fatal(err)
	}
	return writeTensor(t, tn)
}

func writeTensor(t *testing.T, tn *graph.Tensor) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seg_labels.npy")
	if err := data.WriteNpy(p, tn); err != nil {
		t.Fatal(err)
	}
	return p
}

// scores are one-hot class scores [N,c,H,W] of the classes [N,H,W], h×w
// pixels a sample.
func scores(classes []int64, c, hw int) []float32 {
	n := len(classes) / hw
	out := make([]float32, n*c*hw)
	for i := range n {
		for p := range hw {
			for k := range c {
				v := float32(-1)
				if int64(k) == classes[i*hw+p] {
					v = 2
				}
				out[(i*c+k)*hw+p] = v
			}
		}
	}
	return out
}

func newScorer(t *testing.T, path string) task.Scorer {
	t.Helper()
	s, err := New(task.Spec{Name: Name, Labels: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pick([]task.Output{{Name: "logits", Shape: []int64{-1, 3, -1, -1}, Float: true}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// score is the figure of predictions a and b ([N,H,W] class ids) against
// the labels, one batch.
func score(t *testing.T, labels, a, b []int64, c int, dims ...int64) *task.Figure {
	t.Helper()
	s := newScorer(t, writeLabels(t, dims, labels))
	hw := int(dims[len(dims)-1] * dims[len(dims)-2])
	n := dims[0]
	if err := s.Add(0, scores(a, c, hw), scores(b, c, hw), []int64{n, int64(c), dims[len(dims)-2], dims[len(dims)-1]}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(n, false)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func metric(f *task.Figure, name string) task.Metric {
	if m, ok := f.Other(name); ok {
		return m
	}
	return task.Metric{Name: "missing " + name, A: math.NaN(), B: math.NaN()}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPerfect(t *testing.T) {
	labels := []int64{0, 0, 1, 1, 2, 2, 2, 0, 1, 1, 1, 0}
	f := score(t, labels, labels, labels, 3, 2, 2, 3)
	if f.Task != Name || f.Output != "logits" || f.Metric != "mIoU" || f.Samples != 2 {
		t.Errorf("figure %+v", f)
	}
	if f.A != 100 || f.B != 100 || f.DropPoints != 0 {
		t.Errorf("mIoU %g, %g, want 100", f.A, f.B)
	}
	want := []string{"pixel accuracy", "IoU class 0", "IoU class 1", "IoU class 2"}
	var names []string
	for _, m := range f.Others {
		names = append(names, m.Name)
		if m.A != 100 || m.B != 100 {
			t.Errorf("%+v, want 100", m)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("others %v, want %v", names, want)
	}
}

func TestKnownConfusion(t *testing.T) {
	labels := []int64{0, 0, 1, 1, 2, 2}
	// Class 0: TP 1, labelled 2, predicted 2: IoU 1/3. Class 1: TP 2,
	// labelled 2, predicted 3: 2/3. Class 2: TP 1, labelled 2, predicted
	// 1: 1/2. mIoU 1.5/3 = 50; 4 of 6 pixels right.
	b := []int64{0, 1, 1, 1, 2, 0}
	f := score(t, labels, labels, b, 3, 1, 2, 3)
	if f.A != 100 || !near(f.B, 50) || !near(f.DropPoints, 50) {
		t.Errorf("mIoU %g, %g, want 100, 50", f.A, f.B)
	}
	if m := metric(f, "pixel accuracy"); !near(m.B, 100*4.0/6) {
		t.Errorf("%+v, want B %g", m, 100*4.0/6)
	}
	for k, want := range []float64{100.0 / 3, 200.0 / 3, 50} {
		if m := metric(f, "IoU class "+string(rune('0'+k))); !near(m.B, want) || m.A != 100 {
			t.Errorf("%+v, want B %g", m, want)
		}
	}
}

// TestPredictedOnly: a class only predicted counts in the mean, with IoU
// 0; a class neither labelled nor predicted does not.
func TestPredictedOnly(t *testing.T) {
	labels := []int64{0, 0, 0, 0}
	b := []int64{0, 0, 0, 2}
	s := newScorer(t, writeLabels(t, []int64{1, 2, 2}, labels))
	if err := s.Add(0, scores(labels, 4, 4), scores(b, 4, 4), []int64{1, 4, 2, 2}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	// B: class 0 at 3/4, class 2 at 0; classes 1 and 3 left out.
	if f.A != 100 || !near(f.B, 37.5) {
		t.Errorf("mIoU %g, %g, want 100, 37.5", f.A, f.B)
	}
	if len(f.Others) != 2 || f.Others[1].Name != "IoU class 0" || !near(f.Others[1].B, 75) {
		t.Errorf("others %+v, want pixel accuracy and class 0 at 75", f.Others)
	}
}

func TestIgnore(t *testing.T) {
	// Rank 4 uint8 labels [N,1,H,W]; the 255 pixels are wrong in B and
	// out of the class range, and do not count.
	ids := []byte{0, 255, 1, 255}
	tn, err := graph.NewTensor("labels", graph.Uint8, []int64{1, 1, 2, 2}, ids)
	if err != nil {
		t.Fatal(err)
	}
	s := newScorer(t, writeTensor(t, tn))
	a := []int64{0, 0, 1, 1}
	b := []int64{0, 1, 1, 0}
	if err := s.Add(0, scores(a, 2, 4), scores(b, 2, 4), []int64{1, 2, 2, 2}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.A != 100 || f.B != 100 || metric(f, "pixel accuracy").B != 100 {
		t.Errorf("figure %+v, want 100 for both", f)
	}
	// Every pixel ignored: no figure.
	s = newScorer(t, writeLabels(t, []int64{1, 1, 2}, []int64{255, 255}))
	if err := s.Add(0, scores(a[:2], 2, 2), scores(a[:2], 2, 2), []int64{1, 2, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(1, false); err == nil || !strings.Contains(err.Error(), "ignore") {
		t.Errorf("all ignored: %v", err)
	}
}

func TestArgmax(t *testing.T) {
	conf := make([]int64, 9)
	nan := float32(math.NaN())
	// Three pixels, three classes: a tie goes to the first; a NaN is the
	// maximum, the first NaN at that.
	sc := []float32{
		1, 0, 0, // class 0's scores for pixels 0..2
		5, nan, nan, // class 1
		5, 9, nan, // class 2
	}
	accumulate(conf, sc, []int32{0, 0, 0}, 3, 3)
	if want := []int64{0, 3, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(conf, want) {
		t.Errorf("confusion %v, want %v", conf, want)
	}
}

// TestBatches: samples added batch by batch, each found by its first
// sample, score as they do in one batch.
func TestBatches(t *testing.T) {
	const n, h, w, c = 5, 3, 4, 3
	labels := make([]int64, n*h*w)
	b := make([]int64, n*h*w)
	for i := range labels {
		labels[i] = int64(i*7/5) % c
		b[i] = int64(i*i) % c
		if i%11 == 0 {
			labels[i] = Ignore
		}
	}
	a := slices.Clone(labels)
	for i := range a {
		a[i] %= c
	}
	path := writeLabels(t, []int64{n, h, w}, labels)
	sa, sb := scores(a, c, h*w), scores(b, c, h*w)
	size := c * h * w

	one := newScorer(t, path)
	if err := one.Add(0, sa, sb, []int64{n, c, h, w}); err != nil {
		t.Fatal(err)
	}
	want, err := one.Result(n, false)
	if err != nil {
		t.Fatal(err)
	}
	many := newScorer(t, path)
	for _, part := range [][2]int{{0, 1}, {1, 3}, {3, 5}} {
		lo, hi := part[0], part[1]
		if err := many.Add(int64(lo), sa[lo*size:hi*size], sb[lo*size:hi*size], []int64{int64(hi - lo), c, h, w}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := many.Result(n, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.A != want.A || got.B != want.B || !slices.Equal(got.Others, want.Others) || got.Samples != n {
		t.Errorf("in batches %+v, in one %+v", got, want)
	}
	if want.B >= 100 || want.B <= 0 {
		t.Errorf("B's mIoU %g: the test wants a partial score", want.B)
	}
}

func TestClassFigures(t *testing.T) {
	// 30 classes, all labelled: 20 per-class figures.
	const c = 30
	labels := make([]int64, c)
	for i := range labels {
		labels[i] = int64(i)
	}
	f := score(t, labels, labels, labels, c, 1, 1, c)
	if len(f.Others) != 21 || f.Others[20].Name != "IoU class 19" {
		t.Errorf("%d others, the last %+v", len(f.Others), f.Others[len(f.Others)-1])
	}
}

func TestErrors(t *testing.T) {
	ids := []int64{0, 1, 2, 1}
	path := writeLabels(t, []int64{1, 2, 2}, ids)
	sc := scores(ids, 3, 4)

	// Output 2×2 per sample, labels 2×2; an output of other H, W fails.
	s := newScorer(t, path)
	if err := s.Add(0, slices.Concat(sc, sc), slices.Concat(sc, sc), []int64{1, 3, 2, 4}); err == nil || !strings.Contains(err.Error(), "seg_labels.npy: labels are 2x2, output \"logits\" is 2x4") {
		t.Errorf("H, W mismatch: %v", err)
	}
	// A label of a class the output does not have.
	s = newScorer(t, path)
	two := scores([]int64{0, 1, 1, 1}, 2, 4)
	if err := s.Add(0, two, two, []int64{1, 2, 2, 2}); err == nil || !strings.Contains(err.Error(), "seg_labels.npy: sample 0, pixel (1, 0): label 2") {
		t.Errorf("label >= C: %v", err)
	}
	// Not class scores.
	s = newScorer(t, path)
	if err := s.Add(0, sc[:4], sc[:4], []int64{1, 1, 2, 2}); err == nil {
		t.Error("one channel: no error")
	}
	if err := s.Add(0, sc, sc[1:], []int64{1, 3, 2, 2}); err == nil {
		t.Error("B short of values: no error")
	}
	// Classes changing between batches.
	path2 := writeLabels(t, []int64{2, 2, 2}, slices.Concat(ids, []int64{0, 1, 1, 0}))
	s = newScorer(t, path2)
	if err := s.Add(0, sc, sc, []int64{1, 3, 2, 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(1, two, two, []int64{1, 2, 2, 2}); err == nil || !strings.Contains(err.Error(), "2 classes, 3 in an earlier batch") {
		t.Errorf("C changing: %v", err)
	}
	// More samples than labels, and label counts at Result.
	s = newScorer(t, path)
	if err := s.Add(0, slices.Concat(sc, sc), slices.Concat(sc, sc), []int64{2, 3, 2, 2}); err == nil || !strings.Contains(err.Error(), "seg_labels.npy: 1 labels") {
		t.Errorf("more samples than labels: %v", err)
	}
	s = newScorer(t, path2)
	if err := s.Add(0, sc, sc, []int64{1, 3, 2, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(1, false); err == nil || !strings.Contains(err.Error(), "seg_labels.npy: 2 labels for 1 samples") {
		t.Errorf("more labels than samples: %v", err)
	}
	if _, err := s.Result(1, true); err != nil {
		t.Errorf("more labels than samples, limited: %v", err)
	}

	// Labels New refuses.
	for _, tc := range []struct {
		path, want string
	}{
		{writeLabels(t, []int64{1, 2, 2}, []int64{0, 1, -1, 0}), "sample 0, pixel (1, 0): label -1 is not a class id"},
		{writeLabels(t, []int64{4}, []int64{0, 1, 1, 0}), "labels are [4], want class ids"},
		{writeLabels(t, []int64{1, 2, 1, 2}, []int64{0, 1, 1, 0}), "labels are [1 2 1 2], want class ids"},
		{func() string {
			tn, _ := graph.NewFloat32Tensor("labels", []int64{1, 2, 2}, []float32{0, 1, 1, 0})
			return writeTensor(t, tn)
		}(), "labels must be integer class ids"},
		{filepath.Join(t.TempDir(), "none.npy"), "none.npy"},
	} {
		_, err := New(task.Spec{Labels: tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	if _, err := New(task.Spec{}); err == nil {
		t.Error("no labels: no error")
	}
}

func TestPick(t *testing.T) {
	s, err := New(task.Spec{Labels: writeLabels(t, []int64{1, 1, 1}, []int64{0})})
	if err != nil {
		t.Fatal(err)
	}
	outs := []task.Output{
		{Name: "maps", Shape: []int64{1, 1, 32, 32}, Float: true},
		{Name: "logits", Shape: []int64{1, 19, 32, 32}, Float: true},
		{Name: "ids", Shape: []int64{1, 19, 32, 32}},
	}
	if got, err := s.Pick(outs); err != nil || got != "logits" {
		t.Errorf("Pick = %q, %v, want logits", got, err)
	}
	outs = append(outs, task.Output{Name: "aux", Shape: []int64{1, -1, 32, 32}, Float: true})
	if _, err := s.Pick(outs); err == nil || !strings.Contains(err.Error(), "name the one") {
		t.Errorf("two candidates: %v", err)
	}
	s, _ = New(task.Spec{Labels: writeLabels(t, []int64{1, 1, 1}, []int64{0}), Output: "maps"})
	if _, err := s.Pick(outs); err == nil {
		t.Error("Pick of a one-channel output: no error")
	}
}
