// Package config is optc's build configuration: the YAML file `optc build
// --config` reads. Every build flag has a key here; flags override the
// file. Decoding is strict: an unknown key or a value of the wrong type is
// an error naming the file and line, because a misspelt key that is
// silently ignored builds the wrong artifact. docs/config.md is the
// reference.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/optc-dev/optc/internal/choice"
)

// Config is everything `optc build` does, as one value.
type Config struct {
	Model    string   `yaml:"model" json:"model"`
	Output   string   `yaml:"output" json:"output,omitempty"`
	Force    bool     `yaml:"force" json:"force,omitempty"`
	Targets  []string `yaml:"targets" json:"targets"`     // ort, tensorrt, triton or all
	OptLevel int      `yaml:"opt_level" json:"opt_level"` // -O: 0, 1 or 2
	// Budget is the build's time budget (--budget), split across the
	// stages whose length optc chooses: the placement search, the timing
	// windows and the Triton sweep (build.Plan). 0: no budget, each
	// runs as configured.
	Budget Duration `yaml:"budget" json:"budget"`
	// Replay is an earlier build's folder (or its decisions.json) whose
	// choices made by timing this build applies instead of timing them:
	// the INT8 placement, the nchwc stage and the Triton profiles
	// (build.Decisions). It sets quantize.placement and runtime.nchwc,
	// which must then be left at auto.
	Replay string `yaml:"replay,omitempty" json:"replay,omitempty"`
	// Shapes fixes dynamic input dims for the measurements (name: dims;
	// -1 keeps a dim dynamic; on a dynamic batch axis the value is only
	// the default batch).
	Shapes map[string][]int64 `yaml:"shapes" json:"shapes"`
	// BatchAxes overrides where an input's batch is (name: axis; -1 for an
	// input that is not per sample).
	BatchAxes map[string]int `yaml:"batch_axes,omitempty" json:"batch_axes,omitempty"`
	// Values feeds inputs a constant in random data (name: value).
	Values map[string]float64 `yaml:"values,omitempty" json:"values,omitempty"`
	// Ranges bounds an input's random values (name: [lo, hi]).
	Ranges      map[string][]float64 `yaml:"ranges,omitempty" json:"ranges,omitempty"`
	INT8        bool                 `yaml:"int8" json:"int8"`
	Image       Image                `yaml:"image" json:"image"`
	Calibration Calibration          `yaml:"calibration" json:"calibration"`
	Prune       Prune                `yaml:"prune" json:"prune"`
	Quantize    Quantize             `yaml:"quantize" json:"quantize"`
	Eval        Eval                 `yaml:"eval" json:"eval"`
	Runtime     Runtime              `yaml:"runtime" json:"runtime"`
	Latency     Latency              `yaml:"latency" json:"latency"`
	// (here, in the files: each target's own section, tensorrt and triton,
	// of its own type: SectionOf, sections.go)
	Gates Gates `yaml:"gates" json:"gates"`

	sections map[string]any // the owned sections by name (sections.go)
	src      *source        // where Load read the paths from (paths.go)
}

// Gates are the budgets `optc diff` enforces between two builds (zero: not
// checked); flags of optc diff override them.
type Gates struct {
	MaxAccuracyDrop      float64 `yaml:"max_accuracy_drop" json:"max_accuracy_drop"`           // points, old minus new
	MinCosine            float64 `yaml:"min_cosine" json:"min_cosine"`                         // every new artifact against its input
	MaxLatencyRegression float64 `yaml:"max_latency_regression" json:"max_latency_regression"` // percent, new over old
	Percentile           string  `yaml:"percentile" json:"percentile"`                         // p50, p90 or p99 for the latency gate
	MinSpeedup           float64 `yaml:"min_speedup" json:"min_speedup"`                       // new artifact over new input model
	MaxSize              int64   `yaml:"max_size" json:"max_size"`                             // bytes of every new model artifact
}

// Image is how image files in a data folder become input tensors.
type Image struct {
	Resize int       `yaml:"resize" json:"resize"` // shorter side before the center crop; 0: straight to the crop size
	Size   []int     `yaml:"size" json:"size"`     // crop [height, width]; empty: the model input's dims
	Layout string    `yaml:"layout" json:"layout"` // NCHW or NHWC
	Color  string    `yaml:"color" json:"color"`   // rgb, bgr or gray
	Scale  float64   `yaml:"scale" json:"scale"`   // pixel (0-255) times this; 0: 1/255
	Mean   []float64 `yaml:"mean" json:"mean"`
	Std    []float64 `yaml:"std" json:"std"`
}

// Calibration is the data and method INT8 ranges come from.
type Calibration struct {
	Data          string  `yaml:"data" json:"data"`
	Samples       int     `yaml:"samples" json:"samples"` // 0: all
	Batch         int     `yaml:"batch" json:"batch"`
	Seed          int64   `yaml:"seed" json:"seed"`
	Method        string  `yaml:"method" json:"method"` // one of calibrate's methods
	Percentile    float64 `yaml:"percentile" json:"percentile"`
	MovingAverage float64 `yaml:"moving_average" json:"moving_average"`
	Cache         string  `yaml:"cache" json:"cache"` // reused when it matches the model
}

// Prune is pruning after the passes, before quantization
// (docs/prune.md): the pruned model is what every artifact grows from.
type Prune struct {
	Methods []string `yaml:"methods" json:"methods"` // magnitude:S, 2:4, channels:R or channels:auto, applied in order
	// Reconstruct makes pruning data-driven on calibration.data (channels:
	// least-squares reconstruction; 2:4 and magnitude: OBS updates).
	// Without calibration data the build prunes by magnitude and says so.
	Reconstruct bool     `yaml:"reconstruct" json:"reconstruct"`
	Exclude     []string `yaml:"exclude" json:"exclude"` // nodes (or weights) left alone
	// MaxAccuracyDrop spares the most sensitive layers until pruning
	// costs at most this many points on the eval data (needs eval.labels).
	MaxAccuracyDrop float64 `yaml:"max_accuracy_drop" json:"max_accuracy_drop"`
	// MinCosine is the lowest cosine to the unpruned model allowed on
	// every output: with max_accuracy_drop, the budget channels:auto keeps.
	MinCosine float64 `yaml:"min_cosine" json:"min_cosine"`
	// Scope is layer (each layer to the ratio) or global: magnitude:S with
	// one threshold; data-driven channels:R allocated across the channel
	// groups by what each costs (docs/prune.md).
	Scope string `yaml:"scope" json:"scope"`
}

// Quantize is the INT8 scheme.
type Quantize struct {
	ReduceRange     string   `yaml:"reduce_range" json:"reduce_range"` // auto, on or off
	Format          string   `yaml:"format" json:"format"`             // qdq or qoperator (ort only)
	PerChannel      bool     `yaml:"per_channel" json:"per_channel"`
	Exclude         []string `yaml:"exclude" json:"exclude"` // regular expressions on node names and op types
	KeepFirstLast   bool     `yaml:"keep_first_last" json:"keep_first_last"`
	MaxAccuracyDrop float64  `yaml:"max_accuracy_drop" json:"max_accuracy_drop"` // points; needs eval labels (0: the guard's 1)
	MinCosine       float64  `yaml:"min_cosine" json:"min_cosine"`               // the worst sample's, every output (0: the guard's 0.99)
	// MaxRelError is the largest relative error allowed on every output
	// (0: the guard's 0.2; see ptq.GuardMaxRelError).
	MaxRelError float64 `yaml:"max_rel_error,omitempty" json:"max_rel_error,omitempty"`
	// NoGuard turns the accuracy guard off: its figures are reported,
	// nothing is refused for them.
	NoGuard bool `yaml:"no_guard,omitempty" json:"no_guard,omitempty"`
	// MaxPerplexityIncrease is the language-model guard (eval.task lm):
	// the most a weight-only artifact's held-out perplexity may exceed
	// the float model's, in percent (0: DefaultMaxPerplexityIncrease).
	MaxPerplexityIncrease float64 `yaml:"max_perplexity_increase,omitempty" json:"max_perplexity_increase,omitempty"`
	// AllowAccuracyLoss keeps the INT8 artifacts when they miss the
	// accuracy guard (schema.Guard) after the fallback; the ORT artifact is
	// then FP32. Without it such a build fails.
	AllowAccuracyLoss bool `yaml:"allow_accuracy_loss" json:"allow_accuracy_loss"`
	// Placement is where INT8 goes for ort: auto (measured),
	// all-int8, or a placement.json to replay; PlacementBudget bounds auto.
	Placement       string   `yaml:"placement" json:"placement"`
	PlacementBudget Duration `yaml:"placement_budget" json:"placement_budget"`
	// Weights, when set (int4 or int3), makes the ORT (and Triton)
	// artifact weight-only: MatMul/Gemm weights as blockwise low-bit
	// MatMulNBits codes (package weightonly), activations float, instead
	// of INT8 for those targets. BlockSize and WeightRounding (rtn, or
	// gptq from calibration.data) say how.
	Weights        string `yaml:"weights" json:"weights,omitempty"`
	BlockSize      int    `yaml:"block_size" json:"block_size"`
	WeightRounding string `yaml:"weight_rounding" json:"weight_rounding"`
	// Dynamic makes the ORT (and Triton) artifact dynamic INT8 instead of
	// static: MatMul/Gemm weights int8, activations quantized at run time
	// (quantize.ApplyDynamic); no calibration needed.
	Dynamic bool `yaml:"dynamic" json:"dynamic,omitempty"`
	// Techniques are post-training techniques applied around calibration
	// (quantize.Techniques: smoothquant, bias-correction); SmoothAlpha is
	// SmoothQuant's migration strength (0: quantize.DefaultSmoothAlpha).
	Techniques  []string `yaml:"techniques,omitempty" json:"techniques,omitempty"`
	SmoothAlpha float64  `yaml:"smoothquant_alpha,omitempty" json:"smoothquant_alpha,omitempty"`
}

// DefaultMaxPerplexityIncrease is the language-model guard's budget when
// quantize.max_perplexity_increase is 0: a weight-only artifact whose
// held-out perplexity is more than 5% above float's is not deployed.
const DefaultMaxPerplexityIncrease = 5.0

// Eval is the data the artifacts are checked on.
type Eval struct {
	Data string `yaml:"data" json:"data"`
	// Labels is the ground truth of Data, in Task's format (class ids by
	// default, label strings for ctc, boxes for text-detection, masks
	// for segmentation).
	Labels string `yaml:"labels" json:"labels"`
	// Task says what the data measure (task/tasks' list; "" is
	// default). lm: the model is a causal language model and the data
	// token ids [N, T]: every model is scored by held-out perplexity and
	// next-token agreement with the input. ctc, text-detection,
	// segmentation: a task plug-in scores one output against Labels.
	Task string `yaml:"task,omitempty" json:"task,omitempty"`
	// Dict is the character dictionary of task ctc.
	Dict string `yaml:"dict,omitempty" json:"dict,omitempty"`
	// Output names the output a task plug-in scores (default: the one
	// of the shape the task reads).
	Output string `yaml:"output,omitempty" json:"output,omitempty"`
	// Params are the task plug-in's parameters by name (text-detection:
	// thresh, box_thresh, unclip_ratio, max_candidates, min_size).
	Params map[string]string `yaml:"params,omitempty" json:"params,omitempty"`
	// Logits names the LM's logits output (default: the only float
	// output of rank 3).
	Logits  string `yaml:"logits,omitempty" json:"logits,omitempty"`
	Samples int    `yaml:"samples" json:"samples"`
	Batch   int    `yaml:"batch" json:"batch"`
}

// Runtime is how ONNX Runtime runs the artifacts.
type Runtime struct {
	Level   string `yaml:"level" json:"level"`     // disable, basic, extended or all
	Threads int    `yaml:"threads" json:"threads"` // intra-op; 0: one per core
	ORTLib  string `yaml:"ort_lib" json:"ort_lib,omitempty"`
	// NCHWc shapes the ORT artifact's FP32 model for ORT's blocked CPU
	// layout (passes.ORTCPULayout) and deploys it when it is measured
	// faster: auto (this CPU's channel block), a block (8, 16), on (this
	// CPU's block, deployed without timing: a recorded decision replayed),
	// or off.
	NCHWc string `yaml:"nchwc" json:"nchwc"`
}

// Latency is how the artifacts are timed.
type Latency struct {
	Batches  []int    `yaml:"batches" json:"batches"`
	Duration Duration `yaml:"duration" json:"duration"` // per batch size
	// Threads are the intra-op thread counts the deployment sweep tries
	// (empty: 1 and all cores).
	Threads []int `yaml:"threads" json:"threads"`
	// P99BudgetMs bounds the high-throughput profile's p99 (0: no bound).
	P99BudgetMs float64 `yaml:"p99_budget_ms" json:"p99_budget_ms"`
	// Repeats splits the timing into this many short runs, so that optc
	// diff can tell a regression from noise.
	Repeats int `yaml:"repeats" json:"repeats"`
	// SeqLengths times a language model (eval.task lm) at batch 1 at
	// each of these sequence lengths too: latency per sequence.
	SeqLengths []int `yaml:"seq_lengths,omitempty" json:"seq_lengths,omitempty"`
}

// Duration is a time.Duration written as "2s" or "500ms".
type Duration struct{ time.Duration }

// UnmarshalYAML reads "2s"-style durations.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (want e.g. 2s or 500ms)", n.Line, s)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as "2s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as "2s", as in the YAML file.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "2s"-style durations.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (want e.g. 2s or 500ms)", s)
	}
	d.Duration = v
	return nil
}

// Default is the configuration without a file or flags: config's own
// keys here, each owned section's from its owner (Owner.Defaults).
func Default() Config {
	c := Config{
		Targets:  []string{"ort"},
		OptLevel: 2,
		Budget:   Duration{5 * time.Minute},
		Eval:     Eval{Batch: 8},
		Latency:  Latency{Batches: []int{1, 8}, Duration: Duration{time.Second}, Repeats: 5},
	}
	for _, o := range owners {
		if o.Defaults != nil {
			o.Defaults(&c)
		}
		if o.New != nil {
			if c.sections == nil {
				c.sections = map[string]any{}
			}
			c.sections[o.Section] = o.New()
		}
	}
	return c
}

// Load reads a config file over the defaults: keys it does not set keep
// their default.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := Decode(bytes.NewReader(b), &c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	c.resolvePaths(path, b)
	return c, nil
}

// Decode reads YAML into c strictly: unknown keys and wrong types are
// errors with their line numbers.
func Decode(r io.Reader, c *Config) error {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	w := c.wire()
	err := dec.Decode(w.Interface())
	if errors.Is(err, io.EOF) {
		return nil // an empty file is the defaults
	}
	if err != nil {
		return errors.New(tidy(wireNames(err.Error(), w.Elem().Type())))
	}
	c.unwire(w)
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document; a config is one")
	}
	return nil
}

// typeNames maps the Go type names in the decoder's messages to the keys
// users write.
var typeNames = strings.NewReplacer(
	"in type config.Config", "at the top level",
	"in type config.Image", "in image",
	"in type config.Calibration", "in calibration",
	"in type config.Quantize", "in quantize",
	"in type config.Prune", "in prune",
	"in type config.Eval", "in eval",
	"in type config.Runtime", "in runtime",
	"in type config.Latency", "in latency",
	"in type config.Gates", "in gates",
	"field ", "unknown key ",
	" not found", "",
	"yaml: unmarshal errors:", "",
)

var goTypeInMessage = regexp.MustCompile(`into (\[\])?(map\[string\])?(\[\])?(config\.)?\w+`)

// tidy turns the decoder's multi-line message into one line in the
// config's own words.
func tidy(msg string) string {
	msg = typeNames.Replace(msg)
	msg = goTypeInMessage.ReplaceAllStringFunc(msg, func(s string) string {
		switch {
		case strings.Contains(s, "map["):
			return "into a mapping"
		case strings.HasPrefix(s, "into []"):
			return "into a list"
		case strings.Contains(s, "int"):
			return "into a whole number"
		case strings.Contains(s, "float"):
			return "into a number"
		case strings.Contains(s, "bool"):
			return "into true or false"
		case strings.Contains(s, "string"):
			return "into a string"
		}
		return "into a mapping"
	})
	return strings.Join(strings.Fields(msg), " ")
}

// MarshalJSON writes c with its owned sections in their place.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire().Interface()) }

// UnmarshalJSON reads c with its owned sections (manifest.json's
// options).
func (c *Config) UnmarshalJSON(b []byte) error {
	w := c.wire()
	if err := json.Unmarshal(b, w.Interface()); err != nil {
		return err
	}
	c.unwire(w)
	return nil
}

// Marshal writes c as YAML, the form --print-config shows.
func Marshal(c Config) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c.wire().Interface()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Targets are the targets every build knows, in build order; "all" in
// the targets key (or --target all) means all of them. The target
// registry (export/target.Register, called by export/targets) fills it:
// config cannot import the targets, which read their sections from it.
var Targets []string

// TargetChoices is what the targets key takes: Targets and "all".
func TargetChoices() []string { return append(slices.Clone(Targets), "all") }

// GatePercentiles are the latency percentiles the latency gate compares.
var GatePercentiles = []string{"p50", "p90", "p99"}

// OptLevels are the optimization pass levels (-O).
var OptLevels = []string{"0", "1", "2"}

// ExpandTargets resolves "all" and checks the names; the result is in
// build order and has no duplicates.
func (c Config) ExpandTargets() ([]string, error) {
	want := map[string]bool{}
	for _, t := range c.Targets {
		for _, name := range strings.Split(t, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "all":
				for _, a := range Targets {
					want[a] = true
				}
			case slices.Contains(Targets, name):
				want[name] = true
			default:
				return nil, fmt.Errorf("targets: unknown target %q (want %s)", name, choice.Or(TargetChoices()))
			}
		}
	}
	var out []string
	for _, a := range Targets {
		if want[a] {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("targets: none given (want %s)", choice.Or(TargetChoices()))
	}
	return out, nil
}

// Problems are what Validate found, one message per problem, each
// starting with (or naming) the key at fault.
type Problems []string

func (p Problems) Error() string { return strings.Join(p, "; ") }

// Validate checks values the types cannot: names, ranges, combinations.
// Messages name the key; the error is Problems. config checks its own
// keys (the top level, eval's data, latency, gates); each owned section's
// owner checks its keys (Owner.Rules), then the rules that join sections
// run (config's and the owners' Joins).
func (c Config) Validate() error {
	var errs Problems
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if _, err := c.ExpandTargets(); err != nil {
		bad("%v", err)
	}
	for name, r := range c.Ranges {
		if len(r) != 2 || !(r[0] < r[1]) {
			bad("ranges.%s: %v (want [lo, hi] with lo < hi)", name, r)
		}
	}
	for name, k := range c.BatchAxes {
		if k < -1 {
			bad("batch_axes.%s: %d (want an axis, or -1 for none)", name, k)
		}
	}
	if !slices.Contains(OptLevels, strconv.Itoa(c.OptLevel)) {
		bad("opt_level: %d (want %s)", c.OptLevel, choice.Or(OptLevels))
	}
	if c.Budget.Duration < 0 {
		bad("budget: %v (want a positive duration, or 0 for none)", c.Budget)
	}
	errs = append(errs, unowned()...)
	c.Eval.validate(bad)
	c.Latency.validate(bad)
	for _, o := range owners {
		if o.Rules != nil {
			errs = append(errs, o.Rules(c)...)
		}
	}
	c.crossSections(bad)
	for _, o := range owners {
		if o.Joins != nil {
			errs = append(errs, o.Joins(c)...)
		}
	}
	if err := c.Gates.Validate(); err != nil {
		bad("%v", err)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// ValidateQuantization checks the calibration and quantize sections as
// Validate does: optc quantize fills them from its flags, so that a rule
// exists once.
func (c Config) ValidateQuantization() error {
	return c.ValidateSections(false, "calibration", "quantize")
}

// ValidateSections checks the named sections as Validate does, with the
// rules their owners join with other sections when joins is set: a
// command that takes a section's keys as flags (optc quantize:
// calibration and quantize; optc optimize: prune) fills the same structs,
// so that a rule exists once.
func (c Config) ValidateSections(joins bool, sections ...string) error {
	errs := unowned()
	for _, o := range owners {
		if !slices.Contains(sections, o.Section) {
			continue
		}
		if o.Rules != nil {
			errs = append(errs, o.Rules(c)...)
		}
		if joins && o.Joins != nil {
			errs = append(errs, o.Joins(c)...)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// problem is how a section's validate reports one (Validate's bad).
type problem func(format string, args ...any)

// validate checks eval's own keys; its task keys are task/tasks'.
func (e Eval) validate(bad problem) {
	if e.Batch < 1 {
		bad("eval.batch: %d (want at least 1)", e.Batch)
	}
	if e.Samples < 0 {
		bad("eval.samples: %d must not be negative", e.Samples)
	}
	if e.Labels != "" && e.Data == "" {
		bad("eval.labels needs eval.data")
	}
}

func (l Latency) validate(bad problem) {
	for _, n := range l.SeqLengths {
		if n < 1 {
			bad("latency.seq_lengths: %d (want lengths of at least 1)", n)
		}
	}
	if len(l.Batches) == 0 {
		bad("latency.batches: give at least one batch size")
	}
	for _, b := range l.Batches {
		if b < 1 {
			bad("latency.batches: %d (want sizes of at least 1)", b)
		}
	}
	for _, t := range l.Threads {
		if t < 1 {
			bad("latency.threads: %d (want at least 1)", t)
		}
	}
	if l.Duration.Duration <= 0 {
		bad("latency.duration: %v (want a positive duration)", l.Duration)
	}
	if l.P99BudgetMs < 0 {
		bad("latency.p99_budget_ms must not be negative")
	}
	if l.Repeats < 1 {
		bad("latency.repeats: %d (want at least 1)", l.Repeats)
	}
}

// crossSections checks the rules that join config's own keys with a
// section's.
func (c Config) crossSections(bad problem) {
	if c.INT8 && c.Calibration.Data == "" && c.Calibration.Cache == "" {
		bad("int8 needs calibration.data (--calib-data) or an existing calibration.cache")
	}
}

// Validate checks the gates' ranges; optc diff calls it on its flags too.
func (g Gates) Validate() error {
	switch {
	case g.MaxAccuracyDrop < 0:
		return fmt.Errorf("gates.max_accuracy_drop: %g must not be negative", g.MaxAccuracyDrop)
	case g.MinCosine < 0 || g.MinCosine > 1:
		return fmt.Errorf("gates.min_cosine: %g (want 0 to 1)", g.MinCosine)
	case g.MaxLatencyRegression < 0:
		return fmt.Errorf("gates.max_latency_regression: %g must not be negative", g.MaxLatencyRegression)
	case g.Percentile != "" && !slices.Contains(GatePercentiles, g.Percentile):
		return fmt.Errorf("gates.percentile: %q (want %s)", g.Percentile, choice.Or(GatePercentiles))
	case g.MinSpeedup < 0:
		return fmt.Errorf("gates.min_speedup: %g must not be negative", g.MinSpeedup)
	case g.MaxSize < 0:
		return fmt.Errorf("gates.max_size: %d must not be negative", g.MaxSize)
	}
	return nil
}
