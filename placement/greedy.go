package placement

import (
	"fmt"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// regionKind groups regions that tend to win or lose together in INT8:
// dense kxk convolutions pay, depthwise and 1x1 ones often do not, and
// each pass-through op type on its own.
func regionKind(n *graph.Node) string {
	if n.OpType != "Conv" || n.Input(1) == nil {
		return n.OpType
	}
	w := n.Input(1).ConstantTensor()
	if w == nil || len(w.Dims) != 4 {
		return n.OpType
	}
	switch {
	case n.AttrInt("group", 1) > 1 && w.Dims[1] == 1:
		return "Conv depthwise"
	case w.Dims[2] == 1 && w.Dims[3] == 1:
		return "Conv 1x1"
	}
	return fmt.Sprintf("Conv %dx%d", w.Dims[2], w.Dims[3])
}

// greedy starts from all-INT8 and reverts one kind of region at a time
// (in graph order of first appearance), keeping a revert when the whole
// model wins at the deployment's batch sizes by the rule INT8 must meet
// against FP32 (timePair) and the accuracy budget holds. A step starts only when its predicted cost (a candidate
// build, an A/B timing, an accuracy check) ends before stop. It returns
// nil when no revert was kept.
func greedy(opts Options, fp, all *quantized, clk *clock, stop time.Time,
	build func(float map[int]bool, regions []schema.Region) (*quantized, error), accept func(graph.Serialized) (bool, error)) (*quantized, []schema.GreedyStep, error) {
	var kinds []string
	byKind := map[string][]int{}
	for i, n := range fp.nodes {
		k := regionKind(n)
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], all.regions[i].Index)
	}
	if len(kinds) < 2 {
		return nil, nil, nil // reverting the only kind is the FP32 candidate
	}
	cur, float := all, map[int]bool{}
	var steps []schema.GreedyStep
	for ki, k := range kinds {
		step := fmt.Sprintf("greedy step %q", k)
		// Each step's turns end at its part of the time left, so that one
		// step does not take the share of those after it.
		stepStop := time.Now().Add(time.Until(stop) / time.Duration(len(kinds)-ki))
		if !clk.fits(step, clk.quantize+clk.pairTiming(opts.Batches)+clk.accept, time.Until(clk.deadline)-time.Until(stop)) {
			break
		}
		trial := map[int]bool{}
		for i := range float {
			trial[i] = true
		}
		for _, i := range byKind[k] {
			trial[i] = true
		}
		if len(trial) == len(all.regions) {
			continue
		}
		opts.progress("placement: greedy step %d of %d: %s regions float", ki+1, len(kinds), k)
		next, err := build(trial, all.regions)
		if err != nil {
			return nil, nil, err
		}
		timings, faster, err := timePair(opts, clk, cur.serialized, next.serialized, stepStop)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", step, err)
		}
		s := schema.GreedyStep{Kind: k, Regions: len(byKind[k]), Timings: timings}
		if faster {
			if s.Kept, err = accept(next.serialized); err != nil {
				return nil, nil, err
			}
		}
		if s.Kept {
			cur, float = next, trial
		}
		steps = append(steps, s)
	}
	if cur == all {
		return nil, steps, nil
	}
	return cur, steps, nil
}
