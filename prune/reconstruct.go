package prune

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// Reconstruct is channel pruning that keeps accuracy without retraining
// (He et al. 2017; ThiNet): group by group in graph order, the layers that
// read a group's channels (its consumers) are run in ONNX Runtime on the
// calibration data, in the model as pruned so far and in the unpruned
// model, and only fixed-size statistics are kept: the Gram of their input
// vectors and the cross Gram with the unpruned ones. The channels removed
// are those whose loss changes the consumers' outputs least (greedy over
// the channels' covariance-weighted contributions, pairs included); the
// consumers are then refit by least squares, bias included, so that their
// outputs on the pruned inputs match the unpruned model's:
//
//	min ‖W′·x̃_kept + b′ − (W·x + b)‖² + λ‖W′ − W_kept‖²
//
// λ (Data.Damp times the mean of the Gram's diagonal) pulls directions the
// data does not determine back to the original weights. What Channels
// prunes, skips and reports is unchanged; the layers' Refit says what was
// refit. A group whose consumers cannot be reconstructed (a grouped or 1-D
// conv reading them) keeps L1 selection and says so.
func Reconstruct(m *graph.Model, ratio float64, opts Options, d *Data) (*schema.PruneReport, error) {
	if ratio < 0 || ratio >= 1 {
		return nil, fmt.Errorf("prune channels: ratio %g is not in [0, 1)", ratio)
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("prune channels: the model is invalid: %w", err)
	}
	ref, err := m.Clone()
	if err != nil {
		return nil, err
	}
	rep := &schema.PruneReport{Method: Method{Kind: "channels", Ratio: ratio}.String(), ParamsBefore: totalParams(m)}
	initial, err := planGroups(m, ratio, opts)
	if err != nil {
		return nil, err
	}
	params := map[string]int64{} // weight elements before any slicing
	for _, p := range initial {
		for _, s := range p.sources {
			params[s.Name], _ = s.Input(1).ConstantTensor().NumElements()
		}
	}
	done := map[string]bool{}
	refit := map[string]string{}
	changed := false
	for {
		plans, err := planGroups(m, ratio, opts)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(plans, func(p groupPlan) bool { return !done[p.first] && p.reason == "" && p.removed > 0 })
		if i < 0 {
			break
		}
		p := plans[i]
		done[p.first] = true
		how, err := reconstructGroup(m, ref, p, changed, opts, d)
		if err != nil {
			return nil, fmt.Errorf("prune channels: group of %s: %w", p.first, err)
		}
		for _, s := range p.sources {
			refit[s.Name] = how
		}
		changed = true
	}
	// The report: every layer of the initial analysis, as Channels says.
	for _, p := range initial {
		for _, s := range p.sources {
			l := schema.PruneLayer{Node: s.Name, Op: s.OpType, Weight: s.Input(1).Name, Params: params[s.Name], Ratio: ratio, Skipped: p.reason}
			if r, ok := opts.PerLayer[s.Name]; ok {
				l.Ratio = r
			}
			if done[p.first] {
				l.Removed, l.Refit = p.removed, refit[s.Name]
			}
			rep.Layers = append(rep.Layers, l)
		}
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("prune channels: the pruned model fails Verify (a bug): %w", err)
	}
	rep.ParamsAfter = totalParams(m)
	return rep, nil
}

// consumerStats is one consumer of a group with its input statistics.
type consumerStats struct {
	consumer
	in   *layerInput
	lay  *layout
	w    []float32 // its weight before slicing
	dims []int64
}

// reconstructGroup prunes one group: statistics, channel choice, slicing,
// refit. It returns what Layer.Refit says.
func reconstructGroup(m, ref *graph.Model, p groupPlan, changed bool, opts Options, d *Data) (string, error) {
	var cs []*consumerStats
	var lis []*layerInput
	var why string
	for _, c := range p.consumers {
		t := c.node.Input(1).ConstantTensor()
		pt, err := newPatcher(c.node, t.Dims)
		var lay *layout
		if err == nil {
			lay, err = newLayout(c.node, t.Dims, pt, false)
		}
		if err != nil {
			why = err.Error()
			continue
		}
		w, err := t.Float32s()
		if err != nil {
			return "", err
		}
		cs = append(cs, &consumerStats{consumer: c, lay: lay, w: w, dims: t.Dims,
			in: &layerInput{name: c.node.Name, value: c.node.Input(0).Name, p: pt}})
		lis = append(lis, cs[len(cs)-1].in)
	}
	if len(cs) < len(p.consumers) || len(cs) == 0 {
		// Keep Channels' own choice; nothing is refit.
		if why == "" {
			why = "no layer reads its channels through a weight"
		}
		o := opts
		o.keep = nil
		o.Exclude = nil
		if _, err := channelsOnly(m, p, o, nil); err != nil {
			return "", err
		}
		return "none: " + why, nil
	}
	var refModel *graph.Model
	if changed {
		refModel = ref // the inputs differ from the unpruned ones
	}
	if err := d.inputGrams(m, refModel, lis); err != nil {
		return "", err
	}
	keep, err := selectChannels(cs, int(p.channels), int(p.removed), d.damp())
	if err != nil {
		return "", err
	}
	if _, err := channelsOnly(m, p, opts, keep); err != nil {
		return "", err
	}
	for _, c := range cs {
		if err := refitConsumer(m.Graph, c, keep, d.damp()); err != nil {
			return "", fmt.Errorf("refitting %s: %w", c.node, err)
		}
	}
	return "least squares", nil
}

// channelsOnly runs Channels on the one group p with the given channels
// kept (nil: Channels' L1 choice).
func channelsOnly(m *graph.Model, p groupPlan, opts Options, keep []int) (*schema.PruneReport, error) {
	if keep == nil {
		keep = l1Keep(p)
		if keep == nil {
			return nil, fmt.Errorf("cannot score the channels of %s", p.first)
		}
	}
	opts.keep = map[string][]int{p.first: keep}
	opts.PerLayer = nil
	rep, err := Channels(m, ratioFor(p), opts)
	if err != nil {
		return nil, err
	}
	for _, l := range rep.Layers {
		if l.Node == p.first && l.Removed == 0 {
			return nil, fmt.Errorf("%s was not pruned: %s", p.first, l.Skipped)
		}
	}
	return rep, nil
}

// ratioFor is a ratio that makes Channels remove exactly p.removed of
// p.channels (the rounding to the channel multiple already applied).
func ratioFor(p groupPlan) float64 {
	return (float64(p.removed) + 0.5) / float64(p.channels)
}

// l1Keep is Channels' own choice for p, by the sources' L1 norms.
func l1Keep(p groupPlan) []int {
	grp := &group{channels: p.channels}
	for _, s := range p.sources {
		grp.sources = append(grp.sources, &source{node: s, gemm: s.OpType == "Gemm"})
	}
	keep, err := keepChannels(grp, p.removed)
	if err != nil {
		return nil
	}
	return keep
}

// selectChannels chooses the channels to keep by group OBS
// (chooseChannelsOBS), or by the covariance greedy (chooseChannels) when a
// consumer's input is too large to invert quickly.
func selectChannels(cs []*consumerStats, channels, removed int, damp float64) ([]int, error) {
	for _, c := range cs {
		if c.in.p.dim > obsSelectMaxDim {
			return chooseChannels(cs, channels, removed), nil
		}
	}
	return chooseChannelsOBS(cs, channels, removed, damp)
}
