package passes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// eliminateNoop removes nodes that return their first input unchanged:
// Reshape to the input's own shape, Transpose with the identity
// permutation, Cast and CastLike to the input's own type, Pad with all-zero
// pads, Slice over the whole of every axis it names, and Concat of one
// input. Shape arithmetic in exported models produces them often.
//
// Each needs what makes it a no-op to be known: constant shapes, pads,
// starts and ends, and the input's dims or element type from a constant or
// a declared type. When that is unknown the node stays. A node whose output
// a graph returns stays unless its input can take the output's name (see
// graphEdit.canBypass).
var eliminateNoop = &Pass{
	Name:   "eliminate-noop",
	Doc:    "remove Reshape, Transpose, Cast, Pad, Slice and Concat nodes that change nothing",
	Level:  1,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runEliminateNoop,
}

func runEliminateNoop(c *Context) (Stats, error) {
	types := c.Declared()
	match := func(e *graphEdit, n *graph.Node) (*graph.Node, bool) {
		return n, len(n.Outputs()) == 1 && isNoop(types, n) && e.canBypass(n.Output(0), n.Input(0))
	}
	return Rule[*graph.Node]{OpTypes: noopOps, Match: match, Apply: bypassNode}.apply(c.Model)
}

// noopOps are the ops isNoop knows.
var noopOps = []string{"Reshape", "Transpose", "Cast", "CastLike", "Pad", "Slice", "Concat"}

// isNoop reports whether n is known to return input 0 unchanged.
func isNoop(types declaredTypes, n *graph.Node) bool {
	if n.Domain != "" && n.Domain != "ai.onnx" || n.Input(0) == nil {
		return false
	}
	switch n.OpType {
	case "Reshape":
		return len(n.Inputs()) == 2 && noopReshape(types, n)
	case "Transpose":
		return len(n.Inputs()) == 1 && noopTranspose(types, n)
	case "Cast":
		elem, ok := types.elem(n.Input(0))
		return len(n.Inputs()) == 1 && ok && n.AttrInt("to", -1) == int64(elem)
	case "CastLike":
		elem, ok := types.elem(n.Input(0))
		target, ok2 := types.elem(n.Input(1))
		return len(n.Inputs()) == 2 && ok && ok2 && elem == target
	case "Pad":
		return noopPad(types, n)
	case "Slice":
		return noopSlice(types, n)
	case "Concat":
		return len(n.Inputs()) == 1
	}
	return false
}

// noopReshape: every target dim is the input's (0 copies it unless
// allowzero), and a -1 can only be the input's own dim because the others
// are known and non-zero.
func noopReshape(types declaredTypes, n *graph.Node) bool {
	dims, ok := types.dims(n.Input(0))
	shape, ok2 := constInts(n.Input(1))
	if !ok || !ok2 || len(shape) != len(dims) {
		return false
	}
	allowZero := n.AttrInt("allowzero", 0) != 0
	infer := -1
	for i, s := range shape {
		switch {
		case s == 0 && !allowZero:
		case s == -1 && infer < 0:
			infer = i
		case s >= 0 && dims[i] == s:
		default:
			return false
		}
	}
	if infer >= 0 {
		for i, d := range dims {
			if i != infer && d <= 0 {
				return false
			}
		}
	}
	return true
}

// noopTranspose: the permutation is the identity (or absent, which
// reverses the axes, on a tensor of rank 0 or 1).
func noopTranspose(types declaredTypes, n *graph.Node) bool {
	a := n.Attr("perm")
	if a == nil {
		dims, ok := types.dims(n.Input(0))
		return ok && len(dims) <= 1
	}
	if a.Type != graph.AttrInts {
		return false
	}
	for i, p := range a.Ints {
		if p != int64(i) {
			return false
		}
	}
	return true
}

// noopPad: pads (input 1 from opset 11, an attribute before) are all
// zero; mode, value and axes do not matter then.
func noopPad(types declaredTypes, n *graph.Node) bool {
	var pads []int64
	switch {
	case n.Input(1) != nil:
		p, ok := constInts(n.Input(1))
		if !ok {
			return false
		}
		pads = p
	case len(n.Inputs()) == 1 && n.Attr("pads") != nil:
		pads = n.AttrInts("pads")
	default:
		return false
	}
	if len(pads)%2 != 0 {
		return false
	}
	if dims, ok := types.dims(n.Input(0)); ok && n.Input(3) == nil && len(pads) != 2*len(dims) {
		return false
	}
	for _, p := range pads {
		if p != 0 {
			return false
		}
	}
	return true
}

// noopSlice: steps are 1 and, on every axis named, the start clamps to 0
// and the end to the dim (the largest int64 is an end past any dim).
func noopSlice(types declaredTypes, n *graph.Node) bool {
	var starts, ends, axes, steps []int64
	if len(n.Inputs()) >= 3 {
		var ok bool
		if starts, ok = constInts(n.Input(1)); !ok {
			return false
		}
		if ends, ok = constInts(n.Input(2)); !ok {
			return false
		}
		if v := n.Input(3); v != nil {
			if axes, ok = constInts(v); !ok {
				return false
			}
		}
		if v := n.Input(4); v != nil {
			if steps, ok = constInts(v); !ok {
				return false
			}
		}
	} else if len(n.Inputs()) == 1 && n.Attr("starts") != nil && n.Attr("ends") != nil {
		starts, ends, axes = n.AttrInts("starts"), n.AttrInts("ends"), n.AttrInts("axes")
	} else {
		return false
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return false
	}
	dims, rankKnown := types.dims(n.Input(0))
	seen := map[int64]bool{}
	for i, ax := range axes {
		if ax < 0 {
			if !rankKnown {
				return false
			}
			ax += int64(len(dims))
		}
		if ax < 0 || rankKnown && ax >= int64(len(dims)) || seen[ax] {
			return false
		}
		seen[ax] = true
		if steps != nil && steps[i] != 1 {
			return false
		}
		dim := int64(-1)
		if rankKnown {
			dim = dims[ax]
		}
		start, end := starts[i], ends[i]
		if !(start == 0 || start < 0 && dim >= 0 && start <= -dim) {
			return false
		}
		if !(end == math.MaxInt64 || dim >= 0 && end >= dim) {
			return false
		}
	}
	return true
}
