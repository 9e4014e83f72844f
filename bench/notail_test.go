package bench

import (
	"testing"
	"time"
)

// TestNoTail: a window ends early only once it has its short runs and, at
// their pace, could not reach a p99's 100 runs.
func TestNoTail(t *testing.T) {
	w := time.Second
	for _, c := range []struct {
		done, short int
		elapsed     time.Duration
		want        bool
	}{
		{20, 20, 400 * time.Millisecond, true},  // 50 runs a second
		{20, 20, 100 * time.Millisecond, false}, // 200 a second: a p99 fits
		{19, 20, 400 * time.Millisecond, false}, // not yet its short runs
		{20, 0, 400 * time.Millisecond, false},  // not asked for
		{20, 20, 0, false},
	} {
		if got := noTail(c.done, c.short, c.elapsed, w); got != c.want {
			t.Errorf("%d runs (short %d) in %s of a %s window: %v, want %v", c.done, c.short, c.elapsed, w, got, c.want)
		}
	}
}
