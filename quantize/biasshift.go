package quantize

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// shiftBias adds delta, one value per output channel, to the bias of a
// weighted node about to be quantized (bias correction: Options.BiasShift).
// A Conv or Gemm without a bias gets one; a MatMul's bias is the constant
// of the Add that alone reads its output. It reports whether the node
// changed, and why not when it could not.
func shiftBias(g *graph.Graph, n *graph.Node, delta []float32) (bool, string) {
	w := floatTensor(n.Input(1))
	if w == nil || len(w.Dims) < 2 {
		return false, "no constant weight"
	}
	var channels int64
	switch {
	case isOp(n, "Conv"):
		channels = w.Dims[0]
	case isOp(n, "Gemm"):
		channels = w.Dims[1]
		if n.AttrInt("transB", 0) != 0 {
			channels = w.Dims[0]
		}
	case isOp(n, "MatMul"):
		channels = w.Dims[len(w.Dims)-1]
	default:
		return false, "not a Conv, Gemm or MatMul"
	}
	if int64(len(delta)) != channels {
		return false, fmt.Sprintf("%d corrections for %d channels", len(delta), channels)
	}
	add := func(v *graph.Value) ([]float32, []int64, bool) {
		if v == nil {
			return make([]float32, channels), []int64{channels}, true
		}
		t, vals := floatConst(v)
		if t == nil || int64(len(vals)) != channels || t.Dims[len(t.Dims)-1] != channels {
			return nil, nil, false
		}
		return slices.Clone(vals), slices.Clone(t.Dims), true
	}
	var at graph.Use
	switch {
	case isOp(n, "Conv", "Gemm"):
		at = graph.Use{Node: n, Index: 2}
	default:
		out := n.Output(0)
		if len(out.Uses()) != 1 || g.IsOutput(out) {
			return false, "its output has no bias Add of its own"
		}
		u := out.Uses()[0]
		if !isOp(u.Node, "Add") || len(u.Node.Inputs()) != 2 || floatTensor(u.Node.Input(1-u.Index)) == nil {
			return false, "its output has no bias Add of its own"
		}
		at = graph.Use{Node: u.Node, Index: 1 - u.Index}
	}
	old := at.Node.Input(at.Index)
	vals, dims, ok := add(old)
	if !ok {
		return false, "its bias is not one constant per channel"
	}
	for i := range vals {
		vals[i] += delta[i]
	}
	t, err := graph.NewFloat32Tensor(g.UniqueName(n.Name+"_bias_corrected"), dims, vals)
	if err != nil {
		return false, err.Error()
	}
	nv, err := g.AddInitializer(t)
	if err != nil {
		return false, err.Error()
	}
	if at.Index == len(at.Node.Inputs()) {
		at.Node.AddInput(nv)
	} else {
		at.Node.SetInput(at.Index, nv)
	}
	if old != nil && old.Const != nil && len(old.Uses()) == 0 && !g.IsOutput(old) {
		_ = g.RemoveInitializer(old)
	}
	return true, ""
}
