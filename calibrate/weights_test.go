package calibrate

import (
	"math"
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestWeightScales(t *testing.T) {
	w, err := graph.NewFloat32Tensor("w", []int64{3, 2, 2}, []float32{
		1, -2, 0.5, 0,
		0, 0, 0, 0,
		0.5, -0.25, 0, 0.125,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		axis   int
		reduce bool
		want   []float64
	}{
		{0, false, []float64{2.0 / 127, MinScale, 0.5 / 127}},
		{0, true, []float64{2.0 / 63, MinScale, 0.5 / 63}},
		{-3, false, []float64{2.0 / 127, MinScale, 0.5 / 127}},
		{1, false, []float64{2.0 / 127, 0.5 / 127}},
		{2, true, []float64{1.0 / 63, 2.0 / 63}},
		{-1, false, []float64{1.0 / 127, 2.0 / 127}},
	} {
		got, err := WeightScales(w, c.axis, 8, c.reduce)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("axis %d: %v, want %v", c.axis, got, c.want)
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-15 || got[i] <= 0 {
				t.Errorf("axis %d reduce %v: %v, want %v", c.axis, c.reduce, got, c.want)
				break
			}
		}
	}
	if s, err := WeightScales(w, 0, 4, false); err != nil || math.Abs(s[0]-2.0/7) > 1e-15 {
		t.Errorf("4-bit: %v %v, want 2/7 first", s, err)
	}
	for _, axis := range []int{3, -4} {
		if _, err := WeightScales(w, axis, 8, false); err == nil {
			t.Errorf("axis %d accepted", axis)
		}
	}
	if _, err := WeightScales(w, 0, 1, false); err == nil {
		t.Error("1-bit accepted")
	}
	bad, _ := graph.NewFloat32Tensor("bad", []int64{2}, []float32{1, float32(math.NaN())})
	if _, err := WeightScales(bad, 0, 8, false); err == nil {
		t.Error("NaN weight accepted")
	}
	ints, _ := graph.NewInt64Tensor("i", []int64{2}, []int64{1, 2})
	if _, err := WeightScales(ints, 0, 8, false); err == nil {
		t.Error("int64 weight accepted")
	}
}
