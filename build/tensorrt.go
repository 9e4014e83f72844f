package build

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"optc/calibrate"
	"optc/data"
	"optc/export"
	"optc/graph"
	"optc/internal/atomicfile"
	"optc/lint"
)

// TensorRTResult is what the TensorRT target made and found.
type TensorRTResult struct {
	FP16 *export.FP16Report `json:"fp16"`
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
func (b *builder) exportTensorRT() error {
	r := &TensorRTResult{}
	b.res.TensorRT = r
	m, err := graph.LoadFile(b.float)
	if err != nil {
		return err
	}
	defer m.Close()
	if r.FP16, err = export.ToFloat16(m, export.FP16Options{}); err != nil {
		return fmt.Errorf("fp16 variant: %w", err)
	}
	fp16, err := b.dir.path("tensorrt/model.fp16.onnx")
	if err != nil {
		return err
	}
	if err := graph.Save(m, fp16, graph.SaveOptions{}); err != nil {
		return err
	}
	b.add("tensorrt/model.fp16.onnx", "tensorrt", "model", "fp16", "")

	shapes, err := b.engineShapes()
	if err != nil {
		return err
	}
	script := func(name, model string, precision export.EnginePrecision, cache string) error {
		s, err := export.EngineScript(export.EngineScriptOptions{Model: model, Engine: trimExt(model) + ".engine",
			Precision: precision, CalibCache: cache, TimingCache: "timing.cache", Shapes: shapes})
		if err != nil {
			return err
		}
		p, err := b.dir.path("tensorrt/" + name)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(p, s); err != nil {
			return err
		}
		b.add("tensorrt/"+name, "tensorrt", "script", "", "")
		return os.Chmod(p, 0o755)
	}
	if !b.c.INT8 {
		return errors.Join(script("build_engine.sh", "model.fp16.onnx", export.EngineFP16, ""), b.buildEngine("build_engine.sh"))
	}
	if err := b.writeTRTCache(); err != nil {
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
	if err := b.lintQDQ(); err != nil {
		return err
	}
	return b.buildEngine("build_engine.sh")
}

// writeTRTCache converts optc's calibration ranges into TensorRT's legacy
// cache: one amax per tensor of the float model (symmetric, so the larger
// magnitude of the range).
func (b *builder) writeTRTCache() error {
	c, err := calibrate.ReadCache(b.calibFile)
	if err != nil {
		return err
	}
	amax := map[string]float64{}
	for name, r := range c.Ranges() {
		amax[name] = math.Max(math.Abs(r.Min), math.Abs(r.Max))
	}
	var buf bytes.Buffer
	if err := export.WriteTRTCalibCache(&buf, b.c.TensorRT.Version, amax); err != nil {
		return err
	}
	p, err := b.dir.path("tensorrt/calibration.cache")
	if err != nil {
		return err
	}
	b.add("tensorrt/calibration.cache", "tensorrt", "calibration", "", "")
	return atomicfile.Write(p, buf.Bytes())
}

// lintQDQ checks the Q/DQ model against TensorRT's rules; an error-level
// finding fails the build, naming the node.
func (b *builder) lintQDQ() error {
	m, err := graph.LoadFile(b.dir.tmpPath("tensorrt/model.int8.qdq.onnx"))
	if err != nil {
		return err
	}
	defer m.Close()
	findings := lint.TensorRT(m)
	if findings == nil {
		findings = []lint.Finding{} // [] in lint.json, not null
	}
	b.res.TensorRT.Lint = findings
	if err := writeJSONFile(b, "tensorrt/lint.json", findings); err != nil {
		return err
	}
	b.add("tensorrt/lint.json", "tensorrt", "lint", "", "")
	if n := lint.Errors(findings); n > 0 {
		f := findings[0] // errors sort first
		return fmt.Errorf("the Q/DQ model breaks %d TensorRT rule(s); first: %s at node %q: %s", n, f.Rule, f.Node, f.Message)
	}
	return nil
}

// engineShapes is each dynamic input's min/opt/max for the scripts: from
// tensorrt.profiles, else the input specification (--shape) with a dynamic
// batch from 1 to the largest latency batch, the range the build timed.
func (b *builder) engineShapes() (map[string]export.ShapeRange, error) {
	m, err := graph.LoadFile(b.float)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	ins := data.GraphInputs(m.Graph)
	spec := b.c.Inputs()
	lo, loErr := data.ResolveShapes(ins, data.Options{Batch: 1, Spec: spec})
	hi, hiErr := data.ResolveShapes(ins, data.Options{Batch: slices.Max(b.c.Latency.Batches), Spec: spec})
	out := map[string]export.ShapeRange{}
	for i, in := range ins {
		if p, ok := b.c.TensorRT.Profiles[in.Name]; ok {
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
	}
	return out, nil
}

// buildEngine runs the script where trtexec exists and keeps its
// measurement; elsewhere it says the step was skipped.
func (b *builder) buildEngine(script string) error {
	if _, err := exec.LookPath("trtexec"); err != nil {
		b.res.TensorRT.EngineSkipped = "trtexec is not on PATH: the engine was not built; run tensorrt/" + script + " on a machine with TensorRT"
		b.note("tensorrt: " + b.res.TensorRT.EngineSkipped)
		return nil
	}
	cmd := exec.CommandContext(b.ctx, "sh", script)
	cmd.Dir = b.dir.tmpPath("tensorrt")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tensorrt/%s: %w: %s", script, err, lastLines(out, 5))
	}
	if b.res.TensorRT.Engine, err = export.ParseTrtexecReport(bytes.NewReader(out)); err != nil {
		return fmt.Errorf("tensorrt/%s: %w", script, err)
	}
	// The engine and timing cache depend on the GPU: report them, they
	// are not reproducible artifacts.
	for _, f := range []string{"model.int8.qdq.engine", "model.fp16.engine", "timing.cache"} {
		if _, err := os.Stat(filepath.Join(cmd.Dir, f)); err == nil {
			b.add("tensorrt/"+f, "tensorrt", "engine", "", "")
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
