package textdet

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/task"
)

// rect is text over columns x0..x1 and rows y0..y1 (inclusive) at p.
type rect struct {
	x0, y0, x1, y1 int
	p              float32
}

// probMap is an h×w map at 0.05 with the rects painted on it.
func probMap(h, w int, rs ...rect) []float32 {
	m := make([]float32, h*w)
	for i := range m {
		m[i] = 0.05
	}
	for _, r := range rs {
		for y := r.y0; y <= r.y1; y++ {
			for x := r.x0; x <= r.x1; x++ {
				m[y*w+x] = r.p
			}
		}
	}
	return m
}

// unclipped is the box Decode makes of a solid rect with the defaults.
func unclipped(r rect) task.Box {
	bw, bh := float64(r.x1-r.x0), float64(r.y1-r.y0)
	d := bw * bh * 1.5 / (2 * (bw + bh))
	return task.Box{X0: math.Round(float64(r.x0) - d), Y0: math.Round(float64(r.y0) - d), X1: math.Round(float64(r.x1) + d), Y1: math.Round(float64(r.y1) + d)}
}

func writeLabels(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "det_boxes.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const h, w = 64, 96

var (
	word1 = rect{10, 10, 30, 20, 0.9} // d = 200*1.5/60 = 5: [5,5,35,25]
	word2 = rect{50, 40, 80, 50, 0.8} // d = 300*1.5/80 = 5.625: [44,34,86,56]
	// labels1 are word1 and word2's boxes as a perfect detector finds them.
	labels1 = `[[5, 5, 35, 25], [44, 34, 86, 56]]`
)

func TestDecode(t *testing.T) {
	if got, want := unclipped(word1), (task.Box{X0: 5, Y0: 5, X1: 35, Y1: 25}); got != want {
		t.Fatalf("unclipped(word1) = %v, want %v", got, want)
	}
	m := probMap(h, w, word1, word2,
		rect{70, 5, 71, 6, 0.9},    // too small: shorter side 1 < 3
		rect{5, 50, 25, 60, 0.5},   // above thresh, mean below box thresh
		rect{88, 58, 95, 63, 0.95}, // at the corner: clipped
	)
	got := Decode(m, h, w, Options{})
	// The corner rect: 7×5, d = 35*1.5/24 = 2.1875: [85.8, 55.8, 97.2, 65.2],
	// rounded and clipped to the map.
	want := []task.Box{box(5, 5, 35, 25), box(44, 34, 86, 56), box(86, 56, 96, 64)}
	if !slices.Equal(got, want) {
		t.Fatalf("Decode = %v, want %v", got, want)
	}
	// A lower box thresh keeps the dim rect.
	if got := Decode(m, h, w, Options{BoxThresh: 0.4}); len(got) != 4 {
		t.Errorf("Decode with box thresh 0.4 = %v, want 4 boxes", got)
	}
	// At most MaxCandidates components, in scan order: the small one
	// (row 5) comes first and is dropped, then word1.
	if got := Decode(m, h, w, Options{MaxCandidates: 2}); !slices.Equal(got, want[:1]) {
		t.Errorf("Decode with 2 candidates = %v, want %v", got, want[:1])
	}
}

func TestDecodeEightConnected(t *testing.T) {
	// Two squares touching at a corner are one component.
	m := probMap(h, w, rect{10, 10, 20, 20, 0.9}, rect{21, 21, 31, 31, 0.9})
	got := Decode(m, h, w, Options{BoxThresh: 0.1})
	if len(got) != 1 {
		t.Fatalf("Decode = %v, want one box", got)
	}
	// A large component does not recurse: a full map is one box.
	full := probMap(1000, 1000, rect{0, 0, 999, 999, 0.9})
	if got := Decode(full, 1000, 1000, Options{}); !slices.Equal(got, []task.Box{box(0, 0, 1000, 1000)}) {
		t.Errorf("Decode(full map) = %v", got)
	}
}

func newScorer(t *testing.T, labels string, opts Options) task.Scorer {
	t.Helper()
	s, err := New(task.Spec{Name: Name, Labels: writeLabels(t, labels)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pick([]task.Output{{Name: "maps", Shape: []int64{-1, 1, -1, -1}, Float: true}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func metric(f *task.Figure, name string) task.Metric {
	if m, ok := f.Other(name); ok {
		return m
	}
	return task.Metric{Name: "missing " + name, A: math.NaN(), B: math.NaN()}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestScores(t *testing.T) {
	perfect := probMap(h, w, word1, word2)
	for _, tc := range []struct {
		name        string
		b           []float32
		hmean, p, r float64
		found       float64
	}{
		{"perfect", perfect, 100, 100, 100, 2},
		{"a missing box", probMap(h, w, word1), 100 * 2.0 / 3, 100, 50, 1},
		{"a spurious blob", probMap(h, w, word1, word2, rect{5, 45, 25, 55, 0.9}), 100 * 0.8, 100 * 2.0 / 3, 100, 3},
		{"a box under box thresh", probMap(h, w, word1, rect{50, 40, 80, 50, 0.55}), 100 * 2.0 / 3, 100, 50, 1},
		{"a box shifted off its label", probMap(h, w, word1, rect{50, 30, 80, 40, 0.8}), 50, 50, 50, 2},
		{"nothing", probMap(h, w), 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScorer(t, "["+labels1+"]", Options{})
			if err := s.Add(0, perfect, tc.b, []int64{1, 1, h, w}); err != nil {
				t.Fatal(err)
			}
			f, err := s.Result(1, false)
			if err != nil {
				t.Fatal(err)
			}
			if f.Task != Name || f.Output != "maps" || f.Metric != "hmean" || f.Samples != 1 {
				t.Errorf("figure %+v", f)
			}
			if f.A != 100 || !near(f.B, tc.hmean) || !near(f.DropPoints, 100-tc.hmean) {
				t.Errorf("hmean A %g B %g drop %g, want 100, %g", f.A, f.B, f.DropPoints, tc.hmean)
			}
			if p := metric(f, "precision"); p.A != 100 || !near(p.B, tc.p) {
				t.Errorf("precision %+v, want B %g", p, tc.p)
			}
			if r := metric(f, "recall"); r.A != 100 || !near(r.B, tc.r) {
				t.Errorf("recall %+v, want B %g", r, tc.r)
			}
			if n := metric(f, "boxes found (count)"); n.A != 2 || n.B != tc.found {
				t.Errorf("boxes found %+v, want B %g", n, tc.found)
			}
		})
	}
}

// TestBatches: samples added batch by batch score as they do in one
// batch, with each batch's labels found by its first sample; a rank-3
// map reads as a rank-4 one.
func TestBatches(t *testing.T) {
	maps := [][]float32{
		probMap(h, w, word1, word2),
		probMap(h, w, word1),
		probMap(h, w, word2, rect{5, 45, 25, 55, 0.9}),
		probMap(h, w),
		probMap(h, w, word1, word2),
	}
	labels := "[" + strings.Join([]string{labels1, labels1, labels1, "[]", `[[5, 5, 35, 25]]`}, ",") + "]"
	var a, b []float32
	for _, m := range maps {
		a = append(a, maps[0]...)
		b = append(b, m...)
	}
	size := h * w
	one := newScorer(t, labels, Options{})
	if err := one.Add(0, a, b, []int64{5, 1, h, w}); err != nil {
		t.Fatal(err)
	}
	want, err := one.Result(5, false)
	if err != nil {
		t.Fatal(err)
	}
	many := newScorer(t, labels, Options{})
	for _, part := range [][2]int{{0, 2}, {2, 3}, {3, 5}} {
		lo, hi := part[0], part[1]
		if err := many.Add(int64(lo), a[lo*size:hi*size], b[lo*size:hi*size], []int64{int64(hi - lo), h, w}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := many.Result(5, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.A != want.A || got.B != want.B || !slices.Equal(got.Others, want.Others) || got.Samples != 5 {
		t.Errorf("in batches %+v, in one %+v", got, want)
	}
	// B: matched 2+1+1+0+1 = 5 of 2+1+2+0+2 = 7 found, 7 labelled.
	if p := metric(got, "precision"); !near(p.B, 100*5.0/7) {
		t.Errorf("precision %+v, want B %g", p, 100*5.0/7)
	}
	if r := metric(got, "recall"); !near(r.B, 100*5.0/7) {
		t.Errorf("recall %+v", r)
	}
}

func TestQuadLabels(t *testing.T) {
	// word1's box as a quadrilateral, and a slanted one whose bounding
	// rectangle is word2's box.
	s := newScorer(t, `[[[5,5, 35,5, 35,25, 5,25], [44,40, 80,34, 86,50, 50,56]]]`, Options{})
	m := probMap(h, w, word1, word2)
	if err := s.Add(0, m, m, []int64{1, 1, h, w}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.A != 100 || f.B != 100 {
		t.Errorf("hmean %g, %g, want 100", f.A, f.B)
	}
}

func TestMatchOneToOne(t *testing.T) {
	gt := []task.Box{box(0, 0, 10, 10), box(1, 0, 11, 10)}
	// One found box overlaps both labels: it matches one (the closer).
	if n := task.Match([]task.Box{box(1, 0, 11, 10)}, gt); n != 1 {
		t.Errorf("Match = %d, want 1", n)
	}
	// Two found boxes on one label: one match.
	if n := task.Match([]task.Box{box(0, 0, 10, 10), box(0, 0, 10, 9)}, gt[:1]); n != 1 {
		t.Errorf("Match = %d, want 1", n)
	}
	// Greedy by IoU: the best pair first, then the next best.
	if n := task.Match([]task.Box{box(0, 0, 10, 10), box(1, 0, 11, 10)}, gt); n != 2 {
		t.Errorf("Match = %d, want 2", n)
	}
	// IoU 0.5 matches; under 0.5 does not: [0,10] and [5,15] meet at 1/3.
	if n := task.Match([]task.Box{box(0, 0, 20, 10)}, gt[:1]); n != 1 {
		t.Errorf("Match at IoU 0.5 = %d, want 1", n)
	}
	if n := task.Match([]task.Box{box(5, 0, 15, 10)}, gt[:1]); n != 0 {
		t.Errorf("Match = %d, want 0", n)
	}
}

func TestLabelErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`[[], [], [], [[0,0,1,1], [0,0,2,2], [1,2,3,4,5]]]`, "det_boxes.json: sample 3, box 2: want 4 or 8 numbers, got 5"},
		{`[[[0,0,1,1]], [[10,0,5,4]]]`, "det_boxes.json: sample 1, box 0: [10 0 5 4] ends before it starts"},
		{`{"boxes": []}`, "det_boxes.json: want a JSON array"},
		{`[[[0,0,1,1]], [["a",0,1,1]]]`, "det_boxes.json: sample 1: want a list of boxes"},
		{`[[[0,0,1,1]], 3]`, "det_boxes.json: sample 1: want a list of boxes"},
	} {
		_, err := New(task.Spec{Labels: writeLabels(t, tc.body)}, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := New(task.Spec{Labels: filepath.Join(t.TempDir(), "none.json")}, Options{}); err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := New(task.Spec{}, Options{}); err == nil || !strings.Contains(err.Error(), "needs ground-truth boxes") {
		t.Errorf("no labels: %v", err)
	}
	for _, o := range []Options{{Thresh: 1.5}, {BoxThresh: -0.1}, {UnclipRatio: -1}, {MaxCandidates: -1}, {MinSize: -2}} {
		if _, err := New(task.Spec{Labels: writeLabels(t, "[]")}, o); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
}

func TestCounts(t *testing.T) {
	m := probMap(h, w, word1, word2)
	two := "[" + labels1 + "," + labels1 + "]"
	// Labels for two samples, one scored: fine only when the data was cut.
	s := newScorer(t, two, Options{})
	if err := s.Add(0, m, m, []int64{1, 1, h, w}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(1, false); err == nil || !strings.Contains(err.Error(), "2 labels for 1 samples") {
		t.Errorf("more labels than samples: %v", err)
	}
	if _, err := s.Result(1, true); err != nil {
		t.Errorf("more labels than samples, limited: %v", err)
	}
	// More samples than labels: Add says so, naming the file.
	s = newScorer(t, two, Options{})
	three := slices.Concat(m, m, m)
	if err := s.Add(0, three, three, []int64{3, 1, h, w}); err == nil || !strings.Contains(err.Error(), "det_boxes.json: 2 labels") {
		t.Errorf("more samples than labels: %v", err)
	}
	if _, err := s.Result(3, false); err == nil || !strings.Contains(err.Error(), "2 labels for 3 samples") {
		t.Errorf("more samples than labels: %v", err)
	}
	// A map that is not one: C = 2, or values that do not fit the dims.
	s = newScorer(t, two, Options{})
	if err := s.Add(0, slices.Concat(m, m), slices.Concat(m, m), []int64{1, 2, h, w}); err == nil {
		t.Error("a 2-channel map: no error")
	}
	if err := s.Add(0, m, m[1:], []int64{1, 1, h, w}); err == nil {
		t.Error("B short of values: no error")
	}
}

func TestPick(t *testing.T) {
	s, err := New(task.Spec{Labels: writeLabels(t, "[]")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	outs := []task.Output{
		{Name: "logits", Shape: []int64{1, 2, 32, 32}, Float: true},
		{Name: "maps", Shape: []int64{1, 1, 32, 32}, Float: true},
		{Name: "ids", Shape: []int64{1, 32, 32}},
	}
	if got, err := s.Pick(outs); err != nil || got != "maps" {
		t.Errorf("Pick = %q, %v, want maps", got, err)
	}
	outs = append(outs, task.Output{Name: "maps3", Shape: []int64{-1, 32, 32}, Float: true})
	if _, err := s.Pick(outs); err == nil || !strings.Contains(err.Error(), "name the one") {
		t.Errorf("two maps: %v", err)
	}
	s, _ = New(task.Spec{Labels: writeLabels(t, "[]"), Output: "maps3"}, Options{})
	if got, err := s.Pick(outs); err != nil || got != "maps3" {
		t.Errorf("Pick named = %q, %v", got, err)
	}
	s, _ = New(task.Spec{Labels: writeLabels(t, "[]"), Output: "logits"}, Options{})
	if _, err := s.Pick(outs); err == nil {
		t.Error("Pick of a 2-channel output: no error")
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions(map[string]string{"thresh": "0.5", "max_candidates": "10"})
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if o.Thresh != 0.5 || o.MaxCandidates != 10 || o.BoxThresh != d.BoxThresh || o.UnclipRatio != d.UnclipRatio || o.MinSize != d.MinSize {
		t.Errorf("options %+v: want thresh 0.5, max_candidates 10, the rest PaddleOCR's defaults", o)
	}
	for params, want := range map[string]string{
		"unclip=2":          `unknown parameter "unclip"`,
		"box_thresh=x":      `parameter box_thresh="x": not a number`,
		"thresh=1.5":        "thresh 1.5 is not in (0, 1)",
		"min_size=0":        "min_size=0: give at least 1",
		"unclip_ratio=-1.5": "unclip ratio -1.5 is not positive",
	} {
		k, v, _ := strings.Cut(params, "=")
		if _, err := ParseOptions(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}

// box is a task.Box from its corners.
func box(x0, y0, x1, y1 float64) task.Box { return task.Box{X0: x0, Y0: y0, X1: x1, Y1: y1} }
