package optimize

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/report/schema"
)

// searchPerLayer resolves channels:auto with one ratio per group of
// coupled layers, every figure measured in ORT on the cost data:
//
//  1. Sensitivity: each group alone is pruned (with reconstruction when
//     there is calibration data) at each of its ratios, smallest first, and
//     the pruned model scored against the unpruned one; a group's probes
//     stop at the first ratio that alone breaks the budget.
//  2. Allocation: the probes within the budget are ordered by what they
//     cost (the share of the budget used, then 1 − cosine; a larger ratio
//     never ranks before a smaller one of the same group), and level k
//     prunes every group at the largest ratio among the first k probes.
//  3. Bisection on k for the largest level whose whole model, measured,
//     keeps the budget (the per-group costs do not simply add up, so each
//     level tried is measured). The level chosen is the last measured one
//     within the budget: its figures are the confirmation.
//
// Same model, data and options, same choice: no randomness, ties go to
// graph order and the smaller ratio.
func searchPerLayer(opts Options, unpruned []byte, res *PruneResult) ([]byte, error) {
	m, err := graph.Parse(unpruned, "")
	if err != nil {
		return nil, err
	}
	groups, err := prune.ChannelGroups(m, opts.PruneOpts)
	if err != nil {
		return nil, err
	}
	res.Groups = groups
	probes, err := probeGroups(opts, unpruned, groups, res)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(probes, func(a, b probe) int {
		return cmp.Or(cmp.Compare(a.loss, b.loss), cmp.Compare(a.dist, b.dist), cmp.Compare(a.group, b.group), cmp.Compare(a.ratio, b.ratio))
	})
	level := func(k int) map[string]float64 {
		ratios := map[string]float64{}
		for _, p := range probes[:k] {
			maps.Copy(ratios, ratiosOf(groups[p.group], p.ratio))
		}
		return ratios
	}
	type measured struct {
		model   []byte
		reports []*schema.PruneReport
		cost    *compare.Result
	}
	try := func(k int) (*measured, bool, error) {
		b, c, err := measureAuto(opts, unpruned, level(k))
		if err != nil {
			return nil, false, err
		}
		step := autoStep(opts, c)
		step.Level, step.Levels = k, len(probes)
		res.Search = append(res.Search, step)
		progress(opts, "channels:auto: the %d cheapest of %d probes: drop %.2f points, min cosine %.4f", k, len(probes), step.DropPoints, step.MinCosine)
		return &measured{b.model, b.reports, c}, step.Within, nil
	}
	var best *measured
	lo, hi := 0, len(probes)+1 // level lo keeps the budget (0: nothing pruned), hi does not
	if len(probes) > 0 {
		t, ok, err := try(len(probes))
		if err != nil {
			return nil, err
		}
		if ok {
			lo, best = len(probes), t
		} else {
			hi = len(probes)
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		t, ok, err := try(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo, best = mid, t
		} else {
			hi = mid
		}
	}
	if best == nil {
		// No level keeps the budget: the unpruned model, measured against
		// itself, with the table saying nothing was pruned.
		b, c, err := measureAuto(opts, unpruned, map[string]float64{})
		if err != nil {
			return nil, err
		}
		best = &measured{b.model, b.reports, c}
	}
	explainWhole(opts, groups, probes, best.reports)
	res.Reports, res.Cost = best.reports, best.cost
	return best.model, nil
}

// probe is one group pruned alone at one ratio, and what it cost.
type probe struct {
	group int
	ratio float64
	loss  float64 // share of the budget used, running max over the group's smaller ratios
	dist  float64 // 1 − min cosine, running max likewise
}

// probeGroups prunes each group alone at its ratios, smallest first, until
// one breaks the budget, and returns the probes that keep it.
func probeGroups(opts Options, unpruned []byte, groups []prune.ChannelGroup, res *PruneResult) ([]probe, error) {
	var probes []probe
	for gi, g := range groups {
		prev := probe{}
		for _, r := range g.Ratios {
			_, c, err := measureAuto(opts, unpruned, ratiosOf(g, r))
			if err != nil {
				return nil, err
			}
			step := autoStep(opts, c)
			step.Layer, step.Ratio = g.Layers[0], r
			res.Search = append(res.Search, step)
			progress(opts, "channels:auto: probe %d of %d groups, %s at %g: drop %.2f points, min cosine %.4f", gi+1, len(groups), g.Layers[0], r, step.DropPoints, step.MinCosine)
			p := probe{group: gi, ratio: r, loss: max(budgetShare(opts, c), prev.loss, 0), dist: max(1-step.MinCosine, prev.dist)}
			if !step.Within || p.loss > 1 {
				break
			}
			probes = append(probes, p)
			prev = p
		}
	}
	return probes, nil
}

// explainWhole says in the reports why each group left whole was: its
// cheapest probe broke the budget alone, or the allocation kept stopped
// before it.
func explainWhole(opts Options, groups []prune.ChannelGroup, probes []probe, reports []*schema.PruneReport) {
	why := map[string]string{}
	for _, g := range groups {
		for _, l := range g.Layers {
			why[l] = fmt.Sprintf("channels:auto: pruned alone at %g it breaks the budget", g.Ratios[0])
		}
	}
	for _, p := range probes {
		for _, l := range groups[p.group].Layers {
			why[l] = "channels:auto: not in the largest allocation that keeps the budget"
		}
	}
	for i, r := range reports {
		if !opts.Prune[i].Auto {
			continue
		}
		for j := range r.Layers {
			l := &r.Layers[j]
			switch {
			case l.Skipped != "" || l.Removed > 0:
			case why[l.Node] != "":
				l.Skipped = why[l.Node]
			default:
				l.Skipped = fmt.Sprintf("channels:auto: no ratio up to %g removes any of its channels (kept in multiples of the channel multiple)", slices.Max(prune.AutoRatios))
			}
		}
	}
}

// ratiosOf gives every layer of g the ratio r.
func ratiosOf(g prune.ChannelGroup, r float64) map[string]float64 {
	out := map[string]float64{}
	for _, l := range g.Layers {
		out[l] = r
	}
	return out
}

type prunedModel struct {
	model   []byte
	reports []*schema.PruneReport
}

// measureAuto prunes with channels:auto resolved to the per-layer ratios
// given (every other channel group at 0) and scores the result.
func measureAuto(opts Options, unpruned []byte, ratios map[string]float64) (prunedModel, *compare.Result, error) {
	b, reports, err := pruneBytes(unpruned, opts.Prune, opts.PruneOpts, ratios)
	if err != nil {
		return prunedModel{}, nil, err
	}
	c, err := cost(opts, unpruned, b)
	if err != nil {
		return prunedModel{}, nil, err
	}
	return prunedModel{b, reports}, c, nil
}

// autoStep is a search step's figures and verdict for cost c.
func autoStep(opts Options, c *compare.Result) SearchStep {
	step := SearchStep{MinCosine: minCosine(c)}
	if c.Accuracy != nil {
		step.DropPoints = c.Accuracy.DropPoints
	}
	step.Within = budgetShare(opts, c) <= 1
	return step
}

// budgetShare is the largest share of a budget that c uses: drop points
// over MaxAccuracyDrop, 1 − cosine over 1 − MinCosine. At most 1 keeps the
// budget; +Inf when the drop cannot be measured (no labels).
func budgetShare(opts Options, c *compare.Result) float64 {
	s := math.Inf(-1)
	if opts.MaxAccuracyDrop > 0 {
		if c.Accuracy == nil {
			return math.Inf(1)
		}
		s = max(s, c.Accuracy.DropPoints/opts.MaxAccuracyDrop)
	}
	if opts.MinCosine > 0 {
		s = max(s, (1-minCosine(c))/math.Max(1-opts.MinCosine, 1e-12))
	}
	return s
}

func progress(opts Options, format string, args ...any) {
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, format+"\n", args...)
	}
}
