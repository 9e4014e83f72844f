// Package triton is the Triton Inference Server target of optc build: a
// model repository serving the deployed ORT model, its batching and
// instances chosen by a batch/thread sweep (export.Sweep) or pinned in the
// config's triton section.
package triton

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/quantize"
)

// Target is the triton target.
type Target struct{}

func (Target) Name() string { return "triton" }
func (Target) Doc() string {
	return "Triton Inference Server: a model repository serving the ORT model, profiles from a batch/thread sweep"
}
func (Target) Section() string         { return "triton" }
func (Target) Scheme() quantize.Target { return quantize.TargetORTCPU }
func (Target) Artifacts() []string {
	return []string{"triton/model_repository/NAME/1/model.onnx", "triton/model_repository/NAME/config.pbtxt",
		"triton/model_repository/NAME/configs/low_latency.pbtxt"}
}

// Deployment is the latency/throughput trade-off the Triton target was
// configured for (report.json: deployment).
type Deployment struct {
	Sweep          *export.SweepResult `json:"sweep,omitempty"` // nil when the profile was pinned
	LowLatency     export.Profile      `json:"low_latency"`
	HighThroughput export.Profile      `json:"high_throughput"`
}

// Export writes a Triton model repository serving the deployed ORT
// model, its batching and instances from a batch and thread sweep (or from
// the config, which makes the configuration reproducible). The result is
// the *Deployment.
func (Target) Export(h target.Host) (any, error) {
	c := h.Config()
	t := c.Triton
	d := &Deployment{}
	if t.Batch > 0 && t.Threads > 0 {
		why := "pinned in the config (triton.batch, triton.threads)"
		d.HighThroughput = export.Profile{Name: export.HighThroughput, Batch: t.Batch, Threads: t.Threads, Reason: why}
		d.LowLatency = export.Profile{Name: export.LowLatency, Batch: 1, Threads: t.Threads, Reason: why}
	} else {
		h.Progress("sweep batch sizes and threads for the deployment profiles")
		sweep, err := export.Sweep(export.SweepOptions{Model: h.Deployed(), Threads: c.Latency.Threads,
			Duration: h.SweepDuration(), Budget: h.SweepBudget(), Session: h.Session(), Inputs: c.Inputs(), ORTLib: c.Runtime.ORTLib})
		if err != nil {
			return nil, err
		}
		d.Sweep = sweep
		share := "no budget"
		if b := h.SweepBudget(); b > 0 {
			share = fmt.Sprintf("of a %s share", b.Round(100*time.Millisecond))
		}
		h.Progress("sweep: %d points in %.1fs (%s)", len(sweep.Points), sweep.Seconds, share)
		if len(sweep.Unswept) > 0 {
			h.Note(fmt.Sprintf("triton: the sweep's %s share of the budget left out %s; the profiles come from the points measured", h.SweepBudget(), strings.Join(sweep.Unswept, "; ")))
		}
		if d.LowLatency, d.HighThroughput, err = export.ChooseProfiles(sweep, c.Latency.P99BudgetMs); err != nil {
			return nil, err
		}
	}
	name := t.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(c.Model), filepath.Ext(c.Model))
	}
	dir, err := h.Path("triton/.")
	if err != nil {
		return nil, err
	}
	if err := export.WriteTriton(dir, export.TritonOptions{Name: name, ModelPath: h.Deployed(),
		Profile: d.HighThroughput, LowLatency: d.LowLatency, MaxBatchSize: t.MaxBatchSize,
		MaxQueueDelayUs: t.MaxQueueDelayUs, InstanceCount: t.Instances}); err != nil {
		return nil, err
	}
	repo := "triton/model_repository/" + name + "/"
	h.Add(repo+"1/model.onnx", "model-copy", h.DeployedPrecision(), h.Rel(h.Deployed()))
	h.Add(repo+"config.pbtxt", "config", "", "")
	h.Add(repo+"configs/low_latency.pbtxt", "config", "", "")
	return d, nil
}
