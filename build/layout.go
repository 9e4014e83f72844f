package build

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/report"
)

// layoutModel is the shaped model's name in the build folder.
const layoutModel = "model.fp32.nchwc.onnx"

// nchwcBlock is the block runtime.nchwc asks for: 0 when off, or when
// ORT runs the artifacts without its layout rewrites (below level all)
// or has none on this CPU.
func (b *builder) nchwcBlock() (int, string) {
	switch v := b.c.Runtime.NCHWc; {
	case v == "off":
		return 0, "runtime.nchwc is off"
	case b.c.Runtime.Level != "all":
		return 0, fmt.Sprintf("ORT's NCHWc layout is a level-all rewrite and the artifacts run at level %s", b.c.Runtime.Level)
	case v == "auto" || v == "on":
		if n := ort.NCHWcBlock(); n > 0 {
			return n, ""
		}
		return 0, "ORT has no NCHWc layout on this CPU"
	default:
		n, _ := strconv.Atoi(v) // validated by config
		return n, ""
	}
}

// layout shapes the FP32 model for ORT's NCHWc CPU kernels and deploys it
// for the ORT and Triton targets when it is confirmed faster than what
// they deploy now (the FP32 model or the INT8 placement): exact, so the
// question is only speed. Replaying, the record answers it instead.
func (b *builder) layout() error {
	if b.replay != nil {
		return b.replayLayout()
	}
	block, why := b.nchwcBlock()
	if _, err := os.Stat(b.float + ".data"); err == nil && block > 0 {
		block, why = 0, "the FP32 model keeps its tensors in a side file (over 2 GiB): not shaped"
	}
	if block == 0 {
		b.res.Layout = &report.Layout{Reason: why}
		b.decisions.NCHWc = &NCHWcDecision{Reason: why}
		return nil
	}
	out, err := b.dir.path(layoutModel)
	if err != nil {
		return err
	}
	b.progress("nchwc: shaping %s for ORT's CPU layout (block %d)", rel(b, b.float), block)
	rec, err := NCHWc(b.layoutOptions(out, block, b.c.Runtime.NCHWc == "on"))
	if err != nil {
		return err
	}
	d := &NCHWcDecision{Block: block, Convs: rec.Convs, Bridges: rec.Bridges, Timed: rec.Timing != nil, Deployed: rec.Deployed, Reason: rec.Reason}
	if rec.Deployed {
		fd, err := digest(out)
		if err != nil {
			return err
		}
		d.SHA256 = fd.SHA256
	}
	b.decisions.NCHWc = d
	return b.deployLayout(rec, out)
}

// replayLayout applies the recorded nchwc decision without timing: the
// model is shaped again only when it was deployed, and must come out the
// same, byte for byte.
func (b *builder) replayLayout() error {
	r := b.replay
	d := r.rec.NCHWc
	if d == nil {
		return r.missing("nchwc", "had neither the ort nor the triton target")
	}
	r.used = append(r.used, "nchwc")
	b.decisions.NCHWc = d
	if !d.Deployed {
		b.res.Layout = &report.Layout{Block: d.Block, Convs: d.Convs, Bridges: d.Bridges,
			Reason: fmt.Sprintf("replayed from %s, not deployed: %s", r.path, d.Reason)}
		return nil
	}
	out, err := b.dir.path(layoutModel)
	if err != nil {
		return err
	}
	b.progress("nchwc: shaping %s for ORT's CPU layout (block %d), deployed as %s records", rel(b, b.float), d.Block, r.path)
	rec, err := NCHWc(b.layoutOptions(out, d.Block, true))
	if err != nil {
		return err
	}
	fd := FileDigest{}
	if rec.Deployed {
		if fd, err = digest(out); err != nil {
			return err
		}
	}
	if !rec.Deployed || rec.Convs != d.Convs || rec.Bridges != d.Bridges || fd.SHA256 != d.SHA256 {
		return fmt.Errorf("replaying %s: its nchwc decision deploys %s with %d convs padded and %d HardSigmoid bridges at block %d (sha256 %.12s...), this build shapes %d and %d (sha256 %.12s...; %s)",
			r.path, layoutModel, d.Convs, d.Bridges, d.Block, d.SHA256, rec.Convs, rec.Bridges, fd.SHA256, rec.Reason)
	}
	rec.Reason = fmt.Sprintf("replayed from %s, deployed without timing: %s", r.path, d.Reason)
	return b.deployLayout(rec, out)
}

// layoutOptions are the nchwc stage's, shaping at block into out.
func (b *builder) layoutOptions(out string, block int, untimed bool) LayoutOptions {
	return LayoutOptions{Float: b.float, Deployed: b.ortModel, Output: out, Block: block,
		Session: b.session(), Inputs: data.ConfigSpec(b.c), Batches: b.latencyBatches, ORTLib: b.c.Runtime.ORTLib,
		Untimed: untimed, Progress: b.progress}
}

// deployLayout makes the shaped model at out what the ORT and Triton
// targets deploy when rec says so.
func (b *builder) deployLayout(rec *report.Layout, out string) error {
	b.res.Layout = rec
	rec.Baseline = rel(b, b.ortModel)
	if !rec.Deployed {
		if rec.CheckFailed {
			b.note("nchwc: " + rec.Reason)
		}
		return nil
	}
	b.ortModel, b.ortPrecision = out, "fp32"
	b.add(layoutModel, string(PlacedScheme), "model", "fp32", "model.fp32.onnx")
	b.note(fmt.Sprintf("nchwc: the ORT and Triton artifacts are %s (%d convs padded to a multiple of %d channels, %d HardSigmoid bridges) instead of %s: %s", layoutModel, rec.Convs, rec.Block, rec.Bridges, rec.Baseline, rec.Reason))
	return nil
}

// LayoutOptions say what NCHWc shapes and what it is timed against.
type LayoutOptions struct {
	Float    string // the FP32 model to shape
	Deployed string // what the ORT artifact deploys now (Float, or an INT8 model)
	Output   string // where the shaped model goes (removed unless deployed)
	Block    int
	Session  ort.Options
	Inputs   data.Spec
	Batches  []int
	ORTLib   string
	// Untimed deploys the shaped model without timing it (runtime.nchwc
	// on: a decision recorded by an earlier build, replayed).
	Untimed bool
	// Progress, when set, hears when the timing starts.
	Progress func(format string, args ...any)
}

// NCHWc shapes opts.Float for ORT's NCHWc CPU layout (checked exact in
// ORT against it) and times it against opts.Deployed: the shaped model is
// kept at opts.Output, and Deployed set, only when it is confirmed faster.
// The build's nchwc stage and the benchmark suite decide the same way.
func NCHWc(opts LayoutOptions) (*report.Layout, error) {
	rec := &report.Layout{Block: opts.Block}
	o := optimize.Options{Input: opts.Float, Output: opts.Output, Level: 0, NCHWcBlock: opts.Block, Check: true,
		CheckAtol: optimize.DefaultCheckAtol, CheckRtol: optimize.DefaultCheckRtol,
		DataOpts: data.Options{Spec: opts.Inputs, High: 1, Seed: 1}, ORTLib: opts.ORTLib}
	res, err := optimize.Run(o)
	if err != nil {
		if errors.Is(err, optimize.ErrCheck) {
			// Exact by construction: a difference is a bug in the passes,
			// and what is deployed stays.
			rec.CheckFailed = true
			rec.Reason = fmt.Sprintf("not deployed: %v", err)
			return rec, nil
		}
		return nil, err
	}
	for _, p := range res.Passes.Passes {
		switch p.Name {
		case "pad-conv-channels":
			rec.Convs = p.Stats.Rewritten
		case "hardsigmoid-conv-bridge":
			rec.Bridges = p.Stats.Added - 2*p.Stats.Removed // one conv per HardSigmoid; a HardSwish adds its HardSigmoid and Mul
		}
	}
	drop := func(reason string) (*report.Layout, error) {
		rec.Reason = reason
		os.Remove(opts.Output + ".data") // none unless the model is over 2 GiB
		return rec, os.Remove(opts.Output)
	}
	if rec.Convs == 0 && rec.Bridges == 0 {
		return drop("nothing to change: every conv's channels are a multiple of the block and no HardSwish breaks the layout")
	}
	if opts.Untimed {
		rec.Deployed, rec.Reason = true, "deployed without timing (runtime.nchwc on)"
		return rec, nil
	}
	base, err := os.ReadFile(opts.Deployed)
	if err != nil {
		return nil, err
	}
	shaped, err := os.ReadFile(opts.Output)
	if err != nil {
		return nil, err
	}
	if opts.Progress != nil {
		opts.Progress("nchwc: timing the shaped model (%d convs padded, %d HardSigmoid bridges) against %s at batch %v", rec.Convs, rec.Bridges, filepath.Base(opts.Deployed), opts.Batches)
	}
	if rec.Timing, err = placement.Faster(graph.Serialized{Bytes: base}, graph.Serialized{Bytes: shaped}, opts.Session, opts.Inputs, opts.Batches); err != nil {
		return nil, err
	}
	if !rec.Timing.Faster {
		return drop(fmt.Sprintf("not deployed: %s", rec.Timing.Reason))
	}
	rec.Deployed = true
	rec.Reason = fmt.Sprintf("deployed: %s", rec.Timing.Reason)
	return rec, nil
}
