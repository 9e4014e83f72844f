// Package report is the one report every optc build writes (report.json,
// report.md, report.html) and that optc diff reads back: what each model
// costs in accuracy and gains in speed against the input model, with the
// evidence behind the figures. docs/report.md documents the schema.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/report/schema"
)

// Schema is the version of report.json's layout; readers refuse others.
const Schema = 1

// Report is report.json.
type Report struct {
	Schema int    `json:"schema"`
	Kind   string `json:"kind"` // the command that wrote it: build, quantize or bench
	Input  string `json:"input"`
	Output string `json:"output,omitempty"`
	// Models are the input model (role "input", first) and every artifact
	// optc ran, with their deltas against the input.
	Models       []*Model        `json:"models"`
	Passes       []Pass          `json:"passes,omitempty"`
	Quantization []*Quantization `json:"quantization,omitempty"`
	// Pruning is what pruning did to the float model every artifact grew
	// from (a build with prune:), and what it cost.
	Pruning *Pruning `json:"pruning,omitempty"`
	// Placement is where the ort INT8 model is int8 and what the ORT
	// CPU artifact is, with the timings behind it (placement.json).
	Placement *schema.Placement `json:"placement,omitempty"`
	// PlacementFrom is the placement.json Placement was replayed from
	// ("" when this build decided it).
	PlacementFrom string `json:"placement_from,omitempty"`
	// NCHWc is the build's nchwc stage: the FP32 model shaped for ORT's
	// blocked CPU layout, timed against the ORT artifact, and whether it
	// replaced it.
	NCHWc *Layout `json:"nchwc,omitempty"`
	// WeightsGuard is the perplexity guard on the weight-only model
	// (eval.task lm).
	WeightsGuard *PerplexityGuard `json:"weights_guard,omitempty"`
	// EvalData is what accuracy was measured on; HeldOut says whether it is
	// disjoint from the calibration data.
	EvalData string `json:"eval_data,omitempty"`
	HeldOut  bool   `json:"eval_held_out"`
	// ChecksStoppedAt is the samples of EvalData every check stopped at
	// when a build's budget for checks ran out (0: they ran to the end).
	ChecksStoppedAt int64 `json:"checks_stopped_at,omitempty"`
	// Caveats are what the accuracy figures rest on: random calibration,
	// checks on the calibration samples themselves or on fewer than 32.
	Caveats schema.Caveats `json:"caveats"`
	// Verdict is what the checks decided, for a pipeline to read in one
	// place (optc build exits 3 unless it is "ok").
	Verdict     *Verdict    `json:"verdict,omitempty"`
	Environment Environment `json:"environment"`
	Notes       []string    `json:"notes,omitempty"`
	// Details is the command's own result, everything it measured
	// (build.Result for a build), for tools that need more than the above.
	Details any `json:"details,omitempty"`

	path string // the file Load read it from ("" when parsed from bytes)
}

// Verdict is a build's outcome as the accuracy guard judged it.
type Verdict struct {
	// Status is "ok", or "refused" when the guard refused an INT8 model
	// (not written; the deployment is FP32), or "not-recommended" when an
	// artifact written misses the guard's criteria.
	Status string `json:"status"`
	// Refused are the INT8 artifacts the guard refused, NotRecommended
	// the artifacts written that miss its criteria.
	Refused        []string `json:"refused,omitempty"`
	NotRecommended []string `json:"not_recommended,omitempty"`
	// GuardOff: the user turned the guard off (--no-guard); figures are
	// reported, nothing was enforced.
	GuardOff bool `json:"guard_off,omitempty"`
}

// Model is one model: its size and graph, its agreement with the input
// model and its latency.
type Model struct {
	Name      string `json:"name"` // path relative to the output folder; the input's own path
	Role      string `json:"role"` // input or artifact
	Target    string `json:"target,omitempty"`
	Precision string `json:"precision,omitempty"`
	Bytes     int64  `json:"bytes"`
	// Params counts constant elements (initializers and Constant nodes);
	// Nodes and Ops are the graph's (absent for .ort files optc cannot parse).
	Params   int64           `json:"params,omitempty"`
	Nodes    int             `json:"nodes,omitempty"`
	Ops      []graph.OpCount `json:"ops,omitempty"`
	Accuracy *Accuracy       `json:"accuracy,omitempty"`
	Latency  *latency.Timing `json:"latency,omitempty"`
	Delta    *Delta          `json:"delta,omitempty"` // against the input model
}

// Accuracy is a model against the input model on the evaluation data.
type Accuracy struct {
	Samples int64 `json:"samples"`
	// Task is accuracy against labels in percent (absent without labels):
	// top-1 by default, else TaskMetric (a task plug-in's headline, such
	// as "ctc sequence accuracy"), with its other figures in TaskOthers.
	Task       *float64         `json:"task_accuracy,omitempty"`
	TaskMetric string           `json:"task_metric,omitempty"`
	TaskOthers []TaskFigure     `json:"task_others,omitempty"`
	Outputs    []OutputAccuracy `json:"outputs,omitempty"`
	// LM is a causal language model's figures (eval.task lm).
	LM *LM `json:"lm,omitempty"`
}

// metricNote names what task_accuracy measures when it is not top-1.
func (a *Accuracy) metricNote() string {
	if a == nil || a.TaskMetric == "" {
		return ""
	}
	return " (" + a.TaskMetric + ")"
}

// TaskFigure is one of a task plug-in's secondary figures for one model
// (character accuracy, precision, recall, a class's IoU).
type TaskFigure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// LM is a language model's held-out figures: perplexity of the next
// token, its increase over the input model's (percent), how often its most
// likely next token is the input model's (agreement, a fraction: 1 for
// the input) and the actual one (accuracy).
type LM struct {
	Tokens          int64           `json:"tokens"`
	Perplexity      jsonfloat.Float `json:"perplexity"`
	IncreasePercent jsonfloat.Float `json:"perplexity_increase_percent"`
	Agreement       float64         `json:"next_token_agreement"`
	Accuracy        float64         `json:"next_token_accuracy"`
}

// OutputAccuracy is one output's agreement with the input model. The
// statistics are over FinitePairs of Elements (the pairs where both
// models are finite); NaN and Inf count each side's non-finite values
// (a: the input model), NonFinite the elements where the input model is
// finite and this one is not. A statistic with nothing to measure is NaN,
// written "NaN" (see jsonfloat).
type OutputAccuracy struct {
	Name        string          `json:"name"`
	Elements    int64           `json:"elements,omitempty"`
	FinitePairs int64           `json:"finite_pairs,omitempty"`
	NaN         schema.Sides    `json:"nan"`
	Inf         schema.Sides    `json:"inf"`
	NonFinite   int64           `json:"nonfinite_where_input_finite"`
	Cosine      jsonfloat.Float `json:"cosine"` // pooled over the samples
	// MinSampleCosine and RelError are the figures the accuracy guard
	// judges: the worst sample's cosine (the pooled one for outputs of
	// fewer than compare.SmallOutput values a sample) and relative error.
	// Absent in reports written before they were measured.
	MinSampleCosine *jsonfloat.Float `json:"min_sample_cosine,omitempty"`
	RelError        *jsonfloat.Float `json:"rel_error,omitempty"`
	SNRdB           jsonfloat.Float  `json:"snr_db"` // capped at 200 for identical outputs
	MaxAbs          jsonfloat.Float  `json:"max_abs_error"`
	MeanAbs         jsonfloat.Float  `json:"mean_abs_error"`
	Top1Agree       float64          `json:"top1_agreement,omitempty"`
	Top5Agree       float64          `json:"top5_agreement,omitempty"`
}

// Delta is a model against the input model.
type Delta struct {
	BytesPercent   float64  `json:"bytes_percent"` // (model - input) / input * 100
	Nodes          int      `json:"nodes"`         // model - input
	AccuracyPoints *float64 `json:"accuracy_points,omitempty"`
	// Speedup is the input's p50 over the model's, per batch size.
	Speedup []BatchSpeedup `json:"speedup,omitempty"`
}

// BatchSpeedup is the speed-up at one batch size.
type BatchSpeedup struct {
	Batch int     `json:"batch"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// Pass is one optimization pass's effect.
type Pass struct {
	Name      string `json:"name"`
	Runs      int    `json:"runs"`
	Removed   int    `json:"nodes_removed"`
	Added     int    `json:"nodes_added"`
	Rewritten int    `json:"nodes_rewritten"`
}

// Quantization is one INT8 quantization: what was quantized and how
// faithfully each quantized activation is represented.
type Quantization struct {
	Target       string   `json:"target"`
	Model        string   `json:"model"`
	Method       string   `json:"calibration_method"`
	CalibSamples int64    `json:"calibration_samples"`
	Quantized    int      `json:"nodes_quantized"`
	LeftFloat    int      `json:"nodes_left_float"`
	FellBack     []string `json:"fell_back,omitempty"`
	// Techniques are the post-training techniques applied (asked for, or
	// tried by the accuracy guard), with what each did.
	Techniques *schema.TechniquesReport `json:"techniques,omitempty"`
	// Guard is the accuracy guard's checks (metric, limit, measured) and
	// decision.
	Guard *schema.Guard `json:"guard,omitempty"`
	// SQNR is each quantized activation's signal-to-quantization-noise
	// ratio in dB, worst first.
	SQNR []TensorSQNR `json:"sqnr,omitempty"`
}

// TensorSQNR is one quantized activation's SQNR.
type TensorSQNR struct {
	Tensor string          `json:"tensor"`
	SQNRdB jsonfloat.Float `json:"sqnr_db"`
}

// Environment is the machine the figures come from.
type Environment struct {
	OS          string   `json:"os"`
	Arch        string   `json:"arch"`
	CPU         string   `json:"cpu"`
	CPUFeatures []string `json:"cpu_features"`
	Cores       int      `json:"cores"`
	Threads     int      `json:"threads"` // ORT intra-op threads (0: one per core)
	Level       string   `json:"ort_level"`
	ORTVersion  string   `json:"ort_version"`
	GoVersion   string   `json:"go_version"`
}

// nonFinite is how many output values of m are NaN or infinite where the
// input model's are finite (0 for the input model).
func (m *Model) nonFinite() int64 {
	var n int64
	if m.Accuracy != nil {
		for _, o := range m.Accuracy.Outputs {
			n += o.NonFinite
		}
	}
	return n
}

// model finds a model by role (and name for artifacts).
func (r *Report) model(role, name string) *Model {
	for _, m := range r.Models {
		if m.Role == role && (role == "input" || m.Name == name) {
			return m
		}
	}
	return nil
}

// Load reads a report.json, or the one in a build folder.
func Load(path string) (*Report, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "report.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse decodes report.json's bytes; path names the file in errors.
func Parse(b []byte, path string) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a report: %w", path, err)
	}
	switch {
	case r.Schema == 0:
		return nil, fmt.Errorf("%s: not an optc report (no schema version; built before reports had one?)", path)
	case r.Schema != Schema:
		return nil, fmt.Errorf("%s: report schema %d, this optc reads %d", path, r.Schema, Schema)
	case len(r.Models) == 0:
		return nil, fmt.Errorf("%s: the report has no models", path)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.path = path
	return &r, nil
}

// check is what readers of a report rely on: the input model first, every
// model named and present.
func (r *Report) check() error {
	for i, m := range r.Models {
		switch {
		case m == nil:
			return fmt.Errorf("models[%d] is null", i)
		case (i == 0) != (m.Role == "input"):
			return fmt.Errorf("models[%d] (%q) has role %q: the input model comes first, and only once", i, m.Name, m.Role)
		case m.Role != "input" && m.Role != "artifact":
			return fmt.Errorf("models[%d] (%q) has role %q, want input or artifact", i, m.Name, m.Role)
		}
	}
	for i, q := range r.Quantization {
		if q == nil {
			return fmt.Errorf("quantization[%d] is null", i)
		}
	}
	return nil
}

// Pruning is a build's pruning: each method's layer table and the cost
// of the pruned float model against the unpruned one, measured on Data
// (details.optimize.prune has every step of a budget search).
type Pruning struct {
	Methods []*schema.PruneReport `json:"methods"`
	Data    string                `json:"data,omitempty"`
	Samples int64                 `json:"samples,omitempty"`
	// Accuracy is the task accuracy (percent) unpruned and pruned, with
	// labels.
	Accuracy *schema.LabelAccuracy `json:"accuracy,omitempty"`
	// MinCosine is the lowest cosine over the outputs, pruned against
	// unpruned.
	MinCosine jsonfloat.Float `json:"min_cosine"`
	// Spared are the layers an accuracy budget left whole.
	Spared  []string             `json:"spared_layers,omitempty"`
	Latency *schema.LatencyDelta `json:"latency,omitempty"`
}
