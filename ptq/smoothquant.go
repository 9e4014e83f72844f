package ptq

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// smoothQuant rescales every activation quantize.SmoothGroups finds in m,
// from each channel's largest |value| over the calibration data (one run).
func smoothQuant(opts Options, m *graph.Model) (*schema.SmoothReport, error) {
	alpha := opts.SmoothAlpha
	if alpha == 0 {
		alpha = quantize.DefaultSmoothAlpha
	}
	rep := &schema.SmoothReport{Alpha: alpha}
	groups := quantize.SmoothGroups(m)
	if len(groups) == 0 {
		return rep, nil
	}
	amax := map[string][]float64{}
	var names []string
	for _, g := range groups {
		names = append(names, g.Activation)
		amax[g.Activation] = make([]float64, g.Channels)
	}
	err := streamValues(opts, []*graph.Model{m}, names, func(name string, vals []*graph.Tensor) error {
		f, err := vals[0].Float32s()
		if err != nil {
			return fmt.Errorf("smoothquant: %s: %w", name, err)
		}
		a := amax[name]
		if len(f)%len(a) != 0 {
			return fmt.Errorf("smoothquant: %s has %d values, not a multiple of its %d channels", name, len(f), len(a))
		}
		for i, x := range f {
			c := i % len(a)
			a[c] = math.Max(a[c], math.Abs(float64(x)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		a := amax[g.Activation]
		s, err := quantize.SmoothScales(m, g, a, alpha)
		if err != nil {
			return nil, err
		}
		if err := quantize.Smooth(m, g, s); err != nil {
			return nil, err
		}
		after := make([]float64, len(a))
		for i := range a {
			after[i] = a[i] / s[i]
		}
		rep.Groups = append(rep.Groups, schema.SmoothedAct{SmoothGroup: g, OutlierBefore: outlierRatio(a), OutlierAfter: outlierRatio(after)})
	}
	return rep, nil
}

// outlierRatio is the largest value over the median one.
func outlierRatio(a []float64) float64 {
	s := slices.Clone(a)
	slices.Sort(s)
	med := s[len(s)/2]
	if med == 0 {
		return 0
	}
	return s[len(s)-1] / med
}
