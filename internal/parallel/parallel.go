// Package parallel runs independent steps on every core.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls step(k) for k in [0, n), up to one goroutine per core at
// once, and returns the error of the lowest k that failed, so that the
// outcome does not depend on the schedule. Every step runs, failed or
// not; steps must not share what they write.
func For(n int, step func(k int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				errs[k] = step(k)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
