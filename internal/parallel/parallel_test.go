package parallel

import (
	"errors"
	"fmt"
	"testing"
)

// TestForRunsEveryStepAndReportsTheFirstError: each index runs once, and
// the error returned is the lowest failing index's, whatever finished
// first.
func TestForRunsEveryStepAndReportsTheFirstError(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000} {
		ran := make([]int, n)
		err := For(n, func(k int) error {
			ran[k]++
			if k%3 == 2 {
				return fmt.Errorf("step %d", k)
			}
			return nil
		})
		for k, c := range ran {
			if c != 1 {
				t.Fatalf("n %d: step %d ran %d times", n, k, c)
			}
		}
		var want error
		if n > 2 {
			want = errors.New("step 2")
		}
		if fmt.Sprint(err) != fmt.Sprint(want) {
			t.Errorf("n %d: error %v, want %v", n, err, want)
		}
	}
}
