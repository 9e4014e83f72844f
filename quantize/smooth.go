package quantize

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// smoothTarget is a SmoothGroup's nodes and constants.
type smoothTarget struct {
	act     *graph.Value
	readers []*graph.Node
	// scaled are the producer's per-channel constant inputs that take
	// 1/s: (node, input index) pairs.
	scaled []graph.Use
}

// SmoothGroups finds the activations SmoothQuant can rescale in m. Only
// named layers count, so that a report can name them.
func SmoothGroups(m *graph.Model) []schema.SmoothGroup {
	var out []schema.SmoothGroup
	for _, t := range smoothTargets(m.Graph) {
		g := schema.SmoothGroup{Activation: t.act.Name, Producer: t.act.Producer().Name, Channels: channelsOf(t)}
		for _, r := range t.readers {
			g.Layers = append(g.Layers, r.Name)
		}
		out = append(out, g)
	}
	return out
}

// channelsOf is the group's channel count: the length of the producer's
// per-channel constant.
func channelsOf(t smoothTarget) int {
	u := t.scaled[0]
	n, _ := floatTensor(u.Node.Input(u.Index)).NumElements()
	return int(n)
}

func smoothTargets(g *graph.Graph) []smoothTarget {
	var out []smoothTarget
	seen := map[*graph.Value]bool{}
	for _, n := range g.Nodes {
		if !isOp(n, "MatMul", "Gemm") || n.Name == "" {
			continue
		}
		act := n.Input(0)
		for act != nil && isOp(act.Producer(), "Transpose") && keepsLastAxis(act.Producer()) {
			act = act.Producer().Input(0)
		}
		if act == nil || seen[act] {
			continue
		}
		seen[act] = true
		if t, ok := smoothTargetOf(g, act); ok {
			out = append(out, t)
		}
	}
	return out
}

// smoothTargetOf checks that every reader of act is a smoothable layer and
// that its producer can take the inverse scale.
func smoothTargetOf(g *graph.Graph, act *graph.Value) (smoothTarget, bool) {
	t := smoothTarget{act: act}
	if g.IsOutput(act) {
		return t, false
	}
	k := int64(-1)
	var visit func(v *graph.Value) bool
	visit = func(v *graph.Value) bool {
		for _, u := range v.Uses() {
			if isOp(u.Node, "Shape") {
				continue // reads the shape only, which scaling keeps
			}
			// A Transpose that keeps the last axis last moves whole
			// channel vectors: its readers read the same channels.
			if isOp(u.Node, "Transpose") && keepsLastAxis(u.Node) && !g.IsOutput(u.Node.Output(0)) {
				if !visit(u.Node.Output(0)) {
					return false
				}
				continue
			}
			rk, ok := smoothReaderChannels(u)
			if !ok || (k >= 0 && rk != k) {
				return false
			}
			k = rk
			t.readers = append(t.readers, u.Node)
		}
		return true
	}
	if !visit(act) || len(t.readers) == 0 {
		return t, false
	}
	p := act.Producer()
	perChannel := func(v *graph.Value) bool {
		ct := floatTensor(v)
		if ct == nil || len(ct.Dims) == 0 || ct.Dims[len(ct.Dims)-1] != k {
			return false
		}
		n, _ := ct.NumElements()
		return n == k
	}
	switch {
	case isOp(p, "LayerNormalization"):
		if p.AttrInt("axis", -1) != -1 || !perChannel(p.Input(1)) {
			return t, false
		}
		t.scaled = append(t.scaled, graph.Use{Node: p, Index: 1})
		if p.Input(2) != nil {
			if !perChannel(p.Input(2)) {
				return t, false
			}
			t.scaled = append(t.scaled, graph.Use{Node: p, Index: 2})
		}
	case isOp(p, "Mul"):
		i, ok := constSide(p, perChannel)
		if !ok {
			return t, false
		}
		t.scaled = append(t.scaled, graph.Use{Node: p, Index: i})
	case isOp(p, "Add"):
		// y*gamma + beta: both constants take 1/s, and the Mul must feed
		// this Add alone.
		i, ok := constSide(p, perChannel)
		if !ok {
			return t, false
		}
		mul := p.Input(1 - i).Producer()
		if !isOp(mul, "Mul") || len(p.Input(1-i).Uses()) != 1 || g.IsOutput(p.Input(1-i)) {
			return t, false
		}
		j, ok := constSide(mul, perChannel)
		if !ok {
			return t, false
		}
		t.scaled = append(t.scaled, graph.Use{Node: p, Index: i}, graph.Use{Node: mul, Index: j})
	default:
		return t, false
	}
	return t, true
}

// keepsLastAxis says whether a Transpose leaves the last axis last.
func keepsLastAxis(n *graph.Node) bool {
	perm := n.AttrInts("perm")
	return len(perm) > 0 && perm[len(perm)-1] == int64(len(perm)-1)
}

// constSide returns which input of a binary op is a per-channel constant
// (and the other one not a constant).
func constSide(n *graph.Node, perChannel func(*graph.Value) bool) (int, bool) {
	if len(n.Inputs()) != 2 {
		return 0, false
	}
	for i := range 2 {
		if perChannel(n.Input(i)) && floatTensor(n.Input(1-i)) == nil {
			return i, true
		}
	}
	return 0, false
}

// smoothReaderChannels returns the input channels K of a MatMul [.., K] x
// [K, N] or Gemm reading the activation at input 0 with a constant 2-D
// weight.
func smoothReaderChannels(u graph.Use) (int64, bool) {
	n := u.Node
	if u.Index != 0 || !isOp(n, "MatMul", "Gemm") || n.Name == "" {
		return 0, false
	}
	if slices.ContainsFunc(n.Inputs()[1:2], func(v *graph.Value) bool { return v == n.Input(0) }) {
		return 0, false
	}
	w := floatTensor(n.Input(1))
	if w == nil || len(w.Dims) != 2 {
		return 0, false
	}
	if isOp(n, "Gemm") {
		if n.AttrInt("transA", 0) != 0 {
			return 0, false
		}
		if n.AttrInt("transB", 0) != 0 {
			return w.Dims[1], true
		}
	}
	return w.Dims[0], true
}

// SmoothScales are SmoothQuant's per-channel scales for one group:
// s_k = actMax_k^alpha / weightMax_k^(1-alpha), with weightMax_k the
// largest |w| of input channel k over the group's layers; a channel with
// no activation or no weight keeps 1.
func SmoothScales(m *graph.Model, g schema.SmoothGroup, actMax []float64, alpha float64) ([]float64, error) {
	t, err := findSmoothTarget(m, g)
	if err != nil {
		return nil, err
	}
	k := len(actMax)
	wmax := make([]float64, k)
	for _, r := range t.readers {
		w, vals := floatConst(r.Input(1))
		if w == nil {
			return nil, fmt.Errorf("smoothquant %q: weight of %q is not readable", g.Activation, r.Name)
		}
		rows, cols := int(w.Dims[0]), int(w.Dims[1])
		trans := isOp(r, "Gemm") && r.AttrInt("transB", 0) != 0
		for i := range rows {
			for j := range cols {
				ch := i
				if trans {
					ch = j
				}
				if ch < k {
					wmax[ch] = math.Max(wmax[ch], math.Abs(float64(vals[i*cols+j])))
				}
			}
		}
	}
	s := make([]float64, k)
	for i := range s {
		s[i] = 1
		if actMax[i] > 0 && wmax[i] > 0 {
			s[i] = math.Max(math.Pow(actMax[i], alpha)/math.Pow(wmax[i], 1-alpha), 1e-5)
		}
	}
	return s, nil
}

// Smooth rescales group g by s: the producer's constants are divided by
// it, each layer's weight rows multiplied. The function m computes is
// unchanged (up to float rounding).
func Smooth(m *graph.Model, g schema.SmoothGroup, s []float64) error {
	t, err := findSmoothTarget(m, g)
	if err != nil {
		return err
	}
	if len(s) != g.Channels {
		return fmt.Errorf("smoothquant %q: %d scales for %d channels", g.Activation, len(s), g.Channels)
	}
	for _, u := range t.scaled {
		err := rescaleConst(m.Graph, u, func(i, _ int) float64 { return 1 / s[i] })
		if err != nil {
			return fmt.Errorf("smoothquant %q (node %q): %w", g.Activation, u.Node.Name, err)
		}
	}
	for _, r := range t.readers {
		trans := isOp(r, "Gemm") && r.AttrInt("transB", 0) != 0
		cols := int(floatTensor(r.Input(1)).Dims[1])
		err := rescaleConst(m.Graph, graph.Use{Node: r, Index: 1}, func(i, _ int) float64 {
			if trans {
				return s[i%cols]
			}
			return s[i/cols]
		})
		if err != nil {
			return fmt.Errorf("smoothquant %q (node %q): %w", g.Activation, r.Name, err)
		}
	}
	return nil
}

func findSmoothTarget(m *graph.Model, g schema.SmoothGroup) (smoothTarget, error) {
	v := m.Graph.Value(g.Activation)
	if v == nil {
		return smoothTarget{}, fmt.Errorf("smoothquant: no value %q", g.Activation)
	}
	t, ok := smoothTargetOf(m.Graph, v)
	if !ok {
		return t, fmt.Errorf("smoothquant: %q can no longer be smoothed", g.Activation)
	}
	return t, nil
}

// rescaleConst replaces the constant read at u by a new initializer with
// element i multiplied by f(i, n), and drops the old one when nothing else
// reads it.
func rescaleConst(g *graph.Graph, u graph.Use, f func(i, n int) float64) error {
	old := u.Node.Input(u.Index)
	t, vals := floatConst(old)
	if t == nil {
		return fmt.Errorf("input %d is not a constant float32 tensor", u.Index)
	}
	out := make([]float32, len(vals))
	for i, x := range vals {
		out[i] = float32(float64(x) * f(i, len(vals)))
	}
	nt, err := graph.NewFloat32Tensor(g.UniqueName(old.Name+"_smoothed"), slices.Clone(t.Dims), out)
	if err != nil {
		return err
	}
	nv, err := g.AddInitializer(nt)
	if err != nil {
		return err
	}
	u.Node.SetInput(u.Index, nv)
	if old.Const != nil && len(old.Uses()) == 0 && !g.IsOutput(old) {
		return g.RemoveInitializer(old)
	}
	return nil
}
