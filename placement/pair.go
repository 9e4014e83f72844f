package placement

import (
	"fmt"
	"math"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// timePair times before and after, interleaved, at each batch size, the
// windows together ending by stop, and says whether after wins by the
// rule INT8 must meet against FP32 (wins: faster by more than the noise
// margin over the batch sizes, not slower by more than it at any). The
// first batch size's cost is what clk learns.
func timePair(opts Options, clk *clock, before, after graph.Serialized, stop time.Time) ([]schema.PairTiming, bool, error) {
	var ts []schema.PairTiming
	speedup, worst := 0.0, math.Inf(1)
	for i, b := range opts.Batches {
		// Each batch size gets an equal part of the time left.
		window := time.Now().Add(time.Until(stop) / time.Duration(len(opts.Batches)-i))
		var p50 []float64
		var k cost
		if _, err := clk.step(func() (err error) {
			p50, k, err = timeInterleaved([]graph.Serialized{before, after}, opts.Session, opts.Inputs, b, window, retireDecided)
			if i == 0 {
				clk.observe(k, b)
			}
			return err
		}); err != nil {
			return nil, false, fmt.Errorf("batch %d: %w", b, err)
		}
		ts = append(ts, schema.PairTiming{Batch: b, BeforeMs: round(p50[0]), AfterMs: round(p50[1]), Runs: min(k.runs[0], k.runs[1])})
		r := p50[0] / p50[1]
		speedup += r / float64(len(opts.Batches))
		worst = min(worst, r)
	}
	return ts, wins(speedup, worst), nil
}

// pairTiming predicts timePair's least cost.
func (c *clock) pairTiming(batches []int) time.Duration {
	var d time.Duration
	for _, b := range batches {
		d += c.timing(2, b)
	}
	return d
}
