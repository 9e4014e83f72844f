// Package target is the registry of optc build's deployment targets. A
// target is a plug-in, like a database/sql driver: one package under
// export/ implements Target, and export/targets registers it in one line.
// config (the names the targets key takes), build (what runs in the export
// stage and which quantization it needs), optc lint and the CLI's help and
// completion all read this registry; none of them names a target.
package target

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/lint"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/spf13/pflag"
)

// Target is one deployment target of optc build.
type Target interface {
	// Name is the target's word in the targets key and --target.
	Name() string
	// Doc is one line for help: what the target deploys to.
	Doc() string
	// Section is the config key holding the target's options ("" when it
	// has none); docs/config.md documents it.
	Section() string
	// Scheme is the quantization the target deploys with --int8
	// (quantize.Schemes), "" when it takes no INT8 model. The quantize
	// stage runs once per scheme the wanted targets need.
	Scheme() quantize.Target
	// Artifacts are the files the target writes, relative to the output
	// folder (for help and docs; the manifest lists what was written).
	Artifacts() []string
	// Export writes the target's artifacts into the build's working
	// folder through h. It returns the target's section of report.json
	// (nil when it has none).
	Export(h Host) (any, error)
}

// Quantizer is a target that owns a quantization scheme's INT8 model (its
// Scheme): the quantize stage writes the model where the target says, and
// says what the target deploys when the accuracy guard refuses it.
type Quantizer interface {
	// QuantizedModel is the INT8 model's path relative to the output
	// folder.
	QuantizedModel() string
	// WithoutINT8 is what the target deploys instead of a refused INT8
	// model, for the build's note.
	WithoutINT8() string
}

// QuantizedModel is where scheme's INT8 model goes: the path the target
// owning the scheme names ("" when no registered target owns it).
func QuantizedModel(scheme quantize.Target) (path, without string) {
	for _, t := range registry {
		if q, ok := t.(Quantizer); ok && t.Scheme() == scheme {
			return q.QuantizedModel(), q.WithoutINT8()
		}
	}
	return "", ""
}

// Costed is a target that adds to what the build runs beyond the models
// every build has (the input, model.fp32.onnx and the ort scheme's INT8
// model), so that the budget's plan counts it without naming it.
type Costed interface {
	Cost(c config.Config) Cost
}

// Cost is what one target adds to a build's runs.
type Cost struct {
	// Timed are the models verify times for the target (ort: the .ort
	// twin of the deployed model).
	Timed int
	// Checked are the models verify checks but does not time (tensorrt:
	// the Q/DQ and float16 models).
	Checked int
	// SweepPoints are the timing points its export sweeps (triton, unless
	// the config pins its profile); a replayed build sweeps none.
	SweepPoints int
}

// Validator is a target with rules on its config section that the types
// cannot say (config.Config.Validate runs them, for a build of any
// target, as it checks every key).
type Validator interface {
	// Validate returns one message per problem, naming the key.
	Validate(c config.Config) []string
}

// Sectioned is a target with a config section of its own (keyed by its
// name), of a type its package declares: NewSection is a pointer to a new
// one holding the section's defaults. config decodes and writes it in its
// place; the target reads it with config.SectionOf.
type Sectioned interface {
	NewSection() any
}

// Flagged is a target with options of its own on optc build's command
// line.
type Flagged interface {
	// Flags registers the target's flags on fs, bound to its section of
	// c, and returns each flag's config key (a flag the user sets
	// overrides that key of the config file, and names it in errors).
	Flags(fs *pflag.FlagSet, c *config.Config) map[string]string
}

// Summarized is a target whose section of report.json (what Export
// returned) has lines of its own in the build's summary.
type Summarized interface {
	Summary(section any) []string
}

// Linter is a target that can check a model against what its runtime
// accepts (optc lint --target NAME).
type Linter interface {
	Lint(m *graph.Model) []lint.Finding
}

// Host is what a build offers a target: its configuration, its working
// folder and the models the earlier stages made.
type Host interface {
	Context() context.Context
	Config() config.Config
	// Path is where rel (slash-separated, relative to the output folder)
	// is in the working folder; its parent folder exists.
	Path(rel string) (string, error)
	// Rel is path relative to the working folder, with forward slashes.
	Rel(path string) string
	// Add records an artifact the target wrote: kind (model, ort-model,
	// model-copy, calibration, script, config, settings, lint, engine),
	// precision of a model (fp32, fp16, int8) and the model it was made
	// from ("" for none).
	Add(rel, kind, precision, from string)
	// Note adds a line to the build's notes (once).
	Note(s string)
	// Progress prints a line for a long step.
	Progress(format string, args ...any)
	// Float is the optimized float model every artifact grows from.
	Float() string
	// Deployed is the model the ORT-based targets deploy: the INT8
	// ort model, or Float when INT8 does not pay or was not asked for.
	Deployed() string
	// DeployedPrecision is Deployed's precision in the manifest (fp32,
	// int8).
	DeployedPrecision() string
	// SweepDuration is how long a target times each point of a sweep (the
	// build's timing budget).
	SweepDuration() time.Duration
	// SweepBudget bounds a whole sweep, warm-ups and sessions included
	// (0: no bound): the plan's share.
	SweepBudget() time.Duration
	// Quantized is the model quantized for scheme ("" when there is none).
	Quantized(scheme quantize.Target) string
	// CalibrationFile is optc's calibration file ("" without --int8).
	CalibrationFile() string
	// LatencyBatches are the batch sizes every artifact is timed at.
	LatencyBatches() []int
	// Session is how every artifact is run and measured.
	Session() ort.Options
	// RangeData is the data that shows the deployment's value range (the
	// calibration data, else the eval data; "" when there is neither),
	// read as the build reads it.
	RangeData() (string, data.Options)
	// Record keeps what the target chose by timing (a sweep's profiles)
	// in the build's decisions.json, as JSON, so that a later build can
	// replay it.
	Record(decision any)
	// Replayed is the decision the target recorded in the build this one
	// replays (build --replay), and the decisions.json it comes from; nil
	// when this build decides for itself, an error when the record holds
	// no decision of this target. A target given one times nothing and
	// writes what that build wrote.
	Replayed() (decision json.RawMessage, from string, err error)
}

var registry []Target

// Register adds targets in build order; a name registered twice panics
// (a programming error, caught by any test).
func Register(ts ...Target) {
	for _, t := range ts {
		if Lookup(t.Name()) != nil || t.Name() == "all" {
			panic(fmt.Sprintf("target: %q registered twice", t.Name()))
		}
		registry = append(registry, t)
		config.Targets = append(config.Targets, t.Name())
		owner := config.Owner{Name: t.Name(), Section: t.Name()}
		if v, ok := t.(Validator); ok {
			owner.Rules = v.Validate
		}
		if s, ok := t.(Sectioned); ok {
			owner.New = s.NewSection
		}
		if owner.Rules != nil || owner.New != nil {
			config.Register(owner)
		}
	}
}

// All are the registered targets in build order.
func All() []Target { return slices.Clone(registry) }

// Lookup is the target named name, nil when there is none.
func Lookup(name string) Target {
	for _, t := range registry {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

// Linters are the names of the targets optc lint can check for.
func Linters() []string {
	var names []string
	for _, t := range registry {
		if _, ok := t.(Linter); ok {
			names = append(names, t.Name())
		}
	}
	return names
}

// WriteJSON writes v as indented JSON to rel in h's working folder.
func WriteJSON(h Host, rel string, v any) error {
	p, err := h.Path(rel)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p, append(js, '\n'))
}
