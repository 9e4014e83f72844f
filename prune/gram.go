package prune

// gram accumulates, over streamed input vectors (each ending with a 1),
// the Gram matrix G = Σ x̃·x̃ᵀ of the vectors x̃ the model being pruned
// sees, and, when a reference is given, the cross matrix C = Σ x̃·xᵀ with
// the vectors x the unpruned model sees at the same place. Its size is
// fixed by the layer (n² values), not by the number of samples: the
// activations themselves are never kept.
type gram struct {
	n    int
	g    []float64 // upper triangle filled while accumulating
	c    []float64 // nil without a reference
	rows int64
}

func newGram(n int, cross bool) *gram {
	s := &gram{n: n, g: make([]float64, n*n)}
	if cross {
		s.c = make([]float64, n*n)
	}
	return s
}

// add accumulates r vectors (row-major r×n); ref holds the reference
// vectors in the same order (nil without a reference).
func (s *gram) add(cur, ref []float64, r int) {
	n := s.n
	for k := 0; k < r; k++ {
		x := cur[k*n : k*n+n]
		for i, xi := range x {
			if xi == 0 {
				continue
			}
			gi := s.g[i*n+i : i*n+n]
			for j, xj := range x[i:] {
				gi[j] += xi * xj
			}
		}
		if s.c != nil {
			y := ref[k*n : k*n+n]
			for i, xi := range x {
				if xi == 0 {
					continue
				}
				ci := s.c[i*n : i*n+n]
				for j, yj := range y {
					ci[j] += xi * yj
				}
			}
		}
	}
	s.rows += int64(r)
}

// finish mirrors the upper triangle and divides by the number of rows, so
// that G and C are means (second moments) rather than sums.
func (s *gram) finish() {
	n := s.n
	inv := 1 / float64(max(s.rows, 1))
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			v := s.g[i*n+j] * inv
			s.g[i*n+j], s.g[j*n+i] = v, v
		}
	}
	for i := range s.c {
		s.c[i] *= inv
	}
}

// merged returns the Gram of both parts' vectors together (a and b
// finished: means), weighted by their row counts.
func merged(a, b *gram) *gram {
	m := newGram(a.n, a.c != nil)
	m.rows = a.rows + b.rows
	wa := float64(a.rows) / float64(max(m.rows, 1))
	wb := float64(b.rows) / float64(max(m.rows, 1))
	for i := range m.g {
		m.g[i] = wa*a.g[i] + wb*b.g[i]
	}
	for i := range m.c {
		m.c[i] = wa*a.c[i] + wb*b.c[i]
	}
	return m
}
