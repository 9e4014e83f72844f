package placement

import (
	"fmt"
	"slices"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
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
	// settleTurns is the least a window runs before a settled test (see
	// apart) may end it: 30 runs of each model.
	settleTurns = 10
)

// inputs builds a random batch of b samples for m's inputs, dynamic dims
// fixed by shapes.
func inputs(m *graph.Model, spec data.Spec, b int) ([]*graph.Tensor, error) {
	return bench.InputBatch(bench.Options{Data: "random", DataOpts: data.Options{High: 1, Seed: 1, Spec: spec}},
		data.GraphInputs(m.Graph), b)
}

// TimeInterleaved times the models (same inputs: random, batch samples,
// dynamic dims fixed by shapes), interleaved, and returns each one's median
// latency in milliseconds. It stops taking turns at the deadline (after
// minTurns).
func TimeInterleaved(models []graph.Serialized, sess ort.Options, spec data.Spec, batch int, deadline time.Time) ([]float64, error) {
	p50, _, err := timeInterleaved(models, sess, spec, batch, deadline, nil)
	return p50, err
}

// timeInterleaved is TimeInterleaved, also returning what its sessions and
// runs cost (for the search's clock).
//
// settled, when not nil, may end the window early: after settleTurns
// turns it is asked after each turn whether the runs so far already decide
// what the caller wants to know.
func timeInterleaved(models []graph.Serialized, sess ort.Options, spec data.Spec, batch int, deadline time.Time, settled func(runs [][]float64) bool) ([]float64, cost, error) {
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
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, b := range models {
		m, err := b.Parse()
		if err != nil {
			return nil, spent, err
		}
		ins, outs := ort.Interface(m)
		created := time.Now()
		if sessions[i], err = ort.NewSession(ort.SourceFrom(b, ins, outs), sess); err != nil {
			return nil, spent, err
		}
		spent.session = max(spent.session, time.Since(created))
		for range warmupRuns {
			if _, err := sessions[i].Run(in); err != nil {
				return nil, spent, fmt.Errorf("warm-up run: %w", err)
			}
		}
	}
	runs := make([][]float64, len(models))
	start := time.Now()
	for turn := 0; turn < minTurns || (time.Since(start) < timePerBatch && time.Now().Before(deadline) && turn*runsPerTurn < bench.EnoughRuns); turn++ {
		for k := range models {
			i := (k + turn) % len(models) // rotate who goes first
			for range runsPerTurn {
				t := time.Now()
				if _, err := sessions[i].Run(in); err != nil {
					return nil, spent, err
				}
				runs[i] = append(runs[i], float64(time.Since(t))/float64(time.Millisecond))
			}
		}
		if settled != nil && turn+1 >= settleTurns && settled(runs) {
			break
		}
	}
	p50 := make([]float64, len(models))
	for i, r := range runs {
		p50[i] = bench.Median(r)
	}
	spent.run = time.Duration(bench.Median(p50) * float64(time.Millisecond))
	spent.runs = len(runs[0])
	return p50, spent, nil
}

// apart says that the second model's runs are clearly faster or clearly
// slower than the first's: their medians differ by more than twice the
// noise margin and their interquartile ranges do not overlap. A greedy
// step so decided after settleTurns turns would not be decided otherwise
// by more runs; a close one gets the whole window.
func apart(runs [][]float64) bool {
	a, b := quartiles(runs[0]), quartiles(runs[1])
	if a[1] <= 0 {
		return false
	}
	r := b[1] / a[1]
	return (r > 1+2*noise && b[0] > a[2]) || (r < 1-2*noise && b[2] < a[0])
}

// quartiles are the 25th, 50th and 75th percentiles of xs (nearest rank).
func quartiles(xs []float64) [3]float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return s[min(int(q*float64(len(s))), len(s)-1)]
	}
	return [3]float64{at(0.25), at(0.5), at(0.75)}
}
