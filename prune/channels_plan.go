package prune

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
)

// groupPlan is what Channels would do to one group of coupled channels of
// the model as it is, for Reconstruct to choose the channels itself.
type groupPlan struct {
	first     string // the group's first source layer: its name in Options.keep
	sources   []*graph.Node
	channels  int64
	removed   int64
	reason    string // why it is left alone ("" when pruned)
	consumers []consumer
}

// consumer is a layer reading a group's channels through its weight:
// channel c is features [c·span, (c+1)·span) of its input vectors.
type consumer struct {
	node *graph.Node
	span int
}

// planGroups analyzes m as Channels does and returns its groups in graph
// order, with the channels each would lose at ratio.
func planGroups(m *graph.Model, ratio float64, opts Options) ([]groupPlan, error) {
	inf, err := shapes.Infer(m)
	if err != nil {
		return nil, fmt.Errorf("prune channels: %w", err)
	}
	a := analyze(m.Graph, inf.Types)
	var out []groupPlan
	for _, grp := range a.groups() {
		p := groupPlan{first: grp.sources[0].node.Name, channels: grp.channels}
		r := 1.0
		var elems int64
		for _, s := range grp.sources {
			p.sources = append(p.sources, s.node)
			lr := ratio
			if v, ok := opts.PerLayer[s.node.Name]; ok {
				lr = v
			}
			r = min(r, lr)
			n, _ := s.node.Input(1).ConstantTensor().NumElements()
			elems += n
			for _, e := range opts.Exclude {
				if e == s.node.Name || e == s.node.Input(1).Name {
					grp.skip(fmt.Sprintf("excluded (%s)", s.node.Name))
				}
			}
		}
		if grp.reason == "" && opts.MinElements > 0 && elems < opts.MinElements {
			grp.skip(fmt.Sprintf("%d weight elements, fewer than %d", elems, opts.MinElements))
		}
		if grp.reason == "" && r == 0 && len(opts.PerLayer) > 0 {
			grp.skip("ratio 0: kept whole by the per-layer ratios")
		}
		if grp.reason == "" {
			p.removed = removedChannels(grp.channels, r, opts.ChannelStep())
			if p.removed == 0 && int64(math.Floor(r*float64(grp.channels)+1e-9)) > 0 {
				grp.skip(fmt.Sprintf("%d channels: keeping a multiple of %d leaves none to remove", grp.channels, opts.ChannelStep()))
			}
		}
		p.reason = grp.reason
		for _, act := range grp.actions {
			n := act.node
			if act.kind != actSliceInput || act.input != 1 || n.Domain != "" {
				continue
			}
			switch {
			case n.OpType == "Conv" && act.axis == 1:
				w := n.Input(1).ConstantTensor()
				span := 1
				for _, d := range w.Dims[2:] {
					span *= int(d)
				}
				p.consumers = append(p.consumers, consumer{n, span})
			case n.OpType == "Gemm":
				p.consumers = append(p.consumers, consumer{n, int(act.block)})
			}
		}
		out = append(out, p)
	}
	return out, nil
}
