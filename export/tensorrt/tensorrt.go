// Package tensorrt is the TensorRT target of optc build: the Q/DQ INT8
// model (made by the quantize stage with the tensorrt scheme), a float16
// variant, TensorRT's legacy calibration cache, build_engine*.sh scripts,
// the Q/DQ model linted against TensorRT's rules (trtlint) and, where
// trtexec is on PATH, the engine built and timed.
package tensorrt

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/export/tensorrt/trtlint"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/lint"
	"github.com/optc-dev/optc/quantize"
	"github.com/spf13/pflag"
)

// Target is the tensorrt target.
type Target struct{}

func (Target) Name() string { return "tensorrt" }
func (Target) Doc() string {
	return "TensorRT: Q/DQ INT8 and fp16 ONNX, legacy calibration cache, build_engine.sh, lint"
}
func (Target) Section() string         { return "tensorrt" }
func (Target) Scheme() quantize.Target { return quantize.TargetTensorRT }
func (Target) Artifacts() []string {
	return []string{QDQModel, "tensorrt/model.fp16.onnx", "tensorrt/calibration.cache",
		"tensorrt/build_engine.sh", "tensorrt/build_engine_fp16.sh", "tensorrt/build_engine_calib_cache.sh", "tensorrt/lint.json"}
}

// QDQModel is the tensorrt scheme's INT8 model: Q/DQ for TensorRT's
// explicit quantization.
const QDQModel = "tensorrt/model.int8.qdq.onnx"

func (Target) QuantizedModel() string { return QDQModel }
func (Target) WithoutINT8() string    { return "the TensorRT engine script builds the fp16 model" }

// Cost: verify checks the Q/DQ and float16 models, and times neither (ORT
// would run them as an emulation of TensorRT).
func (Target) Cost(config.Config) target.Cost { return target.Cost{Checked: 2} }

// Summary is the build's line on the lint of the Q/DQ model.
func (Target) Summary(section any) []string {
	r, ok := section.(*Result)
	if !ok || r.Lint == nil {
		return nil
	}
	return []string{fmt.Sprintf("tensorrt lint: %d errors, %d warnings (tensorrt/lint.json)", lint.Errors(r.Lint), len(r.Lint)-lint.Errors(r.Lint))}
}

// Section is the tensorrt section of the build config: the engine
// settings.
type Section struct {
	// Version is written into the legacy calibration cache header
	// (TRT-<version>-EntropyCalibration2), e.g. 100300 for 10.3.0.
	Version string `yaml:"version" json:"version"`
	// Profiles are the optimization profile per dynamic input for
	// build_engine.sh (empty: min=opt=max=the measured shape).
	Profiles map[string]ShapeProfile `yaml:"profiles" json:"profiles"`
}

// ShapeProfile is one input's min/opt/max shapes for a TensorRT profile.
type ShapeProfile struct {
	Min []int64 `yaml:"min" json:"min"`
	Opt []int64 `yaml:"opt" json:"opt"`
	Max []int64 `yaml:"max" json:"max"`
}

// NewSection is the section's defaults: the calibration cache's header
// names TensorRT 10.3.0 unless tensorrt.version says otherwise.
func (Target) NewSection() any { return &Section{Version: "100300"} }

// SectionOf is c's tensorrt section.
func SectionOf(c *config.Config) *Section { return config.SectionOf[Section](c, Target{}.Name()) }

// versionPattern is TensorRT's integer version, e.g. 100300 for 10.3.0.
var versionPattern = regexp.MustCompile(`^[0-9]+$`)

// Validate checks the tensorrt section of the config.
func (Target) Validate(c config.Config) []string {
	var bad []string
	t := SectionOf(&c)
	if !versionPattern.MatchString(t.Version) {
		bad = append(bad, fmt.Sprintf("tensorrt.version: %q (want TensorRT's integer version, e.g. 100300 for 10.3.0)", t.Version))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Profiles)) {
		p := t.Profiles[name]
		if len(p.Min) == 0 || len(p.Min) != len(p.Opt) || len(p.Opt) != len(p.Max) {
			bad = append(bad, fmt.Sprintf("tensorrt.profiles.%s: min, opt and max must have the same rank", name))
			continue
		}
		for i := range p.Min {
			if p.Min[i] < 0 || p.Min[i] > p.Opt[i] || p.Opt[i] > p.Max[i] {
				bad = append(bad, fmt.Sprintf("tensorrt.profiles.%s: want 0 <= min <= opt <= max in every dim (0: an empty tensor, a KV cache's first step)", name))
				break
			}
		}
	}
	return bad
}

// Flags: --trt-version.
func (Target) Flags(fs *pflag.FlagSet, c *config.Config) map[string]string {
	s := SectionOf(c)
	fs.StringVar(&s.Version, "trt-version", s.Version, "TensorRT version for the calibration cache header (e.g. 100300)")
	return map[string]string{"trt-version": "tensorrt.version"}
}

// Lint is optc lint --target tensorrt.
func (Target) Lint(m *graph.Model) []lint.Finding { return trtlint.Check(m) }

// Export writes the TensorRT artifacts; the result is the *Result.
func (Target) Export(h target.Host) (any, error) {
	e := &exporter{h: h, c: h.Config(), r: &Result{}}
	return e.r, e.export()
}

// exporter carries one export's state.
type exporter struct {
	h target.Host
	c config.Config
	r *Result
}

func (e *exporter) note(s string)                         { e.h.Note(s) }
func (e *exporter) add(rel, kind, precision, from string) { e.h.Add(rel, kind, precision, from) }

// Result is what the TensorRT target made and found (report.json:
// details.target_reports.tensorrt).
type Result struct {
	FP16 *export.FP16Report `json:"fp16"`
	// FP16Ranges names the data the float16 variant's value ranges were
	// measured on; "" when there was none and the op rules alone decided.
	FP16Ranges string `json:"fp16_ranges_from,omitempty"`
	// Lint is `optc lint --target tensorrt` on the Q/DQ model (errors
	// fail the build; warnings are reported).
	Lint []lint.Finding `json:"lint,omitempty"`
	// Engine is trtexec's measurement when it is on PATH; EngineSkipped
	// says why there is none.
	Engine        *export.TrtexecReport `json:"engine,omitempty"`
	EngineSkipped string                `json:"engine_skipped,omitempty"`
}

// exportTensorRT writes the TensorRT artifacts: the fp16 variant, the
// legacy calibration cache and the engine scripts (the Q/DQ model was made
// by the quantize stage), lints the Q/DQ model and, where trtexec exists,
// builds and times the engine.
func (e *exporter) export() error {
	r := e.r
	m, err := graph.LoadFile(e.h.Float())
	if err != nil {
		return err
	}
	defer m.Close()
	ranges, err := e.fp16Ranges(m)
	if err != nil {
		// The ranges refine the op rules; failing to measure them must
		// not take the target down. The emulated check on the
		// calibration data (verify) still shows an overflow.
		e.note(fmt.Sprintf("tensorrt fp16: value ranges could not be measured, so float16 follows the op rules alone: %v", err))
		ranges = nil
	}
	if r.FP16, err = export.ToFloat16(m, export.FP16Options{Ranges: ranges}); err != nil {
		return fmt.Errorf("fp16 variant: %w", err)
	}
	e.noteFP16()
	fp16, err := e.h.Path("tensorrt/model.fp16.onnx")
	if err != nil {
		return err
	}
	if err := graph.Save(m, fp16, graph.SaveOptions{}); err != nil {
		return err
	}
	e.add("tensorrt/model.fp16.onnx", "model", "fp16", "")

	shapes, err := e.engineShapes()
	if err != nil {
		return err
	}
	script := func(name, model string, precision export.EnginePrecision, cache string) error {
		s, err := export.EngineScript(export.EngineScriptOptions{Model: model, Engine: trimExt(model) + ".engine",
			Precision: precision, CalibCache: cache, TimingCache: "timing.cache", Shapes: shapes})
		if err != nil {
			return err
		}
		p, err := e.h.Path("tensorrt/" + name)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(p, s); err != nil {
			return err
		}
		e.add("tensorrt/"+name, "script", "", "")
		return os.Chmod(p, 0o755)
	}
	if !e.c.INT8 || e.h.Quantized(quantize.TargetTensorRT) == "" {
		// No INT8, or the accuracy guard refused it: the fp16 engine.
		return errors.Join(script("build_engine.sh", "model.fp16.onnx", export.EngineFP16, ""), e.buildEngine("build_engine.sh"))
	}
	if err := e.writeTRTCache(); err != nil {
		return err
	}
	for _, s := range []struct {
		name, model string
		precision   export.EnginePrecision
		cache       string
	}{
		{"build_engine.sh", "model.int8.qdq.onnx", export.EngineQDQ, ""},
		{"build_engine_fp16.sh", "model.fp16.onnx", export.EngineFP16, ""},
		{"build_engine_calib_cache.sh", "../model.fp32.onnx", export.EngineCalibCache, "calibration.cache"},
	} {
		if err := script(s.name, s.model, s.precision, s.cache); err != nil {
			return err
		}
	}
	if err := e.lintQDQ(); err != nil {
		return err
	}
	return e.buildEngine("build_engine.sh")
}

// fp16Ranges measures the min and max of every float32 value of the
// float model (export.FP16Tensors) on the host's RangeData, for ToFloat16 to keep
// what float16 cannot hold in float32. The INT8 calibration cannot serve:
// it holds clipped ranges (percentile, entropy, mse) of the tensors
// quantization needs, of the model ptq rewrote. Without data it returns
// nil and says so: the op rules decide alone.
func (e *exporter) fp16Ranges(m *graph.Model) (map[string]calibrate.Range, error) {
	spec, opts := e.h.RangeData()
	if spec == "" {
		e.note("tensorrt fp16: no calibration or eval data to measure value ranges on, so float16 follows the op rules alone and overflow is not checked (give calibration.data with the deployment's range)")
		return nil, nil
	}
	e.h.Progress("measure float16 ranges on %s", spec)
	names, err := export.FP16Tensors(m)
	if err != nil {
		return nil, err
	}
	src, err := data.Open(spec, data.GraphInputs(m.Graph), opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// Values the float model itself makes infinite (a log of 0) are not
	// float16's concern: they are left out, not an error. Only where the
	// values are matters, so no histograms.
	stats, err := calibrate.Collect(m, src, names, calibrate.Options{SkipNonFinite: true, RangesOnly: true})
	if err != nil {
		return nil, fmt.Errorf("measuring float16 ranges on %s: %w", spec, err)
	}
	ranges := map[string]calibrate.Range{}
	for _, n := range names {
		if s, ok := stats.Summary(n); ok && s.Count > 0 {
			ranges[n] = calibrate.Range{Min: s.Min, Max: s.Max}
		}
	}
	e.r.FP16Ranges = spec
	return ranges, nil
}

// noteFP16 is the build output's line on the values the float16 variant
// keeps float32 for their measured range (report.json has each node and
// reason under details.target_reports.tensorrt.fp16).
func (e *exporter) noteFP16() {
	r := e.r
	out := r.FP16.OutOfRange
	if len(out) == 0 {
		return
	}
	var names []string
	for i, v := range out {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(out)-i))
			break
		}
		names = append(names, fmt.Sprintf("%s (|x| up to %.3g)", v.Value, math.Max(math.Abs(v.Min), math.Abs(v.Max))))
	}
	e.note(fmt.Sprintf("tensorrt fp16: %d tensor(s) stay float32, measured beyond ±%g (float16's 65504/4) on %s: %s; %d node(s) beyond those the op rules keep run float32 for them (report.json: details.target_reports.tensorrt.fp16)",
		len(out), float64(export.FP16SafeMax), r.FP16Ranges, strings.Join(names, ", "), r.FP16.KeptForRange))
}

// writeTRTCache converts optc's calibration ranges into TensorRT's legacy
// cache: one amax per tensor of the float model (symmetric, so the larger
// magnitude of the range).
func (e *exporter) writeTRTCache() error {
	c, err := calibrate.ReadCache(e.h.CalibrationFile())
	if err != nil {
		return err
	}
	amax := map[string]float64{}
	for name, r := range c.Ranges() {
		amax[name] = math.Max(math.Abs(r.Min), math.Abs(r.Max))
	}
	var buf bytes.Buffer
	if err := export.WriteTRTCalibCache(&buf, SectionOf(&e.c).Version, amax); err != nil {
		return err
	}
	p, err := e.h.Path("tensorrt/calibration.cache")
	if err != nil {
		return err
	}
	e.add("tensorrt/calibration.cache", "calibration", "", "")
	return atomicfile.Write(p, buf.Bytes())
}

// lintQDQ checks the Q/DQ model against TensorRT's rules; an error-level
// finding fails the build, naming the node.
func (e *exporter) lintQDQ() error {
	m, err := graph.LoadFile(e.h.Quantized(quantize.TargetTensorRT))
	if err != nil {
		return err
	}
	defer m.Close()
	findings := trtlint.Check(m)
	if findings == nil {
		findings = []lint.Finding{} // [] in lint.json, not null
	}
	e.r.Lint = findings
	if err := target.WriteJSON(e.h, "tensorrt/lint.json", findings); err != nil {
		return err
	}
	e.add("tensorrt/lint.json", "lint", "", "")
	if n := lint.Errors(findings); n > 0 {
		f := findings[0] // errors sort first
		return fmt.Errorf("the Q/DQ model breaks %d TensorRT rule(s); first: %s at node %q: %s", n, f.Rule, f.Node, f.Message)
	}
	return nil
}

// engineShapes is each dynamic input's min/opt/max for the scripts: from
// tensorrt.profiles, else the input specification (--shape) with a dynamic
// batch from 1 to the largest latency batch, the range the build timed.
func (e *exporter) engineShapes() (map[string]export.ShapeRange, error) {
	m, err := graph.LoadFile(e.h.Float())
	if err != nil {
		return nil, err
	}
	defer m.Close()
	ins := data.GraphInputs(m.Graph)
	spec := data.ConfigSpec(e.c)
	lo, loErr := data.ResolveShapes(ins, data.Options{Batch: 1, Spec: spec})
	hi, hiErr := data.ResolveShapes(ins, data.Options{Batch: slices.Max(e.h.LatencyBatches()), Spec: spec})
	out := map[string]export.ShapeRange{}
	for i, in := range ins {
		if p, ok := SectionOf(&e.c).Profiles[in.Name]; ok {
			out[in.Name] = export.ShapeRange{Min: p.Min, Opt: p.Opt, Max: p.Max}
			continue
		}
		if in.Shape.IsStatic() {
			continue
		}
		if err := cmp.Or(loErr, hiErr); err != nil {
			return nil, fmt.Errorf("%w; or give its TensorRT profile (tensorrt.profiles.%s)", err, in.Name)
		}
		out[in.Name] = export.ShapeRange{Min: lo[i], Opt: hi[i], Max: hi[i]}
		for k, d := range in.Shape {
			if d.Kind == graph.DimSymbolic && hi[i][k] == 0 {
				e.note(fmt.Sprintf("tensorrt: input %q dim %d (%s) is 0 in the engine profile (no past: a KV cache's first step); set tensorrt.profiles.%s for the lengths the engine must take", in.Name, k, d, in.Name))
			}
		}
	}
	return out, nil
}

// buildEngine runs the script where trtexec exists and keeps its
// measurement; elsewhere it says the step was skipped.
func (e *exporter) buildEngine(script string) error {
	if _, err := exec.LookPath("trtexec"); err != nil {
		e.r.EngineSkipped = "trtexec is not on PATH: the engine was not built; run tensorrt/" + script + " on a machine with TensorRT"
		e.note("tensorrt: " + e.r.EngineSkipped)
		return nil
	}
	p, err := e.h.Path("tensorrt/" + script)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(e.h.Context(), "sh", script)
	cmd.Dir = filepath.Dir(p)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tensorrt/%s: %w: %s", script, err, lastLines(out, 5))
	}
	if e.r.Engine, err = export.ParseTrtexecReport(bytes.NewReader(out)); err != nil {
		return fmt.Errorf("tensorrt/%s: %w", script, err)
	}
	// The engine and timing cache depend on the GPU: report them, they
	// are not reproducible artifacts.
	for _, f := range []string{"model.int8.qdq.engine", "model.fp16.engine", "timing.cache"} {
		if _, err := os.Stat(filepath.Join(cmd.Dir, f)); err == nil {
			e.add("tensorrt/"+f, "engine", "", "")
		}
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}

func trimExt(p string) string { return p[:len(p)-len(filepath.Ext(p))] }
