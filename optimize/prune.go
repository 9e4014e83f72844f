package optimize

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/report/schema"
)

// PruneResult is what pruning did and what it cost.
type PruneResult struct {
	Reports []*schema.PruneReport `json:"reports"`
	// Cost compares the pruned model (B) with the unpruned optimized one (A).
	Cost *compare.Result `json:"cost"`
	// Search is what the accuracy budget search tried, when it ran.
	Search []SearchStep `json:"search,omitempty"`
	// Spared lists the layers the search left unpruned, most sensitive first.
	Spared  []string             `json:"spared_layers,omitempty"`
	Latency *schema.LatencyDelta `json:"latency,omitempty"`
	// Groups are the channel groups channels:auto gave a ratio each.
	Groups []prune.ChannelGroup `json:"channel_groups,omitempty"`
	// Global is channels:R's allocation across groups under
	// --prune-scope global (globalChannels).
	Global []*GlobalGroup `json:"global_allocation,omitempty"`
}

// SearchStep is one model the budget search measured: with some layers
// spared (--max-accuracy-drop on a given ratio), or for channels:auto
// either one group alone at one ratio (a probe: Layer, the group's first
// layer, and Ratio) or a whole allocation (Level of Levels probes).
type SearchStep struct {
	Spared     []string `json:"spared_layers,omitempty"`
	Layer      string   `json:"layer,omitempty"`
	Ratio      float64  `json:"ratio,omitempty"`
	Level      int      `json:"level,omitempty"`
	Levels     int      `json:"levels,omitempty"`
	DropPoints float64  `json:"drop_points"`
	MinCosine  float64  `json:"min_cosine"`
	Within     bool     `json:"within_budget"`
}

// applyPruning prunes the optimized model held in unpruned, measures the
// cost against it, and keeps within MaxAccuracyDrop by sparing the most
// sensitive layers. It returns the pruned model's bytes.
func applyPruning(opts Options, unpruned []byte) (res *PruneResult, _ []byte, err error) {
	res = &PruneResult{}
	if hasAuto(opts.Prune) {
		pruned, err := searchPerLayer(opts, unpruned, res)
		if err != nil {
			return nil, nil, err
		}
		if res.Latency, err = latency(opts, unpruned, pruned); err != nil {
			return nil, nil, err
		}
		return res, pruned, nil
	}
	popts := opts.PruneOpts
	if popts.Scope == prune.ScopeGlobal && popts.Data != nil {
		// Data-driven channels:R with one budget for the whole model.
		i := slices.IndexFunc(opts.Prune, func(m prune.Method) bool { return m.Kind == "channels" })
		if i < 0 || len(opts.Prune) > 1 {
			return nil, nil, fmt.Errorf("--prune-scope global with calibration data is for one channels:R")
		}
		if popts.PerLayer, err = globalChannels(opts, unpruned, opts.Prune[i].Ratio, res); err != nil {
			return nil, nil, err
		}
	}
	pruned, reports, err := pruneBytes(unpruned, opts.Prune, popts, nil)
	if err != nil {
		return nil, nil, err
	}
	if res.Global != nil {
		reports[0].Method += " (global)"
	}
	res.Reports = reports
	if res.Cost, err = cost(opts, unpruned, pruned); err != nil {
		return nil, nil, err
	}
	if opts.MaxAccuracyDrop > 0 && res.Cost.Accuracy != nil && res.Cost.Accuracy.DropPoints > opts.MaxAccuracyDrop {
		if pruned, err = searchBudget(opts, unpruned, res); err != nil {
			return nil, nil, err
		}
	}
	if slices.ContainsFunc(opts.Prune, func(m prune.Method) bool { return m.Kind == "channels" }) {
		if res.Latency, err = latency(opts, unpruned, pruned); err != nil {
			return nil, nil, err
		}
	}
	return res, pruned, nil
}

// pruneBytes applies the methods to a fresh copy of the model, then the
// -O1 cleanups (pruning leaves dead weights behind). A channels:auto
// method prunes with the per-layer ratios auto (every other layer at 0);
// the other methods keep popts as given.
func pruneBytes(model []byte, methods []prune.Method, popts prune.Options, auto map[string]float64) ([]byte, []*schema.PruneReport, error) {
	m, err := graph.Parse(model, "")
	if err != nil {
		return nil, nil, err
	}
	var reports []*schema.PruneReport
	for _, meth := range methods {
		o, resolved := popts, meth
		if meth.Auto {
			o.PerLayer, resolved = auto, prune.Method{Kind: meth.Kind}
		}
		r, err := prune.Apply(m, resolved, o)
		if err != nil {
			return nil, nil, fmt.Errorf("prune %s: %w", meth, err)
		}
		if meth.Auto {
			r.Method = meth.String()
		}
		reports = append(reports, r)
	}
	cleanups := passes.Pipeline(passes.Cleanups)
	if _, err := passes.Run(m, cleanups, passes.Options{VerifyEach: true}); err != nil {
		return nil, nil, fmt.Errorf("after pruning: %w", err)
	}
	b, err := graph.Marshal(m)
	return b, reports, err
}

// cost runs the unpruned (A) and pruned (B) models on the cost data:
// --data and --labels when given, else the check's random inputs.
func cost(opts Options, unpruned, pruned []byte) (*compare.Result, error) {
	spec, dopts := opts.PruneData, opts.PruneDataOpts
	if spec == "" {
		spec, dopts = "random", opts.DataOpts
		dopts.Samples, dopts.Batch = max(opts.CheckSamples, 4), 1
		if dopts.High == 0 && dopts.Low == 0 {
			dopts.High = 1
		}
	}
	r, err := compare.Models(compare.Options{
		ModelA: "unpruned", ModelB: "pruned", AInMemory: graph.Serialized{Bytes: unpruned}, BInMemory: graph.Serialized{Bytes: pruned},
		Data: spec, DataOpts: dopts, Labels: opts.PruneLabels,
		Atol: map[string]float64{"": 1e9}, Session: ort.DefaultOptions(), ORTLib: opts.ORTLib,
	})
	if err != nil {
		return nil, fmt.Errorf("measuring what pruning cost: %w", err)
	}
	return r, nil
}

// searchBudget measures each pruned layer alone, then spares the most
// sensitive layers one by one until the accuracy drop is within budget.
func searchBudget(opts Options, unpruned []byte, res *PruneResult) ([]byte, error) {
	var layers []string
	for _, r := range res.Reports {
		for _, l := range r.Layers {
			if l.Skipped == "" && !slices.Contains(layers, l.Node) {
				layers = append(layers, l.Node)
			}
		}
	}
	drop := map[string]float64{}
	for _, l := range layers {
		_, _, c, err := pruneSparing(opts, unpruned, without(layers, l))
		if err != nil {
			return nil, err
		}
		drop[l] = c.Accuracy.DropPoints
	}
	slices.SortStableFunc(layers, func(a, b string) int {
		switch {
		case drop[a] > drop[b]:
			return -1
		case drop[a] < drop[b]:
			return 1
		}
		return 0
	})
	for k := 1; k <= len(layers); k++ {
		spared := layers[:k]
		b, reports, c, err := pruneSparing(opts, unpruned, spared)
		if err != nil {
			return nil, err
		}
		res.Search = append(res.Search, SearchStep{Spared: slices.Clone(spared), DropPoints: c.Accuracy.DropPoints})
		if c.Accuracy.DropPoints <= opts.MaxAccuracyDrop || k == len(layers) {
			res.Reports, res.Cost, res.Spared = reports, c, slices.Clone(spared)
			return b, nil
		}
	}
	return nil, fmt.Errorf("no prunable layers")
}

// pruneSparing prunes unpruned as opts say with the spared layers
// excluded too, and measures what that costs: one try of searchBudget.
func pruneSparing(opts Options, unpruned []byte, spared []string) ([]byte, []*schema.PruneReport, *compare.Result, error) {
	popts := opts.PruneOpts
	popts.Exclude = append(slices.Clone(popts.Exclude), spared...)
	b, reports, err := pruneBytes(unpruned, opts.Prune, popts, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := cost(opts, unpruned, b)
	if err != nil {
		return nil, nil, nil, err
	}
	return b, reports, c, nil
}

func without(xs []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(xs), func(y string) bool { return y == x })
}

// latency measures both models in ORT at level all, batch 1.
func latency(opts Options, unpruned, pruned []byte) (*schema.LatencyDelta, error) {
	dir, cleanup, err := atomicfile.ScratchDir("optc-prune-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	d := &schema.LatencyDelta{Batch: 1}
	for i, b := range [][]byte{unpruned, pruned} {
		path := filepath.Join(dir, fmt.Sprintf("m%d.onnx", i))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
		dopts := opts.DataOpts
		if dopts.High == 0 && dopts.Low == 0 {
			dopts.High = 1
		}
		r, err := bench.Run(bench.Options{Model: path, Data: "random", DataOpts: dopts, Batches: []int{1},
			Session: ort.DefaultOptions(), Duration: time.Second, ORTLib: opts.ORTLib})
		if err != nil {
			return nil, fmt.Errorf("measuring latency: %w", err)
		}
		if i == 0 {
			d.BeforeP50 = r.Batches[0].Latency.P50
		} else {
			d.AfterP50 = r.Batches[0].Latency.P50
		}
	}
	return d, nil
}

func hasAuto(ms []prune.Method) bool {
	return slices.ContainsFunc(ms, func(m prune.Method) bool { return m.Auto })
}

// minCosine is the lowest cosine over c's outputs.
func minCosine(c *compare.Result) float64 {
	m := 1.0
	for _, o := range c.Outputs {
		m = min(m, float64(o.Cosine))
	}
	return m
}
