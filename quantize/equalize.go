package quantize

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// homogeneous are the activations equalization may cross; Clip (Relu6),
// HardSwish, HardSigmoid, Sigmoid and the like cut or bend at fixed
// values and may not.
var homogeneous = []string{"Relu", "LeakyRelu", "PRelu"}

// Equalize equalizes every Conv → (activation) → Conv pair of m's main
// graph whose intermediate values nothing else reads, in graph order, in
// iterations passes (a layer in two pairs is rescaled by both; the paper
// iterates until the ranges settle). It returns the pairs, with the
// spread before the first pass and after the last.
func Equalize(m *graph.Model, iterations int) ([]schema.EqualizePair, error) {
	var pairs []schema.EqualizePair
	before := map[[2]string]float64{} // the first pass's spread, per pair
	for it := range max(iterations, 1) {
		pairs = pairs[:0]
		for _, n := range slices.Clone(m.Graph.Nodes) {
			p, second, ok := equalizePairOf(m.Graph, n)
			if !ok {
				continue
			}
			if err := equalize(m.Graph, n, second, &p); err != nil {
				return nil, fmt.Errorf("equalize %s -> %s (iteration %d): %w", p.First, p.Second, it+1, err)
			}
			if it == 0 {
				before[[2]string{p.First, p.Second}] = p.SpreadBefore
			}
			p.SpreadBefore = before[[2]string{p.First, p.Second}]
			pairs = append(pairs, p)
		}
	}
	return pairs, nil
}

// equalizePairOf finds the pair that starts at n.
func equalizePairOf(g *graph.Graph, n *graph.Node) (schema.EqualizePair, *graph.Node, bool) {
	var p schema.EqualizePair
	if !isOp(n, "Conv") || n.Name == "" || floatTensor(n.Input(1)) == nil {
		return p, nil, false
	}
	if b := n.Input(2); b != nil && floatTensor(b) == nil {
		return p, nil, false
	}
	out := n.Output(0)
	next, ok := onlyReader(g, out)
	if !ok {
		return p, nil, false
	}
	if isOp(next, homogeneous...) {
		if isOp(next, "PRelu") && floatTensor(next.Input(1)) == nil {
			return p, nil, false
		}
		p.Activation = next.Name
		if next, ok = onlyReader(g, next.Output(0)); !ok {
			return p, nil, false
		}
	}
	if !isOp(next, "Conv") || next.Name == "" || next.Input(0) == nil || floatTensor(next.Input(1)) == nil {
		return p, nil, false
	}
	w1, w2 := floatTensor(n.Input(1)), floatTensor(next.Input(1))
	c := w1.Dims[0]
	g2 := next.AttrInt("group", 1)
	switch {
	case g2 == 1 && w2.Dims[1] == c:
	case g2 == c && w2.Dims[0] == c && w2.Dims[1] == 1: // depthwise: channel c's own filter
	default:
		return p, nil, false
	}
	p.First, p.Second, p.Channels = n.Name, next.Name, int(c)
	return p, next, true
}

// onlyReader returns the one node that reads v, when v is not a graph
// output.
func onlyReader(g *graph.Graph, v *graph.Value) (*graph.Node, bool) {
	if v == nil || g.IsOutput(v) || len(v.Uses()) != 1 {
		return nil, false
	}
	return v.Uses()[0].Node, true
}

func equalize(g *graph.Graph, first, second *graph.Node, p *schema.EqualizePair) error {
	w1t, w1 := floatConst(first.Input(1))
	w2t, w2 := floatConst(second.Input(1))
	if w1t == nil || w2t == nil {
		return fmt.Errorf("weights are not readable float32 constants")
	}
	c := p.Channels
	per1 := len(w1) / c // the elements of one output channel of first
	depthwise := second.AttrInt("group", 1) != 1
	r1, r2 := make([]float64, c), make([]float64, c)
	for i, v := range w1 {
		r1[i/per1] = math.Max(r1[i/per1], math.Abs(float64(v)))
	}
	inner2 := 1
	for _, d := range w2t.Dims[2:] {
		inner2 *= int(d)
	}
	chan2 := func(i int) int { // the input channel of second an element reads
		if depthwise {
			return i / inner2
		}
		return (i / inner2) % c
	}
	for i, v := range w2 {
		r2[chan2(i)] = math.Max(r2[chan2(i)], math.Abs(float64(v)))
	}
	s := make([]float64, c)
	for i := range s {
		s[i] = 1
		if r1[i] > 0 && r2[i] > 0 {
			s[i] = math.Sqrt(r1[i] / r2[i])
		}
	}
	p.SpreadBefore = spread(r1)
	after := make([]float64, c)
	for i := range after {
		after[i] = r1[i] / s[i]
	}
	p.SpreadAfter = spread(after)
	if err := rescaleConst(g, graph.Use{Node: first, Index: 1}, func(i, _ int) float64 { return 1 / s[i/per1] }); err != nil {
		return err
	}
	if first.Input(2) != nil {
		if err := rescaleConst(g, graph.Use{Node: first, Index: 2}, func(i, _ int) float64 { return 1 / s[i] }); err != nil {
			return err
		}
	}
	return rescaleConst(g, graph.Use{Node: second, Index: 1}, func(i, _ int) float64 { return s[chan2(i)] })
}

// spread is the largest of xs over the smallest non-zero one.
func spread(xs []float64) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, x := range xs {
		if x > 0 {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	if hi == 0 {
		return 1
	}
	return hi / lo
}
