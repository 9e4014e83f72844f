package optimize

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/prune"
)

// globalSamples is how many calibration samples score each group's solo
// pruning in globalChannels.
const globalSamples = 64

// GlobalGroup is one channel group in a global allocation: the channels
// the uniform ratio removes from it, what removing them alone costs, and
// what the allocation removes.
type GlobalGroup struct {
	Layers   []string `json:"layers"`
	Channels int64    `json:"channels"`
	// Uniform is what channels:R removes from the group layer by layer;
	// Removed what the global allocation removes.
	Uniform int64 `json:"uniform_removed"`
	Removed int64 `json:"removed"`
	// ParamsPerChannel is the parameters one removed channel takes with it
	// (its filters, and the consumers' input weights).
	ParamsPerChannel int64 `json:"params_per_channel"`
	// Loss is 1 − min cosine of the model with only this group pruned
	// (reconstructed) at Uniform, on calibration samples.
	Loss float64 `json:"loss"`
}

// globalChannels resolves channels:R with --prune-scope global and
// calibration data into per-layer ratios: the parameters channels:R
// removes layer by layer, allocated across the channel groups by what
// each costs.
//
//  1. Each group is pruned alone at its uniform count, with
//     reconstruction, and scored against the unpruned model (1 − min
//     cosine) on globalSamples calibration samples: its loss per
//     parameter removed.
//  2. Moves of one channel step (Options.ChannelMultiple): a step is taken
//     from the group of the highest loss per parameter that still
//     removes any, and steps are added to the groups of the lowest, at
//     most one step beyond their uniform count each, until the parameters
//     removed are back at least at the uniform total; the move is kept
//     when the losses it moves, scaled linearly, fall. Repeated until no
//     move helps.
//
// A loss is not additive (a group's error compounds with the others'),
// which is why the allocation only moves a step at a time and lets a
// group grow by one step at most: it spares the groups whose loss nothing
// after them corrects (PaddleOCR rec's last conv before its head) and
// spreads their parameters thinly. Same model, data and options, same
// allocation; ties go to graph order.
func globalChannels(opts Options, unpruned []byte, ratio float64, res *PruneResult) (map[string]float64, error) {
	m, err := graph.Parse(unpruned, "")
	if err != nil {
		return nil, err
	}
	popts := opts.PruneOpts
	popts.Data, popts.PerLayer = nil, nil
	ms, err := m.Clone()
	if err != nil {
		return nil, err
	}
	uniform, err := prune.Channels(ms, ratio, popts)
	if err != nil {
		return nil, err
	}
	groups, err := prune.ChannelGroups(m, popts)
	if err != nil {
		return nil, err
	}
	removedBy := map[string]int64{}
	for _, l := range uniform.Layers {
		removedBy[l.Node] = l.Removed
	}
	step := popts.ChannelStep()
	var gs []*GlobalGroup
	for _, g := range groups {
		gg := &GlobalGroup{Layers: g.Layers, Channels: g.Channels, Uniform: removedBy[g.Layers[0]], Removed: removedBy[g.Layers[0]]}
		if gg.Uniform == 0 {
			continue
		}
		// Parameters per channel: the group alone, without data, at its
		// uniform count.
		mg, err := m.Clone()
		if err != nil {
			return nil, err
		}
		po := popts
		po.PerLayer = allocationRatios(groups, []*GlobalGroup{gg})
		r, err := prune.Channels(mg, ratio, po)
		if err != nil {
			return nil, err
		}
		gg.ParamsPerChannel = (r.ParamsBefore - r.ParamsAfter) / gg.Uniform
		gs = append(gs, gg)
	}
	if len(gs) == 0 {
		return nil, fmt.Errorf("channels:%g --prune-scope global: no channel group to prune", ratio)
	}
	for i, gg := range gs {
		po := opts.PruneOpts
		po.PerLayer = allocationRatios(groups, []*GlobalGroup{{Layers: gg.Layers, Channels: gg.Channels, Removed: gg.Uniform}})
		b, _, err := pruneBytes(unpruned, []prune.Method{{Kind: "channels", Ratio: ratio}}, po, nil)
		if err != nil {
			return nil, err
		}
		c, err := calibrationCost(opts, unpruned, b)
		if err != nil {
			return nil, err
		}
		gg.Loss = math.Max(1-minCosine(c), 0)
		progress(opts, "channels global: group %d of %d (%s) alone, %d of %d channels: loss %.5f", i+1, len(gs), gg.Layers[0], gg.Uniform, gg.Channels, gg.Loss)
	}
	allocate(gs, step)
	// The linear count above counts twice a weight both of whose channels
	// go (a pruned group feeding a pruned group): count what the
	// allocation really removes, and add steps, cheapest groups first,
	// until it removes at least what channels:R does.
	target := uniform.ParamsBefore - uniform.ParamsAfter
	order := byDensity(gs)
	for {
		out := allocationRatios(groups, gs)
		mc, err := m.Clone()
		if err != nil {
			return nil, err
		}
		po := popts
		po.PerLayer = out
		r, err := prune.Channels(mc, ratio, po)
		if err != nil {
			return nil, err
		}
		if r.ParamsBefore-r.ParamsAfter >= target {
			res.Global = gs
			return out, nil
		}
		i := slices.IndexFunc(order, func(g *GlobalGroup) bool { return g.Channels-g.Removed-step >= step })
		if i < 0 {
			return nil, fmt.Errorf("channels:%g --prune-scope global: no group can take more channels", ratio)
		}
		order[i].Removed += step
		order = append(order[:i:i], order[i+1:]...) // one more step each, then the next group
		if len(order) == 0 {
			order = byDensity(gs)
		}
	}
}

// allocationRatios are the per-layer ratios of an allocation: each of
// gs's groups loses its Removed channels, every other group none.
func allocationRatios(groups []prune.ChannelGroup, gs []*GlobalGroup) map[string]float64 {
	out := map[string]float64{}
	for _, g := range groups {
		for _, l := range g.Layers {
			out[l] = 0
		}
	}
	for _, gg := range gs {
		for _, l := range gg.Layers {
			out[l] = ratioRemoving(gg.Removed, gg.Channels)
		}
	}
	return out
}

// byDensity orders the groups by loss per parameter removed, cheapest
// first (ties in graph order).
func byDensity(gs []*GlobalGroup) []*GlobalGroup {
	order := slices.Clone(gs)
	slices.SortStableFunc(order, func(a, b *GlobalGroup) int {
		switch da, db := a.density(), b.density(); {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	return order
}

// density is the group's loss per parameter its uniform count removes.
func (g *GlobalGroup) density() float64 {
	return g.Loss / float64(max(g.Uniform*g.ParamsPerChannel, 1))
}

// ratioRemoving is a ratio under which channels:R removes exactly removed
// of c channels (removed keeps a multiple of the channel step, or 0).
func ratioRemoving(removed, c int64) float64 {
	if removed == 0 {
		return 0
	}
	return (float64(removed) + 0.5) / float64(c)
}

// allocate moves channel steps from the groups of the highest loss per
// parameter to those of the lowest (see globalChannels).
func allocate(gs []*GlobalGroup, step int64) {
	var budget int64
	for _, g := range gs {
		g.Removed = g.Uniform
		budget += g.Uniform * g.ParamsPerChannel
	}
	density := (*GlobalGroup).density
	order := byDensity(gs) // cheapest first
	for {
		// The densest group still removing channels gives up one step
		// (or, under a step, all it removes).
		var from *GlobalGroup
		for i := len(order) - 1; i >= 0; i-- {
			if order[i].Removed > 0 {
				from = order[i]
				break
			}
		}
		if from == nil {
			return
		}
		give := min(step, from.Removed)
		if from.Removed%step != 0 {
			give = from.Removed % step
		}
		saved := density(from) * float64(give*from.ParamsPerChannel)
		short := budget - removedParams(gs) + give*from.ParamsPerChannel
		// The cheapest groups take a step each until the total is back.
		var takers []*GlobalGroup
		added := 0.0
		for _, g := range order {
			if short <= 0 {
				break
			}
			if g == from || density(g) >= density(from) || g.Removed >= g.Uniform+step || g.Channels-g.Removed-step < step {
				continue
			}
			takers = append(takers, g)
			added += density(g) * float64(step*g.ParamsPerChannel)
			short -= step * g.ParamsPerChannel
		}
		if short > 0 || added >= saved {
			return
		}
		from.Removed -= give
		for _, g := range takers {
			g.Removed += step
		}
	}
}

func removedParams(gs []*GlobalGroup) int64 {
	var n int64
	for _, g := range gs {
		n += g.Removed * g.ParamsPerChannel
	}
	return n
}

// calibrationCost scores a pruned model against the unpruned one on the
// first globalSamples samples of the calibration data.
func calibrationCost(opts Options, unpruned, pruned []byte) (*compare.Result, error) {
	d := opts.PruneOpts.Data
	dopts := d.Opts
	dopts.Samples = globalSamples
	if d.Opts.Samples > 0 {
		dopts.Samples = min(d.Opts.Samples, globalSamples)
	}
	r, err := compare.Models(compare.Options{
		ModelA: "unpruned", ModelB: "pruned", AInMemory: graph.Serialized{Bytes: unpruned}, BInMemory: graph.Serialized{Bytes: pruned},
		Data: d.Spec, DataOpts: dopts, Atol: map[string]float64{"": 1e9}, Session: ort.DefaultOptions(), ORTLib: opts.ORTLib,
	})
	if err != nil {
		return nil, fmt.Errorf("scoring a group's pruning on the calibration data: %w", err)
	}
	return r, nil
}
