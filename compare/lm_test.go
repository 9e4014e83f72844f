package compare

import (
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// TestLMScorer checks perplexity, agreement and accuracy against values
// worked out by hand: two positions predicting the next id of [0 1 2].
func TestLMScorer(t *testing.T) {
	ids, _ := graph.NewInt64Tensor("ids", []int64{1, 3}, []int64{0, 1, 2})
	// vocab 3; A is uniform at position 0 and sure of 2 at position 1; B
	// is sure of 1 at position 0 and of 0 at position 1. Position 2 has
	// no next id and must not count.
	a := []float32{0, 0, 0, 0, 0, 10, 5, 5, 5}
	b := []float32{0, 10, 0, 10, 0, 0, 0, 0, 0}
	s := NewLMScorer("ids", "logits")
	if err := s.Add(ids, a, b, []int64{1, 3, 3}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	nll := func(l []float64, id int) float64 {
		var sum float64
		for _, z := range l {
			sum += math.Exp(z)
		}
		return math.Log(sum) - l[id]
	}
	wantA := math.Exp((nll([]float64{0, 0, 0}, 1) + nll([]float64{0, 0, 10}, 2)) / 2)
	wantB := math.Exp((nll([]float64{0, 10, 0}, 1) + nll([]float64{10, 0, 0}, 2)) / 2)
	if r.Tokens != 2 || math.Abs(float64(r.PerplexityA)-wantA) > 1e-9 || math.Abs(float64(r.PerplexityB)-wantB) > 1e-6 {
		t.Errorf("tokens %d, perplexity %v %v, want 2, %v %v", r.Tokens, r.PerplexityA, r.PerplexityB, wantA, wantB)
	}
	// A's argmax: 0 (ties go to the first), 2; B's: 1, 0.
	if r.Agreement != 0 || r.AccuracyA != 0.5 || r.AccuracyB != 0.5 {
		t.Errorf("agreement %v, accuracy %v %v, want 0, 0.5, 0.5", r.Agreement, r.AccuracyA, r.AccuracyB)
	}
	bad, _ := graph.NewInt64Tensor("ids", []int64{1, 3}, []int64{0, 7, 2})
	if err := NewLMScorer("ids", "logits").Add(bad, a, b, []int64{1, 3, 3}); err == nil {
		t.Error("an id outside the vocabulary was scored")
	}
}

func TestLMIO(t *testing.T) {
	ins := []ort.IO{{Name: "mask", DType: graph.Float, Shape: []int64{-1, -1}}, {Name: "ids", DType: graph.Int64, Shape: []int64{-1, -1}}}
	outs := []ort.IO{{Name: "h", DType: graph.Float, Shape: []int64{-1, 4}}, {Name: "logits", DType: graph.Float, Shape: []int64{-1, -1, 256}}}
	if in, out, err := LMIO(ins, outs, ""); err != nil || in != 1 || out != 1 {
		t.Errorf("LMIO = %d, %d, %v; want 1, 1", in, out, err)
	}
	two := append(outs, ort.IO{Name: "hidden", DType: graph.Float, Shape: []int64{-1, -1, 8}})
	if _, _, err := LMIO(ins, two, ""); err == nil {
		t.Error("two rank-3 float outputs: no error")
	}
	if _, out, err := LMIO(ins, two, "hidden"); err != nil || out != 2 {
		t.Errorf("named logits: %d, %v", out, err)
	}
	if _, _, err := LMIO(ins, outs, "h"); err == nil {
		t.Error("rank-2 logits accepted")
	}
	if _, _, err := LMIO(ins[:1], outs, ""); err == nil {
		t.Error("no int64 input: no error")
	}
}
