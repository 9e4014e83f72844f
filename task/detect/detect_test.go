package detect

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/task"
)

// outs are a torchvision-style detector's outputs: K open.
var outs = []task.Output{
	{Name: "boxes", Shape: []int64{-1, 4}, Float: true},
	{Name: "scores", Shape: []int64{-1}, Float: true},
	{Name: "labels", Shape: []int64{-1}},
}

// run is one image's boxes, scores and classes as a model gives them.
type run struct {
	boxes  [][4]float32
	scores []float32
	labels []float32
}

func (r run) values() []task.Value {
	k := int64(len(r.scores))
	var b []float32
	for _, x := range r.boxes {
		b = append(b, x[:]...)
	}
	return []task.Value{{Data: b, Dims: []int64{k, 4}}, {Data: r.scores, Dims: []int64{k}}, {Data: r.labels, Dims: []int64{k}}}
}

func newScorer(t *testing.T, labels string, params map[string]string) task.Multi {
	t.Helper()
	o, err := ParseOptions(params)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(task.Spec{Name: Name, Labels: labels}, o)
	if err != nil {
		t.Fatal(err)
	}
	m := s.(task.Multi)
	names, err := m.PickAll(outs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "boxes,scores,labels" {
		t.Fatalf("picked %v", names)
	}
	return m
}

func metric(t *testing.T, f *task.Figure, name string) task.Metric {
	t.Helper()
	m, ok := f.Other(name)
	if !ok {
		t.Fatalf("no %q in %+v", name, f.Others)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Against labels: A finds both objects; B misses one, finds a box of the
// wrong class and one under the threshold (not a detection, but in mAP).
func TestScoreAgainstLabels(t *testing.T) {
	dir := t.TempDir()
	labels := filepath.Join(dir, "gt.json")
	os.WriteFile(labels, []byte(`[[{"box": [0, 0, 10, 10], "label": 1}, {"box": [20, 20, 40, 40], "label": 2}], []]`), 0o644)
	s := newScorer(t, labels, nil)
	a := []run{
		{boxes: [][4]float32{{0, 0, 10, 10}, {21, 21, 40, 40}}, scores: []float32{0.9, 0.8}, labels: []float32{1, 2}},
		{},
	}
	b := []run{
		{boxes: [][4]float32{{0, 0, 10, 11}, {20, 20, 40, 40}, {20, 20, 40, 40}}, scores: []float32{0.9, 0.7, 0.3}, labels: []float32{1, 1, 2}},
		{boxes: [][4]float32{{50, 50, 60, 60}}, scores: []float32{0.6}, labels: []float32{0}},
	}
	for i := range a {
		if err := s.AddAll(int64(i), 1, a[i].values(), b[i].values()); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.Result(2, false)
	if err != nil {
		t.Fatal(err)
	}
	// B: 3 detections (two in sample 0, one in sample 1), 1 matched; 2 objects.
	if f.Metric != "hmean" || !near(f.A, 100) || !near(f.B, 100*2*(1.0/3)*(0.5)/((1.0/3)+0.5)) {
		t.Errorf("figure %s A %v B %v", f.Metric, f.A, f.B)
	}
	if p := metric(t, f, "precision"); !near(p.B, 100.0/3) {
		t.Errorf("precision B %v, want 33.3", p.B)
	}
	if r := metric(t, f, "recall"); !near(r.B, 50) {
		t.Errorf("recall B %v, want 50", r.B)
	}
	// mAP: class 1 AP 1 for both; class 2: A 1, B finds it only at score
	// 0.3 after no other class-2 box: AP 1 too.
	if m := metric(t, f, "mAP@0.5"); !near(m.A, 100) || !near(m.B, 100) {
		t.Errorf("mAP %v", m)
	}
	if strings.Join(f.Outputs, ",") != "boxes,scores,labels" || f.Output != "boxes" {
		t.Errorf("outputs %v (%s)", f.Outputs, f.Output)
	}
	if _, err := s.Result(3, false); err == nil {
		t.Error("2 labels for 3 samples passed")
	}
}

// Without labels, A's detections are the truth; a B that moved one box
// too far and found an extra one loses points.
func TestScoreAgainstA(t *testing.T) {
	s := newScorer(t, "", nil)
	a := run{boxes: [][4]float32{{0, 0, 10, 10}, {20, 20, 30, 30}}, scores: []float32{0.9, 0.6}, labels: []float32{0, 0}}
	b := run{boxes: [][4]float32{{0, 0, 10, 10}, {26, 26, 36, 36}, {40, 40, 50, 50}}, scores: []float32{0.9, 0.6, 0.55}, labels: []float32{0, 0, 0}}
	if err := s.AddAll(0, 1, a.values(), b.values()); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	p, r := 1.0/3, 0.5
	if !strings.Contains(f.Metric, "against A") || !near(f.A, 100) || !near(f.B, 100*2*p*r/(p+r)) {
		t.Errorf("%s: A %v B %v", f.Metric, f.A, f.B)
	}
	if f.DropPoints < 50 {
		t.Errorf("drop %v", f.DropPoints)
	}
}

// A trained detector on noise keeps only low scores: both are judged at
// the median of A's scores, and the metric says so, instead of agreeing
// on nothing.
func TestScoreLowScoresNotVacuous(t *testing.T) {
	s := newScorer(t, "", nil)
	a := run{boxes: [][4]float32{{0, 0, 10, 10}, {20, 20, 30, 30}, {40, 40, 50, 50}}, scores: []float32{0.2, 0.1, 0.05}, labels: []float32{0, 1, 2}}
	b := run{boxes: [][4]float32{{60, 60, 70, 70}}, scores: []float32{0.3}, labels: []float32{0}}
	if err := s.AddAll(0, 1, a.values(), b.values()); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Metric, "A had none at 0.5") || f.B != 0 || f.A != 100 {
		t.Errorf("%s: A %v B %v", f.Metric, f.A, f.B)
	}
}

// TestScoreLowScoresFloatNoise: judged below the median of A's scores, a
// model that computes the same up to float noise (B's scores 1e-6 lower)
// agrees fully: no box sits on the threshold.
func TestScoreLowScoresFloatNoise(t *testing.T) {
	s := newScorer(t, "", nil)
	boxes, labels := [][4]float32{{0, 0, 10, 10}, {20, 20, 30, 30}, {40, 40, 50, 50}}, []float32{0, 1, 2}
	a := run{boxes: boxes, scores: []float32{0.2, 0.1, 0.05}, labels: labels}
	b := run{boxes: boxes, scores: []float32{0.2 - 1e-6, 0.1 - 1e-6, 0.05 - 1e-6}, labels: labels}
	if err := s.AddAll(0, 1, a.values(), b.values()); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Metric, "A had none at 0.5") || f.A != 100 || f.B != 100 || f.DropPoints != 0 {
		t.Errorf("%s: A %v B %v drop %v", f.Metric, f.A, f.B, f.DropPoints)
	}
	if want := "at score >= 0.075"; !strings.Contains(f.Metric, want) {
		t.Errorf("%s: want %q (midway between the median 0.1 and 0.05)", f.Metric, want)
	}
}

// Empty outputs in both models (no object on the image) are valid.
func TestScoreEmpty(t *testing.T) {
	s := newScorer(t, "", nil)
	if err := s.AddAll(0, 1, run{}.values(), run{}.values()); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.A != 100 || f.B != 100 || !strings.Contains(f.Metric, "nothing was judged") {
		t.Errorf("%s: A %v B %v", f.Metric, f.A, f.B)
	}
}

// Batched outputs [B,K,4] padded with low scores: per sample.
func TestScoreBatched(t *testing.T) {
	s, _ := New(task.Spec{Name: Name}, Options{ScoreThresh: 0.5})
	m := s.(task.Multi)
	bouts := []task.Output{
		{Name: "det_boxes", Shape: []int64{-1, 2, 4}, Float: true},
		{Name: "det_scores", Shape: []int64{-1, 2}, Float: true},
	}
	if names, err := m.PickAll(bouts); err != nil || len(names) != 2 {
		t.Fatalf("%v %v", names, err)
	}
	boxes := task.Value{Data: []float32{0, 0, 10, 10, 0, 0, 0, 0, 5, 5, 9, 9, 0, 0, 0, 0}, Dims: []int64{2, 2, 4}}
	scores := task.Value{Data: []float32{0.9, 0, 0.8, 0}, Dims: []int64{2, 2}}
	other := task.Value{Data: []float32{0.9, 0, 0.2, 0}, Dims: []int64{2, 2}} // B loses sample 1's box
	if err := m.AddAll(0, 2, []task.Value{boxes, scores}, []task.Value{boxes, other}); err != nil {
		t.Fatal(err)
	}
	f, err := m.Result(2, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := metric(t, f, "recall"); !near(r.B, 50) || !near(r.A, 100) {
		t.Errorf("recall %v", r)
	}
}

// Outputs without a batch dim are one image a run.
func TestScoreUnbatchedNeedsBatchOne(t *testing.T) {
	s := newScorer(t, "", nil)
	a := run{boxes: [][4]float32{{0, 0, 1, 1}}, scores: []float32{1}, labels: []float32{0}}
	err := s.AddAll(0, 2, a.values(), a.values())
	if err == nil || !strings.Contains(err.Error(), "batch 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestLooks(t *testing.T) {
	if !Looks(outs) {
		t.Error("a torchvision detector's outputs do not look like detections")
	}
	static := []task.Output{{Name: "boxes", Shape: []int64{1, 100, 4}, Float: true}, {Name: "scores", Shape: []int64{1, 100}, Float: true}}
	if Looks(static) {
		t.Error("a fixed number of boxes was taken for data-dependent detections")
	}
	cls := []task.Output{{Name: "logits", Shape: []int64{-1, 4}, Float: true}}
	if Looks(cls) {
		t.Error("a 4-class classifier was taken for a detector")
	}
}

func TestReadLabelsErrors(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"a": 1}`:                               "one list of objects per sample",
		`[[{"box": [0, 0, 1]}]]`:                 "3 numbers",
		`[[{"box": [5, 0, 1, 1], "label": 0}]]`:  "ends before it starts",
		`[[{"box": [0, 0, 1, 1], "label": -2}]]`: "not a class id",
	} {
		p := filepath.Join(dir, "l.json")
		os.WriteFile(p, []byte(body), 0o644)
		_, err := New(task.Spec{Name: Name, Labels: p}, Options{ScoreThresh: 0.5})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want %q and the path", body, err, want)
		}
	}
	if _, err := ParseOptions(map[string]string{"score_thresh": "x"}); err == nil {
		t.Error("score_thresh x passed")
	}
	if _, err := ParseOptions(map[string]string{"iou": "0.7"}); err == nil {
		t.Error("an unknown parameter passed")
	}
}
