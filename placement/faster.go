package placement

import (
	"fmt"
	"math"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report/schema"
)

// Faster times candidate against baseline (same random inputs, dynamic
// dims fixed by spec), interleaved, at each batch size, and again with
// fresh sessions to confirm, as the placement search confirms INT8:
// faster means faster by more than the noise overall and not slower than
// the noise at any batch size, in both windows. A second window is only
// run when the first says faster.
func Faster(baseline, candidate graph.Serialized, sess ort.Options, spec data.Spec, batches []int) (*schema.ABResult, error) {
	r := &schema.ABResult{}
	models := []graph.Serialized{baseline, candidate}
	for _, confirm := range []bool{false, true} {
		for _, b := range batches {
			p50, err := TimeInterleaved(models, sess, spec, b, time.Now().Add(timePerBatch))
			if err != nil {
				return nil, fmt.Errorf("timing at batch %d: %w", b, err)
			}
			r.Batches = append(r.Batches, schema.ABTiming{Batch: b, BaselineMs: round(p50[0]), CandidateMs: round(p50[1]), Confirmation: confirm})
		}
		r.Speedup, r.Worst = abSpeedup(r.Batches)
		if !wins(r.Speedup, r.Worst) {
			r.Reason = fmt.Sprintf("%.2fx the baseline's speed (worst batch %.2fx): within noise or slower", r.Speedup, r.Worst)
			if confirm {
				r.Reason = "faster when first timed, but " + r.Reason + " with the confirmation"
			}
			return r, nil
		}
	}
	r.Faster = true
	r.Reason = fmt.Sprintf("%.2fx the baseline's speed (worst batch %.2fx), confirmed", r.Speedup, r.Worst)
	return r, nil
}

func abSpeedup(ts []schema.ABTiming) (mean, worst float64) {
	logSum, n := 0.0, 0
	worst = math.Inf(1)
	for _, t := range ts {
		if t.BaselineMs > 0 && t.CandidateMs > 0 {
			s := t.BaselineMs / t.CandidateMs
			logSum += math.Log(s)
			worst = min(worst, s)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return round(math.Exp(logSum / float64(n))), round(worst)
}
