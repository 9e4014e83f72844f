package placement

import (
	"fmt"
	"slices"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/procmem"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
)

// Timing settings of the A/B comparison: every candidate gets warm-up
// runs, then the candidates take turns, a few runs each, so that drift
// (frequency, other processes) hits them alike. A window ends after
// timePerBatch, or once every candidate has bench.EnoughRuns runs: a
// median of that many interleaved runs moves less than the noise margin,
// and a fast model (a millisecond a run) has them in a third of the window.
const (
	warmupRuns   = 5
	runsPerTurn  = 3
	minTurns     = 5
	timePerBatch = 1500 * time.Millisecond
	// settleTurns is the least a window runs before a model may leave it
	// (see versus): 30 runs of each model.
	settleTurns = 10
)

// timingBytes bounds the memory the sessions of one timing window hold
// together: interleaved turns need every candidate's session open at once,
// and at batch 8 each holds its own arena of activations (PaddleOCR det at
// 320x320: about 220 MiB a session, so seven candidates took a build past
// 1.7 GB). As each session is warmed up the process's resident memory is
// read; a session that would take the growth past the bound is not
// opened, and that model, and the ones after it, are left out of the
// window (at least two are always timed).
var timingBytes int64 = 768 << 20 // a var so a test can bound it tighter

// inputs builds a random batch of b samples for m's inputs, dynamic dims
// fixed by shapes.
func inputs(m *graph.Model, spec data.Spec, b int) ([]*graph.Tensor, error) {
	return bench.InputBatch(bench.Options{Data: "random", DataOpts: data.Options{High: 1, Seed: 1, Spec: spec}},
		data.GraphInputs(m.Graph), b)
}

// TimeInterleaved times the models (same inputs: random, batch samples,
// dynamic dims fixed by shapes), interleaved, and returns each one's median
// latency in milliseconds. It stops taking turns at the deadline (after
// minTurns). A model whose session did not fit timingBytes beside the
// others gets 0.
func TimeInterleaved(models []graph.Serialized, sess ort.Options, spec data.Spec, batch int, deadline time.Time) ([]float64, error) {
	p50, _, err := timeInterleaved(models, sess, spec, batch, deadline, nil)
	return p50, err
}

// timeInterleaved is TimeInterleaved, also returning what its sessions and
// runs cost (for the search's clock).
//
// retire, when not nil, may let models leave the window early: after
// settleTurns turns it is shown the runs so far after each turn and clears
// active[i] for each model whose runs already say what the caller needs
// to know of it; the window ends when no model is active.
func timeInterleaved(models []graph.Serialized, sess ort.Options, spec data.Spec, batch int, deadline time.Time, retire func(runs [][]float64, active []bool)) ([]float64, cost, error) {
	var spent cost
	first, err := models[0].Parse()
	if err != nil {
		return nil, spent, err
	}
	in, err := inputs(first, spec, batch)
	if err != nil {
		return nil, spent, err
	}
	sessions := make([]*ort.Session, len(models))
	// Two models always open: only a larger window's memory is measured.
	bounded := len(models) > 2
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
		if bounded {
			ort.TrimMemory() // the arenas' pages go back to the system
		}
	}()
	var rss0 int64
	if bounded {
		ort.TrimMemory() // what earlier sessions freed is not counted as in use
		rss0 = procmem.RSS()
	}
	opened := len(models)
	for i, b := range models {
		if i >= 2 && rss0 > 0 {
			if grown := procmem.RSS() - rss0; grown+grown/int64(i) > timingBytes {
				opened = i
				break
			}
		}
		m := first // parsed once for the inputs already
		if i > 0 {
			if m, err = b.Parse(); err != nil {
				return nil, spent, err
			}
		}
		ins, outs := ort.Interface(m)
		created := time.Now()
		if sessions[i], err = ort.NewSession(ort.SourceFrom(b, ins, outs), sess); err != nil {
			return nil, spent, err
		}
		spent.session = max(spent.session, time.Since(created))
		if _, err := bench.WarmUp(sessions[i], in, warmupRuns, 0); err != nil {
			return nil, spent, fmt.Errorf("warm-up run: %w", err)
		}
	}
	active := make([]bool, len(models))
	for i := range opened {
		active[i] = true
	}
	start := time.Now()
	runs, err := bench.Turns(sessions, in, runsPerTurn, active, func(turn int, runs [][]float64) bool {
		if retire != nil && turn+1 >= settleTurns {
			if retire(runs, active); !slices.Contains(active, true) {
				return false
			}
		}
		next := turn + 1
		return next < minTurns || (time.Since(start) < timePerBatch && time.Now().Before(deadline) && next*runsPerTurn < bench.EnoughRuns)
	})
	if err != nil {
		return nil, spent, err
	}
	p50 := make([]float64, len(models))
	for i, r := range runs {
		p50[i] = latency.Median(r) // 0 for a model left out
	}
	spent.run = time.Duration(latency.Median(p50[:opened]) * float64(time.Millisecond))
	for _, r := range runs {
		spent.runs = append(spent.runs, len(r))
	}
	return p50, spent, nil
}

// versus says whether b's runs are clearly slower (1) or clearly faster
// (-1) than a's, or neither (0): clearly when their medians differ by more
// than twice the noise margin and their interquartile ranges do not
// overlap. More runs would not reverse that.
func versus(a, b []float64) int {
	qa, qb := latency.Quartiles(a), latency.Quartiles(b)
	switch r := qb[1] / qa[1]; {
	case qa[1] <= 0:
		return 0
	case r > 1+2*noise && qb[0] > qa[2]:
		return 1
	case r < 1-2*noise && qb[2] < qa[0]:
		return -1
	}
	return 0
}

// retireDecided ends a greedy step's window once its two models are apart:
// the step is decided; a close one gets the whole window.
func retireDecided(runs [][]float64, active []bool) {
	if versus(runs[0], runs[1]) != 0 {
		active[0], active[1] = false, false
	}
}

// retireLosers lets an INT8 candidate (any model but the first, FP32)
// leave the A/B window once it is clearly slower than FP32 and than the
// fastest INT8 candidate: it can be neither chosen nor recommended at this
// batch size, and the contenders get the window's time. FP32 and the
// fastest candidate stay.
func retireLosers(runs [][]float64, active []bool) {
	best := -1
	for i := 1; i < len(runs); i++ {
		if len(runs[i]) > 0 && (best < 0 || latency.Median(runs[i]) < latency.Median(runs[best])) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	for i := 1; i < len(runs); i++ {
		if active[i] && i != best && versus(runs[0], runs[i]) > 0 && versus(runs[best], runs[i]) > 0 {
			active[i] = false
		}
	}
}
