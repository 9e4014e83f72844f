package calibrate

// Hot paths of calibration, for benchstat comparisons:
//
//	go test -run='^$' -bench='Observe|Ranges' -count=10 ./calibrate > new.txt
//	benchstat old.txt new.txt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// benchActivations is n post-ReLU-like values: half zeros, the rest
// |normal| with a few large outliers, the shape that makes entropy and MSE
// clip.
func benchActivations(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n)
	for i := range v {
		x := r.NormFloat64()
		if r.IntN(1000) == 0 {
			x *= 20
		}
		v[i] = float32(max(x, 0))
	}
	return v
}

// BenchmarkObserve adds one 1M-value batch to a histogram whose range
// already covers it: the per-element cost of collection.
func BenchmarkObserve(b *testing.B) {
	vals := benchActivations(1<<20, 1)
	s, err := NewStats([]string{"t"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Observe("t", vals); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * len(vals)))
	for b.Loop() {
		if err := s.Observe("t", vals); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserveGrowing feeds batches whose maximum doubles each time,
// so every batch merges bin pairs (the histogram's doubling) before it is
// counted.
func BenchmarkObserveGrowing(b *testing.B) {
	const batches = 16
	base := benchActivations(1<<16, 2)
	scaled := make([][]float32, batches)
	for i := range scaled {
		f := float32(math.Ldexp(1, i))
		scaled[i] = make([]float32, len(base))
		for j, v := range base {
			scaled[i][j] = v * f
		}
	}
	b.SetBytes(int64(4 * len(base) * batches))
	for b.Loop() {
		s, err := NewStats([]string{"t"}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range scaled {
			if err := s.Observe("t", v); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRanges is the threshold search of each histogram method over
// 8 tensors (entropy's search dominates a calibration's Ranges call: about
// 0.2 s per tensor on the development machine).
func BenchmarkRanges(b *testing.B) {
	const tensors = 8
	names := make([]string, tensors)
	for i := range names {
		names[i] = fmt.Sprint("t", i)
	}
	s, err := NewStats(names, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i, n := range names {
		if err := s.Observe(n, benchActivations(1<<14, uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
	for _, m := range []Method{Percentile, Entropy, MSE} {
		b.Run(string(m), func(b *testing.B) {
			for b.Loop() {
				r, err := s.Ranges(m, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if len(r) != tensors {
					b.Fatalf("%d ranges, want %d", len(r), tensors)
				}
			}
		})
	}
}
