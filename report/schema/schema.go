// Package schema holds the sections of report.json that the stages
// measure and fill: what a stage writes is this package's type, so that
// report renders and diffs it without importing the stage. It is a leaf:
// data and the few words that describe it, nothing that runs a model.
// docs/report.md documents every field.
package schema

import (
	"fmt"
	"strings"
)

// Sides is a count in A (the reference) and in B.
type Sides struct {
	A int64 `json:"a"`
	B int64 `json:"b"`
}

// LabelAccuracy is task accuracy against labels.
type LabelAccuracy struct {
	Output     string  `json:"output"`
	Labels     int64   `json:"labels"`
	A          float64 `json:"accuracy_a"`
	B          float64 `json:"accuracy_b"`
	DropPoints float64 `json:"drop_points"` // (A - B) in percentage points
}

// LatencyDelta is ORT latency before and after pruning (level all).
type LatencyDelta struct {
	Batch     int     `json:"batch"`
	BeforeP50 float64 `json:"before_p50_ms"`
	AfterP50  float64 `json:"after_p50_ms"`
}

// ABResult is what Faster measured: per batch size, the baseline's and
// the candidate's median latency in each window (search, then
// confirmation), and the verdict.
type ABResult struct {
	Batches []ABTiming `json:"batches"`
	// Speedup is the geometric mean over batch sizes and windows of the
	// baseline's median over the candidate's; Worst the least of them.
	Speedup float64 `json:"speedup"`
	Worst   float64 `json:"worst"`
	Faster  bool    `json:"faster"`
	Reason  string  `json:"reason"`
}

// ABTiming is one window at one batch size.
type ABTiming struct {
	Batch        int     `json:"batch"`
	BaselineMs   float64 `json:"baseline_p50_ms"`
	CandidateMs  float64 `json:"candidate_p50_ms"`
	Confirmation bool    `json:"confirmation,omitempty"`
}

// PruneLayer says what happened to one prunable layer.
type PruneLayer struct {
	Node    string  `json:"node"`
	Op      string  `json:"op"`
	Weight  string  `json:"weight"`
	Params  int64   `json:"params"`          // weight elements before
	Ratio   float64 `json:"ratio"`           // requested
	Before  float64 `json:"sparsity_before"` // fraction of zeros
	After   float64 `json:"sparsity_after"`
	Removed int64   `json:"channels_removed,omitempty"` // channels:R
	Skipped string  `json:"skipped,omitempty"`          // why it was left alone
	// Refit says how the data-driven methods changed the weights that
	// stay: "obs" (SparseGPT update), "least squares" (channels: the
	// consumers refit), or "none: why"; empty without calibration data.
	Refit string `json:"refit,omitempty"`
	// Damp is the damping OBS solved with (Data.Damp, or the one
	// Data.AutoDamp chose); 0 where OBS did not run.
	Damp float64 `json:"damp,omitempty"`
}

// PruneReport is what a pruning run did.
type PruneReport struct {
	Method       string       `json:"method"`
	Layers       []PruneLayer `json:"layers"`
	ParamsBefore int64        `json:"params_before"` // all initializer elements
	ParamsAfter  int64        `json:"params_after"`
	Sparsity     float64      `json:"sparsity"` // zeros over prunable weights after
}

// Pruned counts the layers pruned (not left alone).
func (r *PruneReport) Pruned() int {
	n := 0
	for _, l := range r.Layers {
		if l.Skipped == "" {
			n++
		}
	}
	return n
}

// How says how the kept weights of the pruned layers were changed:
// "without calibration data", or "refit on the calibration data: " and
// the count of each PruneLayer.Refit kind.
func (r *PruneReport) How() string {
	refit := map[string]int{}
	for _, l := range r.Layers {
		if l.Skipped == "" && l.Refit != "" {
			refit[strings.SplitN(l.Refit, ":", 2)[0]]++
		}
	}
	if len(refit) == 0 {
		return "without calibration data"
	}
	var parts []string
	for _, k := range []string{"least squares", "obs", "none"} {
		if refit[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", refit[k], k))
		}
	}
	return "refit on the calibration data: " + strings.Join(parts, ", ")
}

// MinCheckSamples is the fewest samples a check's figures are trusted on;
// below it they are printed with a warning.
const MinCheckSamples = 32

// Caveats are what makes a measurement weaker than its figures look:
// ranges calibrated on random inputs, a check run on the very samples
// calibration saw, or a check on fewer than MinCheckSamples samples.
// optc quantize, the build table, report.json/md and optc diff all print
// Lines, so the warning reads the same everywhere.
type Caveats struct {
	// RandomCalibration says the ranges came from random inputs.
	RandomCalibration bool `json:"random_calibration"`
	// OnCalibrationData says the checks ran on the calibration samples.
	OnCalibrationData bool `json:"checked_on_calibration_data"`
	// CheckSamples is how many samples the checks ran on (the fewest
	// over the models checked; 0 when nothing was checked).
	CheckSamples int64 `json:"check_samples"`
	// RandomCheck says the checks ran on random inputs: agreement with
	// float on noise, a smoke test.
	RandomCheck bool `json:"checked_on_random_data,omitempty"`
}

// Lines are the caveats as warning sentences, none when there is none.
func (c Caveats) Lines() []string {
	var l []string
	if c.RandomCalibration {
		l = append(l, "calibrated on random data: ranges do not reflect real inputs")
	}
	if c.RandomCheck {
		l = append(l, "checked on random inputs: a smoke test, not a measure of accuracy (give eval data like the deployment's)")
	}
	if c.OnCalibrationData {
		l = append(l, "checked on the calibration samples themselves: the accuracy figures are not held out")
	}
	if c.CheckSamples > 0 && c.CheckSamples < MinCheckSamples {
		l = append(l, fmt.Sprintf("checked on only %d samples (fewer than %d): the accuracy figures are thin", c.CheckSamples, MinCheckSamples))
	}
	return l
}
