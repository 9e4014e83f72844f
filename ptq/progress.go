package ptq

import (
	"fmt"
	"time"
)

// ProgressEvery spaces the progress lines of a long step (calibration,
// and the loops of the guard and the per-tensor SQNR): a user, or a CI
// log, hears from a command at least this often.
const ProgressEvery = 10 * time.Second

// CalibrationProgress returns an Options.Calib.Progress that says, every
// ProgressEvery, how many calibration samples have run and, when total
// (the samples to run) is known, about how long is left. first, when set,
// gets the first batch's size and time (build checks them against its
// plan).
func CalibrationProgress(total int64, say func(format string, args ...any), first func(n int64, took time.Duration)) func(int64) {
	start, last := time.Now(), time.Now()
	seen := false
	return func(n int64) {
		if n == 0 { // the session is ready: time the batches alone
			start, last = time.Now(), time.Now()
			return
		}
		if !seen {
			seen = true
			if first != nil {
				first(n, time.Since(start))
			}
		}
		if time.Since(last) < ProgressEvery {
			return
		}
		last = time.Now()
		took := fmt.Sprintf("%.1fs", time.Since(start).Seconds())
		if total <= 0 || n >= total {
			say("calibrating: %d samples in %s", n, took)
			return
		}
		left := time.Duration(time.Since(start).Seconds() / float64(n) * float64(total-n) * float64(time.Second))
		say("calibrating: %d of %d samples in %s, about %s left", n, total, took, left.Round(100*time.Millisecond))
	}
}
