// Package ort is the ONNX Runtime target of optc build: the deployed
// model's ORT-format twin, written by ORT itself, and the session settings
// it was made and measured with (ort/session.json).
package ort

import (
	"fmt"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	onnxrt "github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
)

// Target is the ort target.
type Target struct{}

func (Target) Name() string { return "ort" }
func (Target) Doc() string {
	return "ONNX Runtime on CPU: the deployed model (INT8 where it pays), its .ort twin and session settings"
}
func (Target) Section() string                   { return "runtime" }
func (Target) Scheme() quantize.Target           { return quantize.TargetORT }
func (Target) Artifacts() []string               { return []string{"ort/model.ort", "ort/session.json"} }
func (Target) Export(h target.Host) (any, error) { return nil, write(h) }

// INT8Model is the ort scheme's INT8 model, which the ort and triton
// targets deploy where the placement says INT8 pays.
const INT8Model = "model.int8.onnx"

func (Target) QuantizedModel() string { return INT8Model }
func (Target) WithoutINT8() string    { return "the ORT and Triton artifacts are FP32" }

// Cost: verify times ort/model.ort.
func (Target) Cost(config.Config) target.Cost { return target.Cost{Timed: 1} }

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

// write writes the deployed model's ORT-format twin (ORT itself
// optimizes and serializes it at the runtime level) and the session
// settings.
func write(h target.Host) error {
	deployed := h.Deployed()
	ortPath, err := h.Path("ort/model.ort")
	if err != nil {
		return err
	}
	so := h.Session()
	skipped, err := export.WriteORTFormat(deployed, ortPath, so)
	if err != nil {
		return err
	}
	if skipped != "" {
		return skipORTFormat(h, fmt.Sprintf("%s: %s", h.Rel(deployed), skipped))
	}
	version, _ := onnxrt.Version()
	settings := SessionSettings{
		Model: h.Rel(deployed), ORTModel: "ort/model.ort", GraphOptimization: so.Level.String(),
		IntraOpThreads: so.IntraOpThreads, InterOpThreads: so.InterOpThreads, ExecutionProvider: "CPUExecutionProvider",
		ORTVersion: version, SaveModelFormatKey: "session.save_model_format=ORT",
		Portable: so.Level <= onnxrt.LevelBasic,
	}
	h.Add("ort/model.ort", "ort-model", h.DeployedPrecision(), h.Rel(deployed))
	h.Add("ort/session.json", "settings", "", "")
	return target.WriteJSON(h, "ort/session.json", settings)
}

// skipORTFormat is export for a model the ORT format cannot hold (tensors
// in a side file over protobuf's 2 GiB limit, or a value that is not a
// tensor): it writes the session settings without an .ort model, and a
// note saying why there is none.
func skipORTFormat(h target.Host, why string) error {
	so := h.Session()
	version, _ := onnxrt.Version()
	h.Note(fmt.Sprintf("ort: %s: no ort/model.ort; deploy the .onnx (with its side files)", why))
	h.Add("ort/session.json", "settings", "", "")
	return target.WriteJSON(h, "ort/session.json", SessionSettings{
		Model: h.Rel(h.Deployed()), GraphOptimization: so.Level.String(),
		IntraOpThreads: so.IntraOpThreads, InterOpThreads: so.InterOpThreads, ExecutionProvider: "CPUExecutionProvider",
		ORTVersion: version, Portable: true,
	})
}
