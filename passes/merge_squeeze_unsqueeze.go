package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// mergeSqueezeUnsqueeze removes a Squeeze followed by an Unsqueeze of the
// same axes, and an Unsqueeze followed by a Squeeze of the same axes: each
// pair gives back its input. Converters emit such pairs around ops that
// want another rank.
//
// Axes are read from the input (opset 13) or the attribute (before) and
// must be constant. Both lists count against the same rank (the Squeeze's
// input rank, or the Unsqueeze's output rank), so equal lists mean equal
// axes; lists that differ only in sign are compared when that rank is
// known. A Squeeze without axes (drop every 1) counts only first and with
// fully known dims. The first node must feed only the second.
var mergeSqueezeUnsqueeze = &Pass{
	Name:   "merge-squeeze-unsqueeze",
	Doc:    "remove Squeeze/Unsqueeze pairs over the same axes",
	Level:  1,
	Shapes: DeclaredShapes,
	Run:    runMergeSqueezeUnsqueeze,
}

func runMergeSqueezeUnsqueeze(c *Context) (Stats, error) {
	return editGraphs(c.Model, func(e *graphEdit) error {
		for _, n := range e.g.Nodes {
			if !isOp(n, "Squeeze") && !isOp(n, "Unsqueeze") || len(n.Outputs()) != 1 || n.Input(0) == nil {
				continue
			}
			first := n.Input(0).Producer()
			want := "Squeeze"
			if n.OpType == "Squeeze" {
				want = "Unsqueeze"
			}
			if !isOp(first, want) || first.Graph() != e.g || e.removed(first) || len(first.Outputs()) != 1 ||
				!e.singleUse(first.Output(0)) || first.Input(0) == nil {
				continue
			}
			x := first.Input(0)
			if !sameSqueezeAxes(first, n) || !e.canBypass(n.Output(0), x) {
				continue
			}
			e.bypass(n.Output(0), x)
			e.remove(n)
			e.remove(first)
		}
		return nil
	})
}

// sameSqueezeAxes reports whether second undoes first.
func sameSqueezeAxes(first, second *graph.Node) bool {
	dims, rankKnown := knownDims(first.Input(0))
	a, ok := squeezeAxes(first)
	if !ok && first.OpType == "Squeeze" && rankKnown && len(first.Inputs()) == 1 && first.Attr("axes") == nil {
		// Squeeze without axes drops every dim of size 1.
		for i, d := range dims {
			switch {
			case d == 1:
				a = append(a, int64(i))
			case d < 0:
				return false
			}
		}
		ok = true
	}
	b, ok2 := squeezeAxes(second)
	if !ok || !ok2 || len(a) == 0 || len(a) != len(b) {
		return false
	}
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	if slices.Equal(a, b) {
		return true
	}
	if !rankKnown {
		return false
	}
	rank := int64(len(dims)) // the basis of both lists
	if first.OpType == "Unsqueeze" {
		rank += int64(len(a))
	}
	norm := func(axes []int64) []int64 {
		out := make([]int64, len(axes))
		for i, ax := range axes {
			if ax < 0 {
				ax += rank
			}
			out[i] = ax
		}
		slices.Sort(out)
		return out
	}
	na, nb := norm(a), norm(b)
	for i := range na {
		if na[i] < 0 || na[i] >= rank || i > 0 && na[i] == na[i-1] {
			return false
		}
	}
	return slices.Equal(na, nb)
}

// squeezeAxes returns the constant axes of a Squeeze or Unsqueeze; false
// when they are absent or not constant.
func squeezeAxes(n *graph.Node) ([]int64, bool) {
	switch {
	case len(n.Inputs()) == 2:
		return constInts(n.Input(1))
	case len(n.Inputs()) == 1 && n.Attr("axes") != nil:
		a := n.Attr("axes")
		return a.Ints, a.Type == graph.AttrInts
	}
	return nil, false
}
