package bench

import "testing"

func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{9, 1, 5}, 5}, {xs, 3}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if xs[0] != 5 || xs[1] != 1 {
		t.Errorf("Median sorted its argument: %v", xs)
	}
}
