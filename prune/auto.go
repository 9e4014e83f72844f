package prune

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// ChannelGroup is a set of coupled layers that channels:R prunes with the
// same channels, so they share one ratio: channels:auto gives each group
// its own.
type ChannelGroup struct {
	Layers   []string `json:"layers"` // the source layers, first one naming the group
	Channels int64    `json:"channels"`
	// Ratios are the AutoRatios that remove channels from the group,
	// smallest first, one per distinct count removed (Removed): with the
	// rounding to the channel multiple, several ratios often remove the
	// same channels, and only the smallest of them is kept.
	Ratios  []float64 `json:"ratios"`
	Removed []int64   `json:"removed"`
}

// ChannelGroups lists the groups of m that channels:R would prune at some
// ratio of AutoRatios, in graph order (opts.PerLayer is ignored; Exclude,
// MinElements and ChannelMultiple apply).
func ChannelGroups(m *graph.Model, opts Options) ([]ChannelGroup, error) {
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("prune channels: the model is invalid: %w", err)
	}
	opts.PerLayer = nil
	ratios := slices.Clone(AutoRatios)
	slices.Sort(ratios)
	var out []ChannelGroup
	at := map[string]int{}
	for _, r := range ratios {
		plans, err := planGroups(m, r, opts)
		if err != nil {
			return nil, err
		}
		for _, p := range plans {
			if p.reason != "" || p.removed == 0 {
				continue
			}
			i, ok := at[p.first]
			if !ok {
				g := ChannelGroup{Channels: p.channels}
				for _, s := range p.sources {
					g.Layers = append(g.Layers, s.Name)
				}
				i = len(out)
				at[p.first] = i
				out = append(out, g)
			}
			g := &out[i]
			if n := len(g.Removed); n > 0 && g.Removed[n-1] == p.removed {
				continue
			}
			g.Ratios = append(g.Ratios, r)
			g.Removed = append(g.Removed, p.removed)
		}
	}
	// Graph order: the order of planGroups, whatever ratio found the group.
	plans, err := planGroups(m, 0, opts)
	if err != nil {
		return nil, err
	}
	rank := map[string]int{}
	for i, p := range plans {
		rank[p.first] = i
	}
	slices.SortStableFunc(out, func(a, b ChannelGroup) int { return rank[a.Layers[0]] - rank[b.Layers[0]] })
	return out, nil
}
