package latency

import (
	"math/rand/v2"
	"testing"
)

// The sign test's ranks: at 99%, 8 values give [min, max] (2/256 <=
// 1%), 7 give nothing; at 95%, 6 values give [min, max]; the tabled
// ranks for larger n.
func TestSignTestRank(t *testing.T) {
	for _, tc := range []struct {
		n          int
		confidence float64
		k          int
	}{
		{7, 0.99, 0}, {8, 0.99, 1}, {10, 0.99, 1}, {20, 0.99, 4}, {30, 0.99, 8}, {100, 0.99, 37},
		{5, 0.95, 0}, {6, 0.95, 1}, {20, 0.95, 6}, {100, 0.95, 40},
	} {
		if k := signTestRank(tc.n, (1-tc.confidence)/2); k != tc.k {
			t.Errorf("n %d at %g: rank %d, want %d", tc.n, tc.confidence, k, tc.k)
		}
	}
	// Far past 2^-1074: still a rank, near n/2 - 1.29 sqrt(n) at 99%.
	if k := signTestRank(40000, 0.005); k < 19700 || k > 19760 {
		t.Errorf("n 40000: rank %d, want about 19742", k)
	}
}

// Over many samples of a known median the 99% interval misses it at
// most about 1% of the time, and is [min, max] at n = 10.
func TestMedianIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	misses, trials := 0, 2000
	for range trials {
		xs := make([]float64, 25)
		for i := range xs {
			xs[i] = rng.ExpFloat64() // median ln 2, a skewed distribution
		}
		lo, hi, ok := MedianInterval(xs, 0.99)
		if !ok {
			t.Fatal("no interval for 25 values")
		}
		if lo > 0.6931 || hi < 0.6931 {
			misses++
		}
	}
	if misses > trials/50 {
		t.Errorf("the 99%% interval missed the median %d times in %d", misses, trials)
	}
	xs := []float64{5, 3, 9, 1, 7, 2, 8, 4, 6, 10}
	if lo, hi, ok := MedianInterval(xs, 0.99); !ok || lo != 1 || hi != 10 {
		t.Errorf("n 10: [%g, %g] %v, want [1, 10]", lo, hi, ok)
	}
	if _, _, ok := MedianInterval(xs[:7], 0.99); ok {
		t.Error("n 7 at 99%: an interval")
	}
}
