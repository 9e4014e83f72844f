package build

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/ort"
)

// export writes each target's artifacts into the working folder.
func (b *builder) export() error {
	if b.wants("ort") {
		if err := b.exportORT(); err != nil {
			return fmt.Errorf("ort target: %w", err)
		}
	}
	if b.wants("tensorrt") {
		if err := b.exportTensorRT(); err != nil {
			return fmt.Errorf("tensorrt target: %w", err)
		}
	}
	if b.wants("triton") {
		if err := b.exportTriton(); err != nil {
			return fmt.Errorf("triton target: %w", err)
		}
	}
	return nil
}

// Deployment is the latency/throughput trade-off the Triton target was
// configured for.
type Deployment struct {
	Sweep          *export.SweepResult `json:"sweep,omitempty"` // nil when the profile was pinned
	LowLatency     export.Profile      `json:"low_latency"`
	HighThroughput export.Profile      `json:"high_throughput"`
}

// exportTriton writes a Triton model repository serving the deployed ORT
// model, its batching and instances from a batch and thread sweep (or from
// the config, which makes the configuration reproducible).
func (b *builder) exportTriton() error {
	t := b.c.Triton
	d := &Deployment{}
	if t.Batch > 0 && t.Threads > 0 {
		why := "pinned in the config (triton.batch, triton.threads)"
		d.HighThroughput = export.Profile{Name: export.HighThroughput, Batch: t.Batch, Threads: t.Threads, Reason: why}
		d.LowLatency = export.Profile{Name: export.LowLatency, Batch: 1, Threads: t.Threads, Reason: why}
	} else {
		b.progress("sweep batch sizes and threads for the deployment profiles")
		sweep, err := export.Sweep(export.SweepOptions{Model: b.ortModel, Threads: b.c.Latency.Threads,
			Duration: b.sweepDuration(), Session: b.session(), Inputs: b.c.Inputs(), ORTLib: b.c.Runtime.ORTLib})
		if err != nil {
			return err
		}
		d.Sweep = sweep
		if d.LowLatency, d.HighThroughput, err = export.ChooseProfiles(sweep, b.c.Latency.P99BudgetMs); err != nil {
			return err
		}
	}
	b.res.Deployment = d
	name := t.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(b.c.Model), filepath.Ext(b.c.Model))
	}
	dir, err := b.dir.path("triton/.")
	if err != nil {
		return err
	}
	if err := export.WriteTriton(dir, export.TritonOptions{Name: name, ModelPath: b.ortModel,
		Profile: d.HighThroughput, LowLatency: d.LowLatency, MaxBatchSize: t.MaxBatchSize,
		MaxQueueDelayUs: t.MaxQueueDelayUs, InstanceCount: t.Instances}); err != nil {
		return err
	}
	repo := "triton/model_repository/" + name + "/"
	precision := "fp32"
	if b.ortModel != b.float {
		precision = "int8"
	}
	b.add(repo+"1/model.onnx", "triton", "model-copy", precision, rel(b, b.ortModel))
	b.add(repo+"config.pbtxt", "triton", "config", "", "")
	b.add(repo+"configs/low_latency.pbtxt", "triton", "config", "", "")
	return nil
}

// SessionSettings is ort/session.json: how the ORT artifacts were made
// and measured, so a deployment can run them the same way.
type SessionSettings struct {
	Model              string `json:"model"`
	ORTModel           string `json:"ort_model,omitempty"`
	GraphOptimization  string `json:"graph_optimization_level"`
	IntraOpThreads     int    `json:"intra_op_threads"` // 0: ORT's default, one per core
	InterOpThreads     int    `json:"inter_op_threads"`
	ExecutionProvider  string `json:"execution_provider"`
	ORTVersion         string `json:"ort_version"`
	SaveModelFormatKey string `json:"ort_model_session_config,omitempty"`
	// Portable is false at level all (and extended): ORT then writes
	// layout-specific kernels (NCHWc) that are only valid on a CPU with the
	// same instruction set; load the .onnx with the same level elsewhere.
	Portable bool `json:"portable"`
}

// exportORT writes the deployed model's ORT-format twin (ORT itself
// optimizes and serializes it at the runtime level) and the session
// settings.
func (b *builder) exportORT() error {
	if _, err := os.Stat(b.ortModel + ".data"); err == nil {
		return b.skipORTFormat(fmt.Sprintf("%s keeps its tensors in a side file (over 2 GiB), which the ORT format cannot hold", rel(b, b.ortModel)))
	}
	ortPath, err := b.dir.path("ort/model.ort")
	if err != nil {
		return err
	}
	m, err := graph.LoadFile(b.ortModel)
	if err != nil {
		return err
	}
	ins, outs := ort.Interface(m)
	m.Close()
	so := b.session()
	so.OptimizedModelPath = ortPath
	sess, err := ort.NewSession(ort.Source{Path: b.ortModel, Inputs: ins, Outputs: outs}, so)
	if note := nonTensorNote(ins, outs); err != nil && note != "" {
		// ORT cannot write such a model in its format ("We do not support
		// type [9]"); the .onnx runs as it is.
		return b.skipORTFormat(fmt.Sprintf("ONNX Runtime cannot write %s in the ORT format%s: %v", rel(b, b.ortModel), note, err))
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", ortPath, err)
	}
	if err := sess.Close(); err != nil {
		return err
	}
	if _, err := os.Stat(ortPath); err != nil {
		return fmt.Errorf("ONNX Runtime did not write %s: %w", ortPath, err)
	}
	version, _ := ort.Version()
	settings := SessionSettings{
		Model: rel(b, b.ortModel), ORTModel: "ort/model.ort", GraphOptimization: so.Level.String(),
		IntraOpThreads: so.IntraOpThreads, InterOpThreads: so.InterOpThreads, ExecutionProvider: "CPUExecutionProvider",
		ORTVersion: version, SaveModelFormatKey: "session.save_model_format=ORT",
		Portable: so.Level <= ort.LevelBasic,
	}
	precision := "fp32"
	if b.ortModel != b.float {
		precision = "int8"
	}
	b.add("ort/model.ort", "ort", "ort-model", precision, rel(b, b.ortModel))
	b.add("ort/session.json", "ort", "settings", "", "")
	return writeJSONFile(b, "ort/session.json", settings)
}

// skipORTFormat is exportORT for a model whose tensors are in a side file
// (over protobuf's 2 GiB limit): the ORT format is one flatbuffer, which
// cannot hold it, so only the session settings are written.
// nonTensorNote names the first value of the interface that is not a
// tensor, which is what the ORT format fails on ("We do not support type
// [9]" for an optional), or says nothing.
func nonTensorNote(ins, outs []ort.IO) string {
	for _, io := range append(slices.Clone(ins), outs...) {
		if io.Kind != graph.KindTensor && io.Kind != graph.KindUnknown {
			return fmt.Sprintf(" (%q is %s, not a tensor)", io.Name, io.NotExpressible())
		}
	}
	return ""
}

// skipORTFormat writes the session settings without an .ort model, and a
// note saying why there is none.
func (b *builder) skipORTFormat(why string) error {
	so := b.session()
	version, _ := ort.Version()
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("ort: %s: no ort/model.ort; deploy the .onnx (with its side files)", why))
	b.add("ort/session.json", "ort", "settings", "", "")
	return writeJSONFile(b, "ort/session.json", SessionSettings{
		Model: rel(b, b.ortModel), GraphOptimization: so.Level.String(),
		IntraOpThreads: so.IntraOpThreads, InterOpThreads: so.InterOpThreads, ExecutionProvider: "CPUExecutionProvider",
		ORTVersion: version, Portable: true,
	})
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
	p, err := b.dir.path(rel)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p, append(js, '\n'))
}
