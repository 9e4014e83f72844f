package report

import (
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
)

// SetGraph sets the model's size and graph from its summary.
func (m *Model) SetGraph(s *graph.Summary) {
	m.Bytes, m.Params, m.Nodes, m.Ops = s.FileBytes, s.Parameters.Count, s.Nodes, s.OpTypes
}

// SetTask sets a task plug-in's figures: A's (the input model's) or B's.
func (a *Accuracy) SetTask(f *task.Figure, modelA bool) {
	pick := func(x, y float64) float64 {
		if modelA {
			return x
		}
		return y
	}
	v := pick(f.A, f.B)
	a.Task, a.TaskMetric, a.TaskOthers = &v, f.Task+" "+f.Metric, nil
	for _, o := range f.Others {
		a.TaskOthers = append(a.TaskOthers, TaskFigure{Name: o.Name, Value: pick(o.A, o.B)})
	}
}

// SetDeltas sets every artifact's delta against the input model (the
// first).
func (r *Report) SetDeltas() {
	for _, m := range r.Models[1:] {
		m.Delta = delta(r.Models[0], m)
	}
}

// delta is m against the input model.
func delta(in, m *Model) *Delta {
	d := &Delta{Nodes: m.Nodes - in.Nodes}
	if in.Bytes > 0 {
		d.BytesPercent = 100 * float64(m.Bytes-in.Bytes) / float64(in.Bytes)
	}
	if m.Nodes == 0 {
		d.Nodes = 0 // a graph optc cannot read
	}
	if t, ti := taskAccuracy(m), taskAccuracy(in); t != nil && ti != nil {
		p := *t - *ti
		d.AccuracyPoints = &p
	}
	if m.Latency != nil && in.Latency != nil {
		for _, b := range m.Latency.Batches {
			if ib := in.Latency.Batch(b.Batch); ib != nil && b.P50 > 0 {
				s := BatchSpeedup{Batch: b.Batch, P50: ib.P50 / b.P50}
				if b.P99 > 0 && ib.P99 > 0 { // else one was not reported
					s.P99 = ib.P99 / b.P99
				}
				d.Speedup = append(d.Speedup, s)
			}
		}
	}
	return d
}

func taskAccuracy(m *Model) *float64 {
	if m.Accuracy == nil {
		return nil
	}
	return m.Accuracy.Task
}

// Layout is the nchwc stage's record (report.json "nchwc"): the FP32
// model shaped for ORT's blocked CPU layout (passes.ORTCPULayout), timed
// against what the ORT artifact deployed before, and deployed when
// confirmed faster.
type Layout struct {
	Block int `json:"block"`
	// Convs is how many convs had their channels padded; Bridges how many
	// HardSigmoids got an identity conv to fuse into.
	Convs    int              `json:"convs_padded"`
	Bridges  int              `json:"hardsigmoid_bridges"`
	Baseline string           `json:"baseline,omitempty"` // what it was timed against
	Timing   *schema.ABResult `json:"timing,omitempty"`
	Deployed bool             `json:"deployed"`
	Reason   string           `json:"reason"`
	// CheckFailed says the shaped model differed from the FP32 model in
	// ORT (a bug in the passes): it is not deployed.
	CheckFailed bool `json:"check_failed,omitempty"`
}

// PerplexityGuard is the language-model guard's verdict on the
// weight-only model (eval.task lm).
type PerplexityGuard struct {
	MaxIncreasePercent float64         `json:"max_perplexity_increase_percent"`
	IncreasePercent    jsonfloat.Float `json:"perplexity_increase_percent"`
	Data               string          `json:"data"`
	Pass               bool            `json:"pass"`
	// Allowed: it missed, and allow_accuracy_loss kept it (not deployed).
	Allowed bool `json:"allowed_by_allow_accuracy_loss,omitempty"`
}
