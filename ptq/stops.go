package ptq

import (
	"fmt"
	"time"
)

// Stops is where a budget ended the steps of a quantization: for each
// bounded loop (calibration's samples, the guard's tries, GPTQ's layers,
// the fallback's measurements), how far it had gone when its time ran
// out. A loop that ran to its end is not listed. Stops are counts, not
// times, so that a replay (Options.ReplayStops) ends each loop at the
// same place without timing it, and writes the same model.
type Stops map[string]int

// CalibrationLoop is calibration's entry in Stops: the samples read.
const CalibrationLoop = "calibration samples"

// stopper decides where the bounded loops of one Run end: at their
// deadlines, recording the counts, or, replaying, at the recorded counts
// and nowhere else.
type stopper struct {
	replaying bool
	replay    Stops
	got       Stops
	seen      map[string]int // loops begun, by name: a second one is name#2
}

func newStopper(replaying bool, replay Stops) *stopper {
	return &stopper{replaying: replaying, replay: replay, got: Stops{}, seen: map[string]int{}}
}

// loop begins a bounded loop named name: the function it returns says
// whether the loop stops before its step n (n counts what the loop
// measures in: samples, tries, layers), given the loop's deadline (zero:
// none). Without a stopper (nil) nothing stops but a deadline.
func (s *stopper) loop(name string) func(n int, deadline time.Time) bool {
	if s == nil {
		return func(_ int, deadline time.Time) bool { return !deadline.IsZero() && time.Now().After(deadline) }
	}
	s.seen[name]++
	key := name
	if k := s.seen[name]; k > 1 {
		key = fmt.Sprintf("%s#%d", name, k)
	}
	return func(n int, deadline time.Time) bool {
		if s.replaying {
			at, ok := s.replay[key]
			return ok && n >= at
		}
		if deadline.IsZero() || !time.Now().After(deadline) {
			return false
		}
		if _, ok := s.got[key]; !ok {
			s.got[key] = n
		}
		return true
	}
}

// stops is what a Run records: nil when nothing stopped.
func (s *stopper) stops() Stops {
	if s == nil {
		return nil
	}
	if s.replaying {
		if len(s.replay) == 0 {
			return nil
		}
		return s.replay
	}
	if len(s.got) == 0 {
		return nil
	}
	return s.got
}

// stopReason is why a bounded loop stopped: its budget's why, or the
// replay.
func (o Options) stopReason(budget string) string {
	if o.Replaying {
		return "stopped where the replayed build's budget stopped it"
	}
	return budget
}

// The shares of a quantization's budget (optc quantize --budget; optc
// build gives it the rest of its own budget): calibration stops at
// CalibrationShare of it, once it has MinBudgetSamples; the accuracy
// control (the guard's tries and fallback) gets FallbackShare, after the
// guard's first check, which stops at CheckShare once it has
// MinCheckSamples; the
// per-tensor SQNR, a diagnostic, is skipped after SQNRShare.
const (
	CalibrationShare = 0.3
	CheckShare       = 0.5
	FallbackShare    = 0.5
	SQNRShare        = 0.75
)

// WithinBudget bounds o's steps by a budget d that began at start.
func (o *Options) WithinBudget(start time.Time, d time.Duration) {
	share := func(f float64) time.Duration { return time.Duration(f * float64(d)) }
	o.CalibrationDeadline = start.Add(share(CalibrationShare))
	o.CheckDeadline = start.Add(share(CheckShare))
	o.FallbackBudget = share(FallbackShare)
	o.Deadline = start.Add(share(SQNRShare))
}
