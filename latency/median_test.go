package latency

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

// TestQuartiles: nearest rank, the input left as it was, zeros when empty.
func TestQuartiles(t *testing.T) {
	xs := []float64{8, 1, 7, 2, 6, 3, 5, 4}
	if got, want := Quartiles(xs), [3]float64{2, 4, 6}; got != want {
		t.Errorf("Quartiles = %v, want %v", got, want)
	}
	if xs[0] != 8 {
		t.Errorf("input sorted in place: %v", xs)
	}
	if got := Quartiles(nil); got != [3]float64{} {
		t.Errorf("Quartiles(nil) = %v", got)
	}
}
