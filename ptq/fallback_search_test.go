package ptq

import (
	"slices"
	"testing"
	"time"
)

// TestFewestFloat: the fallback's search counts up from one layer float,
// doubling, and bisects below the first count that passes; it finds the
// fewest when more layers float never hurt, a few when many miss (bias
// correction lost), none when nothing passes, and a replayed stop ends
// it at the same step.
func TestFewestFloat(t *testing.T) {
	for _, c := range []struct {
		name    string
		most    int
		pass    func(k int) bool
		stops   Stops
		want    int // 0: none passed
		tried   []int
		stopped bool
	}{
		{"monotone", 20, func(k int) bool { return k >= 5 }, nil, 5, []int{1, 2, 4, 8, 6, 5}, false},
		{"first", 20, func(k int) bool { return true }, nil, 1, []int{1}, false},
		{"few pass, many miss", 20, func(k int) bool { return k == 2 || k == 3 }, nil, 2, []int{1, 2}, false},
		{"none", 12, func(k int) bool { return false }, nil, 0, []int{1, 2, 4, 8, 12}, false},
		{"stopped while bisecting", 20, func(k int) bool { return k >= 5 }, Stops{"fallback search": 4}, 6, []int{1, 2, 4, 8, 6}, true},
		{"stopped before a pass", 20, func(k int) bool { return k >= 5 }, Stops{"fallback search": 2}, 0, []int{1, 2, 4}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := Options{Replaying: c.stops != nil, stops: newStopper(c.stops != nil, c.stops)}
			var tried []int
			attempt := func(k int) (*fallbackTry, error) {
				tried = append(tried, k)
				return &fallbackTry{kept: make([]string, k)}, nil
			}
			best, last, stopped, err := fewestFloat(opts, c.most, attempt, func(t *fallbackTry) bool { return c.pass(len(t.kept)) }, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if best != nil {
				got = len(best.kept)
			}
			if got != c.want || !slices.Equal(tried, c.tried) || stopped != c.stopped || last == nil || len(last.kept) != tried[len(tried)-1] {
				t.Errorf("fewest %d, tried %v, stopped %v; want %d, %v, %v", got, tried, stopped, c.want, c.tried, c.stopped)
			}
		})
	}
}
