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
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runMergeSqueezeUnsqueeze,
}

func runMergeSqueezeUnsqueeze(c *Context) (Stats, error) {
	types := c.Declared()
	match := func(e *graphEdit, n *graph.Node) ([2]*graph.Node, bool) { return matchSqueezePair(e, n, types) }
	return Rule[[2]*graph.Node]{OpTypes: []string{"Squeeze", "Unsqueeze"}, Match: match, Apply: removeSqueezePair}.apply(c.Model)
}

// matchSqueezePair matches a Squeeze (Unsqueeze) n reading the one output
// of an Unsqueeze (Squeeze) over the same axes, so that n's readers may
// read the first op's input. It returns the first op and n.
func matchSqueezePair(e *graphEdit, n *graph.Node, types declaredTypes) ([2]*graph.Node, bool) {
	if len(n.Outputs()) != 1 || n.Input(0) == nil {
		return [2]*graph.Node{}, false
	}
	want := "Squeeze"
	if n.OpType == "Squeeze" {
		want = "Unsqueeze"
	}
	first := e.absorbable(n.Input(0), want)
	if first == nil || !sameSqueezeAxes(first, n, types) || !e.canBypass(n.Output(0), first.Input(0)) {
		return [2]*graph.Node{}, false
	}
	return [2]*graph.Node{first, n}, true
}

// removeSqueezePair removes both ops of a matched pair.
func removeSqueezePair(e *graphEdit, pair [2]*graph.Node) (Stats, error) {
	first, second := pair[0], pair[1]
	e.bypass(second.Output(0), first.Input(0))
	e.remove(second)
	e.remove(first)
	return Stats{}, nil
}

// sameSqueezeAxes reports whether second undoes first.
func sameSqueezeAxes(first, second *graph.Node, types declaredTypes) bool {
	dims, rankKnown := types.dims(first.Input(0))
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
