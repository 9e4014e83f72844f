package ctc

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/task"
)

// scores writes one-hot [t, c] scores that decode to path (class ids per
// step).
func scores(path []int, c int) []float32 {
	x := make([]float32, len(path)*c)
	for t, k := range path {
		x[t*c+k] = 1
	}
	return x
}

func newScorer(t *testing.T, dict, labels string) *scorer {
	t.Helper()
	dir := t.TempDir()
	d, l := filepath.Join(dir, "dict.txt"), filepath.Join(dir, "labels.txt")
	if err := os.WriteFile(d, []byte(dict), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l, []byte(labels), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(task.Spec{Name: Name, Dict: d, Labels: l})
	if err != nil {
		t.Fatal(err)
	}
	return s.(*scorer)
}

func TestDecodeAndScore(t *testing.T) {
	// Classes: 0 blank, 1 a, 2 b, 3 c, 4 space.
	s := newScorer(t, "a\nb\nc", "ab\nc a\nabc\n")
	if _, err := s.Pick([]task.Output{{Name: "probs", Shape: []int64{-1, -1, 5}, Float: true}}); err != nil {
		t.Fatal(err)
	}
	const steps, c = 6, 5
	// A reads all three; B reads "ab", "ca" (the label's space ignored),
	// and "abb" (one substitution).
	a := append(append(scores([]int{1, 1, 0, 2, 0, 0}, c), scores([]int{3, 4, 1, 0, 0, 0}, c)...), scores([]int{1, 2, 0, 3, 3, 0}, c)...)
	b := append(append(scores([]int{1, 0, 2, 2, 0, 0}, c), scores([]int{3, 0, 1, 1, 0, 0}, c)...), scores([]int{1, 2, 0, 2, 0, 0}, c)...)
	// Two batches: the labels follow the sample index.
	if err := s.Add(0, a[:2*steps*c], b[:2*steps*c], []int64{2, steps, c}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(2, a[2*steps*c:], b[2*steps*c:], []int64{1, steps, c}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Result(3, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.A != 100 || math.Abs(f.B-200.0/3) > 1e-9 || math.Abs(f.DropPoints-100.0/3) > 1e-9 {
		t.Errorf("sequence accuracy A %v B %v drop %v, want 100, 66.67, 33.33", f.A, f.B, f.DropPoints)
	}
	// B's character accuracy: 1, 1, 2/3.
	if ch := f.Others[0]; ch.Name != MetricCharacter || ch.A != 100 || math.Abs(ch.B-100*(8.0/9)) > 1e-9 {
		t.Errorf("character accuracy %+v", ch)
	}
	if _, err := s.Result(4, false); err == nil || !strings.Contains(err.Error(), "3 labels for 4 samples") {
		t.Errorf("more samples than labels: %v", err)
	}
	if _, err := s.Result(2, true); err != nil {
		t.Errorf("a sample limit leaves labels over: %v", err)
	}
}

func TestClassesMustFitTheDictionary(t *testing.T) {
	s := newScorer(t, "a\nb\nc\n", "ab\n")
	s.output = "y"
	err := s.Add(0, make([]float32, 7), make([]float32, 7), []int64{1, 1, 7})
	if err == nil || !strings.Contains(err.Error(), "3 characters, but output \"y\" has 7 classes") {
		t.Errorf("got %v", err)
	}
}

func TestPick(t *testing.T) {
	s := newScorer(t, "a\n", "a\n")
	outs := []task.Output{{Name: "x", Shape: []int64{1, 4}, Float: true}, {Name: "y", Shape: []int64{1, 2, 3}, Float: true}}
	if name, err := s.Pick(outs); err != nil || name != "y" {
		t.Errorf("pick %q, %v", name, err)
	}
	if _, err := s.Pick(outs[:1]); err == nil || !strings.Contains(err.Error(), "task ctc needs per-step class scores") {
		t.Errorf("no rank-3 output: %v", err)
	}
}

func TestCharAccuracy(t *testing.T) {
	for _, c := range []struct {
		got, want string
		acc       float64
	}{{"", "", 1}, {"abc", "abc", 1}, {"abd", "abc", 2.0 / 3}, {"", "ab", 0}, {"ab", "abcd", 0.5}, {"kitten", "sitting", 1 - 3.0/7}} {
		if got := CharAccuracy(c.got, c.want); math.Abs(got-c.acc) > 1e-12 {
			t.Errorf("CharAccuracy(%q, %q) = %v, want %v", c.got, c.want, got, c.acc)
		}
	}
}
