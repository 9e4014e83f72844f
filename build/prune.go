package build

import (
	"slices"

	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/task/tasks"
)

// pruneOptions maps the prune section onto optimize's pruning: the passes
// stage prunes after its own check, so that model.fp32.onnx, and every
// artifact grown from it, is the pruned model. Pruning is data-driven on
// the calibration data (the same draw calibration takes) unless
// prune.reconstruct is off; its cost is measured on the eval data.
func (b *builder) pruneOptions(o *optimize.Options) error {
	c := b.c
	for _, s := range c.Prune.Methods {
		m, err := prune.ParseMethod(s)
		if err != nil {
			return err
		}
		o.Prune = append(o.Prune, m)
	}
	if len(o.Prune) == 0 {
		return nil
	}
	o.PruneOpts = prune.Options{Scope: c.Prune.Scope, Exclude: c.Prune.Exclude}
	o.MaxAccuracyDrop, o.MinCosine = c.Prune.MaxAccuracyDrop, c.Prune.MinCosine
	o.Progress = b.opts.Progress
	switch {
	case !c.Prune.Reconstruct:
	case c.Calibration.Data == "" || c.Calibration.Data == "random":
		b.note("prune: no calibration data, so pruning is by magnitude alone, without reconstruction (prune.reconstruct needs calibration.data)")
	default:
		d := &prune.Data{Spec: c.Calibration.Data, ORTLib: c.Runtime.ORTLib, Session: b.session(),
			Opts: b.dataOptions(c.Calibration.Data, c.Calibration.Batch, c.Calibration.Samples)}
		d.Opts.Shuffle = c.Calibration.Samples > 0
		o.PruneOpts.Data = d
	}
	if c.Prune.Scope == prune.ScopeGlobal && o.PruneOpts.Data == nil && slices.ContainsFunc(o.Prune, func(m prune.Method) bool { return m.Kind == "channels" }) {
		b.note("prune: scope global allocates channels:R by measured cost on the calibration data; without it each layer loses R")
	}
	if b.eval.spec != "" && b.eval.spec != "random" {
		o.PruneData, o.PruneDataOpts = b.eval.spec, b.eval.opts
		if c.Eval.Data != "" {
			o.PruneLabels, _ = tasks.Scoring(tasks.Spec(c.Eval)) // class labels only
		}
	}
	return nil
}
