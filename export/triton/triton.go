// Package triton is the Triton Inference Server target of optc build: a
// model repository serving the deployed ORT model, its batching and
// instances chosen by a batch/thread sweep (export.Sweep) or pinned in the
// config's triton section.
package triton

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/quantize"
	"github.com/spf13/pflag"
)

// Target is the triton target.
type Target struct{}

func (Target) Name() string { return "triton" }
func (Target) Doc() string {
	return "Triton Inference Server: a model repository serving the ORT model, profiles from a batch/thread sweep"
}
func (Target) Section() string         { return "triton" }
func (Target) Scheme() quantize.Target { return quantize.TargetORT }
func (Target) Artifacts() []string {
	return []string{"triton/model_repository/NAME/1/model.onnx", "triton/model_repository/NAME/config.pbtxt",
		"triton/model_repository/NAME/configs/low_latency.pbtxt"}
}

// Section is the triton section of the build config: it pins the Triton
// model configuration (zeros: derived from the sweep). Batch and Threads
// together pin the high-throughput profile and skip the sweep, so that
// the configuration is the same on every build.
type Section struct {
	Name            string `yaml:"name" json:"name"`
	Batch           int    `yaml:"batch" json:"batch"`
	Threads         int    `yaml:"threads" json:"threads"`
	MaxBatchSize    int    `yaml:"max_batch_size" json:"max_batch_size"`
	Instances       int    `yaml:"instances" json:"instances"`
	MaxQueueDelayUs int    `yaml:"max_queue_delay_us" json:"max_queue_delay_us"`
}

// NewSection is the section's defaults: nothing pinned.
func (Target) NewSection() any { return &Section{} }

// SectionOf is c's triton section.
func SectionOf(c *config.Config) *Section { return config.SectionOf[Section](c, Target{}.Name()) }

// Validate checks the triton section of the config.
func (Target) Validate(c config.Config) []string {
	var bad []string
	t := SectionOf(&c)
	if t.MaxBatchSize < 0 || t.Instances < 0 || t.MaxQueueDelayUs < 0 || t.Batch < 0 || t.Threads < 0 {
		bad = append(bad, "triton: batch, threads, max_batch_size, instances and max_queue_delay_us must not be negative")
	}
	if (t.Batch > 0) != (t.Threads > 0) {
		bad = append(bad, "triton: batch and threads pin the profile together; give both or neither")
	}
	return bad
}

// Flags: --triton-name.
func (Target) Flags(fs *pflag.FlagSet, c *config.Config) map[string]string {
	s := SectionOf(c)
	fs.StringVar(&s.Name, "triton-name", s.Name, "model name in the Triton repository (default: the model file's name)")
	return map[string]string{"triton-name": "triton.name"}
}

// Summary is the build's lines on the two profiles.
func (Target) Summary(section any) []string {
	d, ok := section.(*Deployment)
	if !ok {
		return nil
	}
	var lines []string
	for _, p := range []export.Profile{d.LowLatency, d.HighThroughput} {
		lines = append(lines, fmt.Sprintf("triton %s: batch %d, %d thread(s): %s", p.Name, p.Batch, p.Threads, p.Reason))
	}
	return lines
}

// Cost: the batch and thread sweep behind the profiles, unless the config
// pins them.
func (Target) Cost(c config.Config) target.Cost {
	if t := SectionOf(&c); t.Batch > 0 && t.Threads > 0 {
		return target.Cost{}
	}
	return target.Cost{SweepPoints: len(export.SweepThreads(c.Latency.Threads)) * len(export.DefaultSweepBatches)}
}

// Deployment is the latency/throughput trade-off the Triton target was
// configured for (report.json: details.target_reports.triton).
type Deployment struct {
	Sweep          *export.SweepResult `json:"sweep,omitempty"` // nil when the profile was pinned or replayed
	LowLatency     export.Profile      `json:"low_latency"`
	HighThroughput export.Profile      `json:"high_throughput"`
	// ReplayedFrom is the decisions.json the profiles were replayed from.
	ReplayedFrom string `json:"replayed_from,omitempty"`
}

// Decision is the target's entry in decisions.json: the profiles (from
// the sweep, or pinned) and how the configs serve them, the cores the
// instance counts were derived from included. Replayed, it writes the
// same configs without a sweep.
type Decision struct {
	// Swept says the profiles were measured (false: pinned by
	// triton.batch and triton.threads).
	Swept          bool           `json:"swept"`
	LowLatency     export.Profile `json:"low_latency"`
	HighThroughput export.Profile `json:"high_throughput"`
	export.TritonServing
}

// Export writes a Triton model repository serving the deployed ORT
// model, its batching and instances from a batch and thread sweep (or from
// the config, or from the decision of a build replayed, which make the
// configuration reproducible). The result is the *Deployment.
func (Target) Export(h target.Host) (any, error) {
	c := h.Config()
	t := *SectionOf(&c)
	d := &Deployment{}
	var replayed *Decision
	cores := 0 // this machine's
	raw, from, err := h.Replayed()
	if err != nil {
		return nil, err
	}
	if raw != nil {
		if replayed, err = replay(raw, from, t); err != nil {
			return nil, err
		}
		d.LowLatency, d.HighThroughput, d.ReplayedFrom = replayed.LowLatency, replayed.HighThroughput, from
		cores = replayed.Cores
		h.Progress("triton: the profiles of %s, replayed: no sweep", from)
	} else if t.Batch > 0 && t.Threads > 0 {
		why := "pinned in the config (triton.batch, triton.threads)"
		d.HighThroughput = export.Profile{Name: export.HighThroughput, Batch: t.Batch, Threads: t.Threads, Reason: why}
		d.LowLatency = export.Profile{Name: export.LowLatency, Batch: 1, Threads: t.Threads, Reason: why}
	} else {
		h.Progress("sweep batch sizes and threads for the deployment profiles")
		sweep, err := export.Sweep(export.SweepOptions{Model: h.Deployed(), Threads: c.Latency.Threads,
			Duration: h.SweepDuration(), Budget: h.SweepBudget(), Session: h.Session(), Inputs: data.ConfigSpec(c), ORTLib: c.Runtime.ORTLib})
		if err != nil {
			return nil, err
		}
		sweep.Model = h.Rel(sweep.Model) // not the build's working folder
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
	serving, err := export.WriteTriton(dir, export.TritonOptions{Name: name, ModelPath: h.Deployed(),
		Profile: d.HighThroughput, LowLatency: d.LowLatency, MaxBatchSize: t.MaxBatchSize,
		MaxQueueDelayUs: t.MaxQueueDelayUs, InstanceCount: t.Instances, Cores: cores})
	if err != nil {
		return nil, err
	}
	decision := Decision{Swept: d.Sweep != nil, LowLatency: d.LowLatency, HighThroughput: d.HighThroughput, TritonServing: serving}
	if replayed != nil {
		decision.Swept = replayed.Swept
		if decision != *replayed {
			return nil, fmt.Errorf("replaying %s: its triton decision serves %s, this build %s: the triton options differ from the build it records", d.ReplayedFrom, replayed.serving(), decision.serving())
		}
	}
	h.Record(decision)
	repo := "triton/model_repository/" + name + "/"
	h.Add(repo+"1/model.onnx", "model-copy", h.DeployedPrecision(), h.Rel(h.Deployed()))
	h.Add(repo+"config.pbtxt", "config", "", "")
	h.Add(repo+"configs/low_latency.pbtxt", "config", "", "")
	return d, nil
}

// replay reads a recorded decision; pins in the config must agree with it.
func replay(raw []byte, from string, t Section) (*Decision, error) {
	var d Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("replaying %s: its triton decision: %w", from, err)
	}
	if d.HighThroughput.Batch < 1 || d.Cores < 1 {
		return nil, fmt.Errorf("replaying %s: its triton decision has no high-throughput profile or cores", from)
	}
	if t.Batch > 0 && t.Threads > 0 && (t.Batch != d.HighThroughput.Batch || t.Threads != d.HighThroughput.Threads) {
		return nil, fmt.Errorf("replaying %s: triton.batch %d and triton.threads %d pin another profile than the recorded one (batch %d, %d threads); leave them out to replay it",
			from, t.Batch, t.Threads, d.HighThroughput.Batch, d.HighThroughput.Threads)
	}
	return &d, nil
}

// serving is the decision's serving values, for messages.
func (d Decision) serving() string {
	return fmt.Sprintf("max_batch_size %d, max_queue_delay_us %d, instances %d (low latency %d) on %d cores",
		d.MaxBatchSize, d.MaxQueueDelayUs, d.Instances, d.LowLatencyInstances, d.Cores)
}
