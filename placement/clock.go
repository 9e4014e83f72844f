package placement

import (
	"fmt"
	"time"
)

// clock is the search's budget: the deadline, and what each kind of step
// has cost so far on this model and machine, so that a step predicted to
// end past the deadline is not started. The search then ends within its
// budget plus at most one step (a prediction that was short), and says
// which step it stopped before.
type clock struct {
	deadline time.Time
	// session is the slowest ORT session creation seen, run the latest
	// median run per sample (measured at the first batch size; larger
	// batches cost less per sample, so predictions for them err long).
	session, run time.Duration
	// quantize is the slowest candidate build seen, accept the slowest
	// accuracy check (0 until one ran: the first is started on the time
	// left alone).
	quantize, accept time.Duration
	// longest is the longest step that ran, for the tests' bound.
	longest time.Duration
	// stoppedBefore names the first step the budget left out.
	stoppedBefore string
}

// cost is what one measuring step saw: its sessions' creation (the
// slowest) and the median run; runs is how many timed runs each model got.
type cost struct {
	session, run time.Duration
	runs         []int
}

// observe keeps a step's cost, its runs taken at batch.
func (c *clock) observe(k cost, batch int) {
	c.session = max(c.session, k.session)
	if k.run > 0 {
		c.run = k.run / time.Duration(max(batch, 1))
	}
}

// timing predicts TimeInterleaved's least cost for models candidates at
// batch: a session and the warm-up runs each, then minTurns turns.
func (c *clock) timing(models, batch int) time.Duration {
	runs := warmupRuns + minTurns*runsPerTurn
	return time.Duration(models) * (c.session + time.Duration(runs*batch)*c.run)
}

// confirmation predicts the confirmation of an INT8 win at batch: FP32
// and the chosen placement timed for a whole window (timePerBatch), not
// cut to the least turns.
func (c *clock) confirmation(batch int) time.Duration {
	return c.timing(2, batch) + timePerBatch
}

// profile predicts one profiling step at batch.
func (c *clock) profile(batch int) time.Duration {
	return c.session + time.Duration(profileRuns*batch)*c.run
}

// fits says whether a step predicted to take d (plus reserve, kept for
// the steps that must follow it) ends before the deadline; when it does
// not, the step is recorded as the one the budget stopped.
func (c *clock) fits(step string, d, reserve time.Duration) bool {
	left := time.Until(c.deadline) - reserve
	if d < left {
		return true
	}
	if c.stoppedBefore == "" {
		predicted := "not predictable yet"
		if d > 0 {
			predicted = "predicted " + d.Round(time.Millisecond).String()
		}
		c.stoppedBefore = fmt.Sprintf("%s (%s, %s left for it)", step, predicted, max(left, 0).Round(time.Millisecond))
	}
	return false
}

// step runs f and remembers how long it took.
func (c *clock) step(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	d := time.Since(start)
	c.longest = max(c.longest, d)
	return d, err
}
