package build

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/target"
	_ "github.com/optc-dev/optc/export/targets" // every target, registered
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
)

// export runs each wanted target of the registry, in build order; a
// target writes into the working folder through a host.
func (b *builder) export() error {
	for _, t := range target.All() {
		if !b.wants(t.Name()) {
			continue
		}
		res, err := t.Export(&host{b, t.Name()})
		if err != nil {
			return fmt.Errorf("%s target: %w", t.Name(), err)
		}
		if res != nil {
			if b.res.TargetReports == nil {
				b.res.TargetReports = map[string]any{}
			}
			b.res.TargetReports[t.Name()] = res
		}
	}
	return nil
}

// needs reports whether a wanted target deploys the quantization scheme.
func (b *builder) needs(scheme quantize.Target) bool {
	for _, name := range b.targets {
		if t := target.Lookup(name); t != nil && t.Scheme() == scheme {
			return true
		}
	}
	return false
}

// host is the builder as one target sees it (target.Host): artifacts it
// adds are recorded under its name.
type host struct {
	b    *builder
	name string
}

func (h *host) Context() context.Context            { return h.b.ctx }
func (h *host) Config() config.Config               { return h.b.c }
func (h *host) Path(rel string) (string, error)     { return h.b.dir.path(rel) }
func (h *host) Rel(path string) string              { return rel(h.b, path) }
func (h *host) Note(s string)                       { h.b.note(s) }
func (h *host) Progress(format string, args ...any) { h.b.progress(format, args...) }
func (h *host) Float() string                       { return h.b.float }
func (h *host) Deployed() string                    { return h.b.ortModel }
func (h *host) CalibrationFile() string             { return h.b.calibFile }
func (h *host) LatencyBatches() []int               { return h.b.latencyBatches }
func (h *host) Session() ort.Options                { return h.b.session() }
func (h *host) Quantized(s quantize.Target) string  { return h.b.quantized[s] }
func (h *host) SweepDuration() time.Duration        { return h.b.sweepDuration() }
func (h *host) SweepBudget() time.Duration          { return h.b.sweepBudget() }

// DeployedPrecision is what the manifest says of the deployed model.
func (h *host) DeployedPrecision() string {
	if h.b.ortModel != h.b.float {
		return h.b.ortPrecision
	}
	return "fp32"
}

func (h *host) Add(rel, kind, precision, from string) {
	h.b.add(rel, h.name, kind, precision, from)
}
func (h *host) RangeData() (string, data.Options) { return h.b.fp16Data() }
func (h *host) Record(decision any)               { h.b.recordTarget(h.name, decision) }
func (h *host) Replayed() (json.RawMessage, string, error) {
	return h.b.replayedTarget(h.name)
}

// rel is path relative to the working folder, with forward slashes.
func rel(b *builder, path string) string {
	r, err := filepath.Rel(b.dir.tmp, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// writeJSONFile writes v as indented JSON into the working folder.
func writeJSONFile(b *builder, rel string, v any) error {
	return target.WriteJSON(&host{b: b}, rel, v)
}

// fp16Data is the data that shows the deployment's value range: what the
// float16 variant's ranges are measured on and what it is checked on
// besides the eval data: the calibration data (the samples calibration
// draws), else the eval data; "" when there is neither.
func (b *builder) fp16Data() (string, data.Options) {
	c := b.c
	switch {
	case c.Calibration.Data != "":
		o := b.dataOptions(c.Calibration.Data, c.Calibration.Batch, c.Calibration.Samples)
		o.Shuffle = c.Calibration.Samples > 0
		if b.calibStoppedAt > 0 {
			// The samples the budget let INT8 calibration read (the
			// same first ones of the same order): as bounded.
			o.Samples = b.calibStoppedAt
		}
		return c.Calibration.Data, o
	case c.Eval.Data != "":
		return c.Eval.Data, b.dataOptions(c.Eval.Data, c.Eval.Batch, c.Eval.Samples)
	}
	return "", data.Options{}
}
