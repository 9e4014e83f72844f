// Package schema holds the sections of report.json that the stages
// measure and fill: what a stage writes is this package's type, so that
// report renders and diffs it without importing the stage. It is a leaf:
// data and the few words that describe it, nothing that runs a model.
// docs/report.md documents every field.
package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/jsonfloat"
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

// The guard's metrics, as Check.Metric names them.
const (
	MetricDrop       = "accuracy drop"
	MetricTaskDrop   = "task metric drop"
	MetricNonFinite  = "NaN/Inf values where float is finite"
	MetricShape      = "runs whose output shape differs from float's"
	MetricCosine     = "min sample cosine"
	MetricSampleRel  = "max sample relative error"
	MetricRelError   = "relative error"
	MetricTop1       = "top-1 agreement"
	MetricTop1Report = "top-1 agreement (reported: too few rows clear of near-ties)"
)

// Check is one guard criterion and what was measured.
type Check struct {
	Metric string `json:"metric"` // one of the Metric constants
	Output string `json:"output,omitempty"`
	// Limit is a maximum for the accuracy drop (points) and the relative
	// errors, a minimum for cosine and top-1 agreement (fractions).
	Limit float64 `json:"limit"`
	// Measured is NaN when nothing finite was measured (encoded as
	// report.json encodes non-finite values); NaN fails.
	Measured jsonfloat.Float `json:"measured"`
	Pass     bool            `json:"pass"`
	// Detail is what the figure rests on: the worst sample, the rows
	// clear of near-ties and the agreement over all rows.
	Detail string `json:"detail,omitempty"`
}

// String is the check in a sentence: what was measured, against which
// limit, and whether it passed.
func (c Check) String() string {
	on := ""
	if c.Output != "" {
		on = " of " + c.Output
	}
	detail := ""
	if c.Detail != "" {
		detail = " (" + c.Detail + ")"
	}
	switch c.Metric {
	case MetricDrop, MetricTaskDrop:
		rel := "within"
		if !c.Pass {
			rel = "over"
		}
		return fmt.Sprintf("%s%s %.2f points, %s the %.2f allowed%s", c.Metric, on, c.Measured, rel, c.Limit, detail)
	case MetricNonFinite:
		return fmt.Sprintf("%.0f NaN/Inf values%s where float is finite (none allowed)", c.Measured, on)
	case MetricShape:
		return fmt.Sprintf("%.0f runs where the shape%s differs from float's (none allowed; %s)", c.Measured, on, c.Detail)
	case MetricSampleRel, MetricRelError:
		rel := "within"
		if !c.Pass {
			rel = "over"
		}
		return fmt.Sprintf("%s%s %s, %s the %.3g allowed%s", c.Metric, on, c.Measured.Text("%.3g"), rel, c.Limit, detail)
	case MetricTop1Report:
		return fmt.Sprintf("top-1 agreement%s %.2f%% (reported, not enforced%s)", on, 100*c.Measured, strings.TrimSuffix(strings.Replace(detail, " (", ": ", 1), ")"))
	case MetricTop1:
		rel := "at least"
		if !c.Pass {
			rel = "below"
		}
		return fmt.Sprintf("top-1 agreement%s %.2f%%, %s the %.2f%% required%s", on, 100*c.Measured, rel, 100*c.Limit, detail)
	}
	rel := "at least"
	if !c.Pass {
		rel = "below"
	}
	return fmt.Sprintf("%s%s %s, %s the %.5f required%s", c.Metric, on, c.Measured.Text("%.5f"), rel, c.Limit, detail)
}

// Guard is what the accuracy guard measured and decided.
type Guard struct {
	// Checks are the written (or refused) model's; empty when nothing
	// could be measured (Note says why).
	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
	// Off: the guard was turned off (--no-guard); Checks are measured
	// and reported, Pass is true whatever they say.
	Off bool `json:"off,omitempty"`
	// Data is what the checks ran on and HeldOut whether it is disjoint
	// from the calibration samples.
	Data    string `json:"data,omitempty"`
	HeldOut bool   `json:"held_out"`
	// First is the fully quantized model's checks when it failed and the
	// accuracy control ran.
	First []Check `json:"first,omitempty"`
	// Allowed: the guard failed and --allow-accuracy-loss wrote the model
	// anyway; it is not recommended.
	Allowed bool `json:"allowed_accuracy_loss,omitempty"`
	// Fallback says what the accuracy control did when it ran, and
	// FallbackChecks how its last try measured when it did not recover.
	Fallback       string  `json:"fallback,omitempty"`
	FallbackChecks []Check `json:"fallback_checks,omitempty"`
	// Tried are the technique sets the accuracy control tried before
	// keeping layers float (ptq's guardTries), with their checks; the best that
	// helped is kept for what follows.
	Tried []TechniqueTry `json:"techniques_tried,omitempty"`
	Note  string         `json:"note,omitempty"`
}

// On says what the checks ran on, for a line of output.
func (g *Guard) On() string {
	switch {
	case g.Data == "random":
		return "fresh random inputs (a smoke test, not a measure of accuracy)"
	case !g.HeldOut:
		return "the calibration data (not held out)"
	}
	return "held-out samples of " + g.Data
}

// Verdict is the guard's outcome in a few words, the same in every output:
// "passed", "passed after the fallback (...)", "REFUSED the INT8 model",
// "FAILED, kept by allow_accuracy_loss (not recommended)" or "OFF".
func (g *Guard) Verdict() string {
	switch {
	case g.Off:
		return "OFF (--no-guard): figures only, nothing enforced"
	case g.Allowed:
		return "FAILED, kept by allow_accuracy_loss (not recommended)"
	case !g.Pass:
		if g.Fallback != "" {
			return "REFUSED the INT8 model (" + g.Fallback + ")"
		}
		return "REFUSED the INT8 model"
	case len(g.First) > 0:
		return "passed after the fallback (" + g.Fallback + ")"
	}
	return "passed"
}

// Failed lists the checks that failed.
func (g *Guard) Failed() []Check {
	var out []Check
	for _, c := range g.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

// FailedChecks names each failed check with its limit and value.
func FailedChecks(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.Pass {
			out = append(out, c.String())
		}
	}
	return strings.Join(out, "; ")
}

// TechniqueTry is one technique set the accuracy control tried.
type TechniqueTry struct {
	Techniques []Technique `json:"techniques"`
	Checks     []Check     `json:"checks"`
	Pass       bool        `json:"pass"`
	// Kept: it measured better than what came before, so the model
	// written (and any layer fallback after it) has it.
	Kept bool `json:"kept"`
}

// Name is the set as the output spells it ("gptq+bias-correction").
func (t TechniqueTry) Name() string { return JoinTechniques(t.Techniques) }

// JoinTechniques spells a set of techniques "gptq+bias-correction".
func JoinTechniques(ts []Technique) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, "+")
}

// TechniquesReport says what the techniques asked for (ptq.Options.Techniques)
// did.
type TechniquesReport struct {
	Applied     []Technique    `json:"applied"`
	Equalized   []EqualizePair `json:"cle,omitempty"`
	SmoothQuant *SmoothReport  `json:"smoothquant,omitempty"`
	GPTQ        *GPTQReport    `json:"gptq,omitempty"`
	Bias        *BiasReport    `json:"bias_correction,omitempty"`
	// ByGuard: the accuracy guard added techniques that were not asked
	// for (ptq's guardTries) when the model failed, and they helped.
	ByGuard bool `json:"by_guard,omitempty"`
}

// SmoothReport is what SmoothQuant rescaled.
type SmoothReport struct {
	Alpha  float64       `json:"alpha"`
	Groups []SmoothedAct `json:"groups"`
}

// SmoothedAct is one rescaled activation: its layers, and how far its
// largest channel stood out from the median channel before and after (the
// ratio per-tensor activation quantization pays for).
type SmoothedAct struct {
	SmoothGroup
	OutlierBefore float64 `json:"outlier_ratio_before"`
	OutlierAfter  float64 `json:"outlier_ratio_after"`
}

// BiasReport is what bias correction changed.
type BiasReport struct {
	Layers int `json:"layers"`
	// MeanShift is the mean |shift| over the corrected channels, in the
	// layers' output units.
	MeanShift float64 `json:"mean_abs_shift"`
}

// GPTQReport is what adaptive rounding of the INT8 weights did.
type GPTQReport struct {
	Layers int `json:"layers"`
	// Skipped counts quantized layers it does not round: depthwise and
	// grouped convolutions (their input Gram is not collected), and, when
	// the accuracy guard tries it, layers with more than ptq.GuardGPTQMaxDim
	// input features (Large).
	Skipped int `json:"skipped"`
	Large   int `json:"skipped_large,omitempty"`
	// OutOfTime counts the layers left to nearest rounding because the
	// accuracy control's share of the budget ran out while GPTQ rounded.
	OutOfTime int `json:"skipped_out_of_time,omitempty"`
	// ErrorRatio is the layers' output error on the calibration inputs
	// (the sum over layers of ΔW·H·ΔWᵀ, H the input Gram) after GPTQ over
	// that of round-to-nearest: below 1 is better.
	ErrorRatio float64 `json:"output_error_vs_nearest"`
}

// DynamicMethod is CalibrationInfo.Method for dynamic INT8: nothing is
// calibrated.
const DynamicMethod = "none: dynamic INT8, activations quantized at run time"

// MaxSQNR stands for an exact match (infinite SQNR).
const MaxSQNR = 200.0

// EqualizePair is two convolutions cross-layer equalization (Nagel et al.
// 2019, "Data-Free Quantization Through Weight Equalization and Bias
// Correction", section 4.1) rescaled: output channel c of First is divided
// by s_c and input channel c of Second multiplied by it, through an
// activation f with f(x/s) = f(x)/s for s > 0 (Relu, LeakyRelu, PRelu, or
// none). s_c = sqrt(r1_c / r2_c), r the channel's largest |weight|, makes
// both channels' ranges sqrt(r1_c·r2_c): the same function, with the
// channels' weight ranges evened out for one scale per tensor.
type EqualizePair struct {
	First      string `json:"first"`
	Second     string `json:"second"`
	Activation string `json:"activation,omitempty"` // "" when none sits between
	Channels   int    `json:"channels"`
	// RangeSpread is the largest channel range over the smallest, of the
	// first layer's output channels, before and after.
	SpreadBefore float64 `json:"range_spread_before"`
	SpreadAfter  float64 `json:"range_spread_after"`
}

// SmoothGroup is one activation SmoothQuant (Xiao et al. 2023) can
// rescale: every reader is a MatMul or Gemm with a constant weight, and
// the activation comes out of a per-channel affine op whose constants can
// take the inverse scale (a LayerNormalization, or the Mul by gamma and
// Add of beta an unfused LayerNorm ends in). Dividing channel k of the
// activation by s_k and multiplying row k of each weight by it computes
// the same function while moving outliers from the activation, quantized
// per tensor, into the weights, quantized per channel.
type SmoothGroup struct {
	Activation string   `json:"activation"`
	Layers     []string `json:"layers"`
	Producer   string   `json:"producer"`
	Channels   int      `json:"channels"`
}

// Technique is a post-training method that changes what is quantized, not
// how Q/DQ is placed: ptq runs it around calibration (it needs the data),
// Apply takes its result.
type Technique string

// The modes: what `--placement` takes besides a file.
const (
	ModeAuto    = "auto"     // measure and decide
	ModeAllINT8 = "all-int8" // every region int8, nothing measured
	// ModeReplay is what optc before 2027 wrote into the placement.json of
	// a replayed build; a replay now keeps the file's own mode (placement.Replay).
	ModeReplay = "replay"
)

// Candidates the search times against each other.
const (
	CandidateFP32    = "fp32"
	CandidateAllINT8 = "all-int8"
	CandidateGuided  = "profile-guided" // regions slower in INT8 kept float
	CandidateGreedy  = "greedy"         // kinds of region reverted by A/B timing
)

// Recommendations for the ORT CPU artifact.
const (
	RecommendINT8 = "int8"
	RecommendFP32 = "fp32"
)

// Placement is placement.json, and report.json's placement section.
type Placement struct {
	Schema int    `json:"schema"`
	Mode   string `json:"mode"`
	// Recommended is what the ORT CPU artifact should be, and Chosen the
	// candidate the regions' decisions describe (the INT8 model written).
	Recommended string   `json:"recommended"`
	Chosen      string   `json:"chosen"`
	Reason      string   `json:"reason"`
	CPU         string   `json:"cpu,omitempty"`
	CPUFlags    []string `json:"cpu_features,omitempty"`
	Level       string   `json:"ort_level"`
	// Threads is the intra-op thread count decisions were made at (0: one
	// per core, ORT's default).
	Threads int      `json:"threads"`
	Regions []Region `json:"regions"`
	// Greedy is the greedy search's moves; Timings the whole-model A/B
	// medians behind the decision.
	Greedy        []GreedyStep      `json:"greedy,omitempty"`
	Timings       []PlacementTiming `json:"timings,omitempty"`
	SearchSeconds float64           `json:"search_seconds"`
	BudgetSeconds float64           `json:"budget_seconds"`
	// BudgetExhausted says the budget ended the measurements early, and
	// StoppedBefore names the first step it left out (with its predicted
	// cost and the time left).
	BudgetExhausted bool   `json:"budget_exhausted"`
	StoppedBefore   string `json:"stopped_before,omitempty"`
	// Rejected lists the candidates (the profile-guided placement, dynamic
	// INT8, the scheme variants) that missed the accuracy budget when the
	// decision would have picked them, with why; NotTried the alternatives
	// the budget left unbuilt. Checked names, in order, every candidate
	// whose accuracy the search checked (all-INT8 was before it).
	Rejected []string `json:"rejected,omitempty"`
	Checked  []string `json:"accuracy_checked,omitempty"`
	NotTried []string `json:"not_tried,omitempty"`
	// Scheme is the quantization scheme of the chosen candidate's model,
	// and Schemes that of every candidate built, by name.
	Scheme  *Scheme           `json:"scheme,omitempty"`
	Schemes map[string]Scheme `json:"schemes,omitempty"`
	// Aligned is the alignment step's timing and choice (see Alignment);
	// absent when it was not tried.
	Aligned *Alignment `json:"aligned_channels,omitempty"`
}

// PlacementTiming is one A/B comparison: median ms per run of each candidate, and
// how many runs each got (fewer for a candidate that left the window
// clearly slower than FP32 and the fastest INT8 candidate).
type PlacementTiming struct {
	Threads int                `json:"threads"`
	Batch   int                `json:"batch"`
	P50Ms   map[string]float64 `json:"p50_ms"`
	Runs    map[string]int     `json:"runs,omitempty"`
	// LeftOut are the candidates whose sessions did not fit timingBytes
	// beside the others' (the slowest at the first batch size go last):
	// not timed at this batch size, so not chosen.
	LeftOut []string `json:"left_out,omitempty"`
	// Confirmation marks the second, fresh-session timing of an INT8 win.
	Confirmation bool `json:"confirmation,omitempty"`
}

// PlacementVersion is the placement.json format written.
const PlacementVersion = 1

// Decisions of a region.
const (
	DecisionINT8  = "int8"
	DecisionFloat = "float"
)

// Region is one node the accuracy-valid INT8 model quantizes.
type Region struct {
	// ID is the node's name, or "#index op" for an unnamed node.
	ID string `json:"region"`
	// Index is the node's position in the float graph: what
	// quantize.Options.KeepFloat takes.
	Index    int    `json:"node_index"`
	Op       string `json:"op"`
	Decision string `json:"decision"`
	// FP32Ms and INT8Ms are the region's profiled median time per run at
	// batch 1 (INT8 including the Q/DQ at its borders that ORT did not
	// fuse); zero when not measured.
	FP32Ms float64 `json:"fp32_ms"`
	INT8Ms float64 `json:"int8_ms"`
}

// GreedyStep is one move of the greedy search: a kind of region reverted to
// float, timed at each batch size against the placement before it.
type GreedyStep struct {
	Kind    string       `json:"kind"`
	Regions int          `json:"regions"` // how many regions of the kind were int8
	Timings []PairTiming `json:"timings"`
	Kept    bool         `json:"kept"`
}

// PairTiming is one batch size of an A/B of two whole models: the
// medians of the model before a change (a region kind reverted to float,
// the conv channels padded) and after it, and the timed runs each got
// (fewer than a whole window when the two were clearly apart).
type PairTiming struct {
	Batch    int     `json:"batch"`
	BeforeMs float64 `json:"before_ms"`
	AfterMs  float64 `json:"after_ms"`
	Runs     int     `json:"runs"`
}

// Alignment is the search's first choice: which float model the INT8
// candidates are quantized from. ORT runs an INT8 conv on MLAS's
// symmetric kernels only when its channels are aligned (a depthwise conv
// a multiple of 16, a dense one a multiple of 4 in and 8 out; see
// ort.Int8ChannelAlign), else on generic kernels several times slower
// (PaddleOCR cls's 200-channel 5x5 depthwise conv: 0.51 against 0.27 ms
// at batch 8). Padding a float model's conv channels with zero filters
// (the pad-conv-channels pass) aligns them and computes the same thing;
// whether the extra channels cost more than the kernels gain is timed:
// all-INT8 of both, at the first batch size.
type Alignment struct {
	// Channels is the multiple the conv channels were padded to, Convs
	// how many convs that padded.
	Channels int `json:"channels"`
	Convs    int `json:"convs"`
	// Timings are all-INT8 quantized from the float model as given
	// (before) and from the padded one (after), at each batch size.
	Timings []PairTiming `json:"timings"`
	// Chosen says every INT8 candidate was quantized from the padded
	// model: it was faster by more than the noise margin over the batch
	// sizes and not slower by more than it at any (the rule INT8 must
	// meet against FP32). FP32 stays the float model as given: what INT8
	// must beat.
	Chosen bool `json:"chosen"`
	// Rejected says why a padded model the timing chose was not used
	// (its all-INT8 model missed the accuracy budget).
	Rejected string `json:"rejected,omitempty"`
}

func (a *Alignment) String() string {
	verdict := "the INT8 candidates are quantized from the model as given"
	if a.Chosen {
		verdict = "the INT8 candidates are quantized from the padded model"
	} else if a.Rejected != "" {
		verdict += " (" + a.Rejected + ")"
	}
	var ts []string
	for _, t := range a.Timings {
		ts = append(ts, fmt.Sprintf("%.3f -> %.3f ms at batch %d", t.BeforeMs, t.AfterMs, t.Batch))
	}
	return fmt.Sprintf("%d convs padded to a multiple of %d for ORT's symmetric INT8 kernels: all-INT8 %s; %s",
		a.Convs, a.Channels, strings.Join(ts, ", "), verdict)
}

// Scheme is the quantization scheme a candidate's model was made with, as
// placement.json records it.
type Scheme struct {
	// Activations is uint8 (asymmetric, u8s8), int8 (symmetric, s8s8) or
	// dynamic (quantized at run time).
	Activations string `json:"activations"`
	PerChannel  bool   `json:"per_channel"`
	ReduceRange bool   `json:"reduce_range"`
	Format      string `json:"format"`
}

func (s Scheme) String() string {
	ch := "per-channel"
	if !s.PerChannel {
		ch = "per-tensor"
	}
	bits := "8-bit"
	if s.ReduceRange {
		bits = "7-bit"
	}
	return fmt.Sprintf("%s activations, %s %s weights, %s", s.Activations, ch, bits, s.Format)
}

// Marshal is the file's bytes: indented JSON with a final newline (map
// keys sorted, so the same decisions give the same bytes).
func (f *Placement) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// KeepFloat is the node indices of the regions kept float, for
// quantize.Options.KeepFloat.
func (f *Placement) KeepFloat() []int {
	var idx []int
	for _, r := range f.Regions {
		if r.Decision == DecisionFloat {
			idx = append(idx, r.Index)
		}
	}
	return idx
}

// Summary says in a phrase what the INT8 model the placement chose is:
// "4 of 5 regions int8", "all 5 regions int8, scheme per-tensor: ...", or
// a whole-model candidate such as dynamic INT8, which is not a placement
// of the static regions. The build's table and report.md both use it.
func (f *Placement) Summary() string {
	s := f.Scheme
	switch {
	case f.wholeModel() && s != nil && s.Activations != "dynamic":
		return fmt.Sprintf("all %d regions int8, scheme %s: %s", len(f.Regions), f.Chosen, s)
	case f.wholeModel():
		return fmt.Sprintf("%s, not a placement of the %d static regions", f.Chosen, len(f.Regions))
	}
	return fmt.Sprintf("%d of %d regions int8", len(f.Regions)-len(f.KeepFloat()), len(f.Regions))
}

// regionCandidates are the candidates that decide region by region; every
// other candidate a placement can choose is a whole model (dynamic INT8,
// a scheme variant).
var regionCandidates = []string{CandidateFP32, CandidateAllINT8, CandidateGuided, CandidateGreedy}

// wholeModel says the chosen candidate is a whole-model alternative, not
// a placement of the regions.
func (f *Placement) wholeModel() bool {
	return f.Chosen != "" && !slices.Contains(regionCandidates, f.Chosen)
}
