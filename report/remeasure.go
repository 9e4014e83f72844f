package report

// The verdicts of a remeasured artifact at one batch size.
const (
	VerdictPass      = "pass"
	VerdictFail      = "FAIL"
	VerdictUndecided = "undecided"
)

// Remeasured is one artifact at one batch size, timed again.
type Remeasured struct {
	Batch int     `json:"batch"`
	OldMs float64 `json:"old_ms"` // the median of every run
	NewMs float64 `json:"new_ms"`
	// Ratio is the median over rounds of NEW's median over OLD's in the
	// round, and its remeasure.Confidence interval (zero with fewer than
	// 8 rounds: none exists).
	Ratio   Interval `json:"ratio"`
	Rounds  int      `json:"rounds"`
	Seconds float64  `json:"seconds"` // warm-ups included
	// Verdict is pass, FAIL or undecided against the latency gate's limit
	// ("" without a gate).
	Verdict    string         `json:"verdict,omitempty"`
	OldSession SessionOptions `json:"old_session"`
	NewSession SessionOptions `json:"new_session"`
}

// SessionOptions are the ORT settings a build runs its artifacts with,
// from its manifest (runtime.level and runtime.threads).
type SessionOptions struct {
	Level   string `json:"ort_level"`
	Threads int    `json:"intra_op_threads"` // 0: one per core
}

// RemeasureSettings is how a diff's remeasure ran, for its JSON.
type RemeasureSettings struct {
	Confidence float64 `json:"confidence"`
	MinRounds  int     `json:"min_rounds"`
	TimeS      float64 `json:"time_s"`
	Undecided  string  `json:"undecided"` // pass or fail
}
