package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// decisionsFile is the record of a build's measured choices, in its
// folder.
const decisionsFile = "decisions.json"

// DecisionsSchema is the decisions.json format written and read.
const DecisionsSchema = 1

// Decisions is decisions.json: every choice a build made by timing (and
// what else of the machine its artifacts depend on), with what it was
// measured on, so that a later build (replay: in the config, --replay)
// applies the same choices without timing anything and writes the same
// artifacts. A decision the build did not time (a placement given as
// all-int8, a pinned Triton profile, a stage with nothing to change) is
// recorded too: a replay needs the whole answer.
type Decisions struct {
	Schema int `json:"schema"`
	// MeasuredOn is the machine the choices were timed on; Level and
	// Threads the ORT session they were timed in.
	MeasuredOn bench.Environment `json:"measured_on"`
	Level      string            `json:"ort_level"`
	Threads    int               `json:"threads"`
	// Model is the optimized float model (model.fp32.onnx) the choices
	// were made for: a replay refuses a build whose model differs.
	Model FileDigest `json:"model"`
	// Placement is where INT8 goes for ort (placement.json, beside
	// this file; nil without an INT8 ort model).
	Placement *PlacementDecision `json:"placement,omitempty"`
	// NCHWc is the nchwc stage's choice (nil without an ORT or Triton
	// target).
	NCHWc *NCHWcDecision `json:"nchwc,omitempty"`
	// QuantizeStops are, by quantization scheme (ort, tensorrt), where
	// the budget ended its bounded loops (calibration's samples, the
	// guard's tries, GPTQ, the fallback): a replay ends them at the same
	// counts instead of timing them. A scheme that stopped nowhere is
	// absent.
	QuantizeStops map[string]ptq.Stops `json:"quantize_stops,omitempty"`
	// CheckStops are, by artifact (its path; a float16 artifact's check
	// on the calibration data with " (calibration data)"), the samples
	// its check had compared when the budget's time for checks ran out:
	// a replay checks on the same samples. A check that ran to the data's
	// end is absent.
	CheckStops map[string]int64 `json:"check_stops,omitempty"`
	// Targets are the targets' own choices by target name (triton: the
	// sweep's profiles and how the configs serve them), each as the
	// target recorded it (target.Host.Record).
	Targets map[string]json.RawMessage `json:"targets,omitempty"`
}

// PlacementDecision refers to the placement.json that holds the decision
// (the placement package's own record), with its digest.
type PlacementDecision struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Mode is how it was decided (auto: timed; all-int8: not), and
	// Recommended and Chosen what (schema.Placement).
	Mode        string `json:"mode"`
	Recommended string `json:"recommended"`
	Chosen      string `json:"chosen"`
}

// NCHWcDecision is the nchwc stage's choice: whether the ORT and Triton
// artifacts are model.fp32.nchwc.onnx, shaped at which block.
type NCHWcDecision struct {
	// Block is the channel block the FP32 model was shaped for; 0 when
	// it was not shaped (Reason says why: runtime.nchwc off, a level
	// below all, a CPU without the layout).
	Block   int  `json:"block"`
	Convs   int  `json:"convs_padded"`
	Bridges int  `json:"hardsigmoid_bridges"`
	Timed   bool `json:"timed"`
	// Deployed says the shaped model replaced the deployed one; SHA256
	// is then its digest, which a replay must reproduce.
	Deployed bool   `json:"deployed"`
	SHA256   string `json:"sha256,omitempty"`
	Reason   string `json:"reason"`
}

// replay is the record a build replays, and what it took from it.
type replay struct {
	path string // the decisions.json
	rec  *Decisions
	used []string // the decisions applied, in build order
}

// readReplay reads the decisions.json at spec (the file, or a build
// folder holding it) and checks the files it refers to.
func readReplay(spec string) (*replay, error) {
	path := spec
	if st, err := os.Stat(spec); err == nil && st.IsDir() {
		path = filepath.Join(spec, decisionsFile)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && path != spec {
		return nil, fmt.Errorf("replay: %s has no %s (a build by an optc that did not record its decisions?); build without replay to measure them", spec, decisionsFile)
	}
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rec Decisions
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	if rec.Schema != DecisionsSchema {
		return nil, fmt.Errorf("replay %s: schema %d, this optc reads %d", path, rec.Schema, DecisionsSchema)
	}
	if rec.Model.SHA256 == "" {
		return nil, fmt.Errorf("replay %s: no model digest", path)
	}
	r := &replay{path: path, rec: &rec}
	if p := rec.Placement; p != nil {
		d, err := digest(r.placementFile())
		if err != nil {
			return nil, fmt.Errorf("replay %s: its placement: %w", path, err)
		}
		if d.SHA256 != p.SHA256 {
			return nil, fmt.Errorf("replay %s: %s has sha256 %.12s..., the record %.12s...: it changed after the build", path, r.placementFile(), d.SHA256, p.SHA256)
		}
	}
	return r, nil
}

// placementFile is the placement.json the record refers to.
func (r *replay) placementFile() string {
	return filepath.Join(filepath.Dir(r.path), filepath.FromSlash(r.rec.Placement.File))
}

// missing is the error for a decision this build needs and the record
// lacks: the build it records did not make it.
func (r *replay) missing(what, why string) error {
	return fmt.Errorf("replaying %s: it records no %s decision (the build it records %s); replay a build with the same targets and options, or build without replay", r.path, what, why)
}

// recordModel refuses a record made for another optimized float model,
// and otherwise records this build's.
func (b *builder) recordModel() error {
	d, err := digest(b.float)
	if err != nil {
		return err
	}
	d.Path = rel(b, b.float)
	b.decisions.Model = d
	if r := b.replay; r != nil && r.rec.Model.SHA256 != d.SHA256 {
		return fmt.Errorf("replaying %s: it was recorded for a %s with sha256 %.12s..., this build's is %.12s...: another input model, -O level, pruning or optc; build without replay to measure again",
			r.path, r.rec.Model.Path, r.rec.Model.SHA256, d.SHA256)
	}
	return nil
}

// replayedPlacement is the placement.json the ort quantization
// replays.
func (b *builder) replayedPlacement() (string, error) {
	r := b.replay
	if r.rec.Placement == nil {
		return "", r.missing("placement", "had no INT8 ort model in QDQ format")
	}
	r.used = append(r.used, "placement")
	return r.placementFile(), nil
}

// recordPlacement records the placement.json written at path, and
// refuses a replay that did not write the file it replays.
func (b *builder) recordPlacement(path string, p *schema.Placement) error {
	fd, err := digest(path)
	if err != nil {
		return err
	}
	d := &PlacementDecision{File: rel(b, path), SHA256: fd.SHA256, Mode: p.Mode, Recommended: p.Recommended, Chosen: p.Chosen}
	b.decisions.Placement = d
	if r := b.replay; r != nil && r.rec.Placement.SHA256 != d.SHA256 {
		return fmt.Errorf("replaying %s: this build's placement.json differs from %s (sha256 %.12s..., recorded %.12s...)", r.path, r.placementFile(), d.SHA256, r.rec.Placement.SHA256)
	}
	return nil
}

// replayedStops sets o to end the budget's loops where the replayed
// build's quantization for scheme ended them.
func (b *builder) replayedStops(scheme quantize.Target, o *ptq.Options) {
	r := b.replay
	if r == nil {
		return
	}
	o.Replaying, o.ReplayStops = true, r.rec.QuantizeStops[string(scheme)]
	if len(o.ReplayStops) > 0 {
		r.used = append(r.used, string(scheme)+" quantization's budget stops")
	}
}

// recordStops records where the budget ended scheme's quantization.
func (b *builder) recordStops(scheme quantize.Target, stops ptq.Stops) {
	if len(stops) == 0 {
		return
	}
	if n, ok := stops[ptq.CalibrationLoop]; ok && b.calibStoppedAt == 0 {
		b.calibStoppedAt = n
		b.note(fmt.Sprintf("calibration stopped at its share of the budget after %d samples (the first of the calibration data's order): the INT8 ranges, bias correction, GPTQ and the float16 ranges come from them; decisions.json records the count for --replay", n))
	}
	if b.decisions.QuantizeStops == nil {
		b.decisions.QuantizeStops = map[string]ptq.Stops{}
	}
	b.decisions.QuantizeStops[string(scheme)] = stops
}

// Record keeps a target's decision (target.Host.Record).
func (b *builder) recordTarget(name string, decision any) {
	raw, err := json.Marshal(decision)
	if err != nil {
		b.recordErr = errors.Join(b.recordErr, fmt.Errorf("recording the %s target's decision: %w", name, err))
		return
	}
	if b.decisions.Targets == nil {
		b.decisions.Targets = map[string]json.RawMessage{}
	}
	b.decisions.Targets[name] = raw
}

// replayedTarget is a target's recorded decision (target.Host.Replayed).
func (b *builder) replayedTarget(name string) (json.RawMessage, string, error) {
	r := b.replay
	if r == nil {
		return nil, "", nil
	}
	raw := r.rec.Targets[name]
	if raw == nil {
		return nil, "", r.missing(name, "had no "+name+" target")
	}
	r.used = append(r.used, name)
	return raw, r.path, nil
}

// writeDecisions writes decisions.json: what this build chose by timing,
// or, replaying, what it applied (with the machine it was measured on),
// which is then the replayed record itself.
func (b *builder) writeDecisions() error {
	if b.recordErr != nil {
		return b.recordErr
	}
	d := b.decisions
	d.Schema = DecisionsSchema
	if r := b.replay; r != nil {
		d.MeasuredOn, d.Level, d.Threads = r.rec.MeasuredOn, r.rec.Level, r.rec.Threads
		b.res.ReplayedFrom = r.path
		if len(r.used) > 0 {
			b.note(fmt.Sprintf("replayed from %s: %s, as that build measured them on %s; none was timed here", r.path, strings.Join(r.used, ", "), r.rec.MeasuredOn.CPU))
		}
	} else {
		d.MeasuredOn, d.Level, d.Threads = bench.MeasuredOn(), b.c.Runtime.Level, b.c.Runtime.Threads
	}
	if err := writeJSONFile(b, decisionsFile, d); err != nil {
		return err
	}
	b.add(decisionsFile, "all", "decisions", "", "")
	return nil
}

// decided lists the decisions a record holds, for messages.
func (d *Decisions) decided() []string {
	var out []string
	if d.Placement != nil {
		out = append(out, "placement")
	}
	if d.NCHWc != nil {
		out = append(out, "nchwc")
	}
	return append(out, slices.Sorted(maps.Keys(d.Targets))...)
}
