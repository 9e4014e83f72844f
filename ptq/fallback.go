package ptq

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	"optc/compare"
	"optc/graph"
	"optc/internal/jsonfloat"
	"optc/quantize"
)

// Sensitivity is what quantizing one layer alone costs.
type Sensitivity struct {
	Node       string          `json:"node"`
	DropPoints float64         `json:"drop_points"` // 0 without labels
	MinCosine  jsonfloat.Float `json:"min_cosine"`  // over the outputs; NaN when one had no finite pair
}

func (o Options) wantsControl() bool { return o.MaxAccuracyDrop > 0 || o.MinCosine > 0 }

// meets reports whether a measurement satisfies the accuracy criteria.
func (o Options) meets(r *compare.Result) bool {
	if r == nil {
		return false
	}
	for _, s := range r.Outputs {
		if s.NewNonFinite > 0 {
			return false // NaN/Inf where float is finite meets no criterion
		}
	}
	if o.MaxAccuracyDrop > 0 && (r.Accuracy == nil || r.Accuracy.DropPoints > o.MaxAccuracyDrop) {
		return false
	}
	return o.MinCosine <= 0 || float64(minCosine(r)) >= o.MinCosine
}

// minCosine is the worst cosine over the outputs: NaN (no finite pair)
// stays NaN, meets no criterion and sorts as the most sensitive.
func minCosine(r *compare.Result) jsonfloat.Float {
	c := jsonfloat.Float(1)
	for _, s := range r.Outputs {
		c = min(c, s.Cosine)
	}
	return c
}

// quantizeWith quantizes a fresh copy of the float model.
func quantizeWith(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, graph.Serialized, *quantize.Report, error) {
	var none graph.Serialized
	q, err := float.Parse()
	if err != nil {
		return nil, none, nil, err
	}
	rep, err := quantize.Apply(q, ranges, opts)
	if err != nil {
		return nil, none, nil, err
	}
	if err := q.Verify(); err != nil {
		return nil, none, nil, fmt.Errorf("quantized model is invalid (a bug in optc): %w", err)
	}
	b, err := graph.MarshalReferencing(q)
	return q, b, rep, err
}

// fallBack measures every named weighted layer quantized alone, then keeps
// the most sensitive layers float, one more at a time, until the criteria
// hold (or every layer is float, which is an error).
func fallBack(opts Options, float graph.Serialized, ranges map[string][2]float64, res *Result,
	measure func(graph.Serialized) (*compare.Result, error)) (*graph.Model, graph.Serialized, error) {
	m, err := float.Parse()
	if err != nil {
		return nil, graph.Serialized{}, err
	}
	var layers []string
	for _, n := range m.Graph.Nodes {
		if n.Name != "" && slices.Contains([]string{"Conv", "ConvTranspose", "Gemm", "MatMul"}, n.OpType) {
			layers = append(layers, n.Name)
		}
	}
	exclude := func(names []string) quantize.Options { return excluding(opts.Quant, names) }
	for _, l := range layers {
		_, b, _, err := quantizeWith(float, ranges, exclude(without(layers, l)))
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		r, err := measure(b)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		s := Sensitivity{Node: l, MinCosine: minCosine(r)}
		if r.Accuracy != nil {
			s.DropPoints = r.Accuracy.DropPoints
		}
		res.Sensitivity = append(res.Sensitivity, s)
	}
	order := slices.Clone(res.Sensitivity)
	slices.SortStableFunc(order, func(a, b Sensitivity) int {
		switch {
		case a.DropPoints != b.DropPoints:
			if a.DropPoints > b.DropPoints {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.MinCosine, b.MinCosine) // NaN first
	})
	for k := 1; k < len(order); k++ {
		var kept []string
		for _, s := range order[:k] {
			kept = append(kept, s.Node)
		}
		q, b, rep, err := quantizeWith(float, ranges, exclude(kept))
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		r, err := measure(b)
		if err != nil {
			return nil, graph.Serialized{}, err
		}
		if opts.meets(r) {
			res.Quantize, res.Accuracy, res.FellBack = rep, r, kept
			return q, b, nil
		}
	}
	return nil, graph.Serialized{}, fmt.Errorf("no INT8 model meets the accuracy criterion with any layer quantized (layer sensitivities: %v)", res.Sensitivity)
}

// excluding is q with the named nodes kept float (exact names).
func excluding(q quantize.Options, names []string) quantize.Options {
	q.Exclude = slices.Clone(q.Exclude)
	for _, n := range names {
		q.Exclude = append(q.Exclude, "^"+regexp.QuoteMeta(n)+"$")
	}
	return q
}

func without(xs []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(xs), func(y string) bool { return y == x })
}
