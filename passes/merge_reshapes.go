package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// mergeReshapes lets a Reshape read past a Reshape, Flatten, Squeeze or
// Unsqueeze that only feeds it: those keep the elements in order and
// change only the shape, so Reshape(r(x), s) is Reshape(x, s), and r goes.
//
// That holds when s does not depend on r's output shape: s must be a
// constant without 0 entries (a 0 copies the input's dim) unless the
// Reshape has allowzero=1, which makes 0 literal. A -1 is fine: the
// element count is the same.
var mergeReshapes = &Pass{
	Name:  "merge-reshapes",
	Doc:   "let a Reshape read past a Reshape, Flatten, Squeeze or Unsqueeze feeding only it",
	Level: 1,
	Form:  LocalRule,
	Run:   runMergeReshapes,
}

// shapeOnlyOps keep the elements in order and change only the shape.
var shapeOnlyOps = []string{"Reshape", "Flatten", "Squeeze", "Unsqueeze"}

func runMergeReshapes(c *Context) (Stats, error) {
	return Rule[reshapeChain]{OpTypes: []string{"Reshape"}, Match: matchReshapeChain, Apply: readPastFirst}.apply(c.Model)
}

// matchReshapeChain matches a Reshape to a constant shape (with no 0 that
// would copy a dimension, unless allowzero) of a value only a shape-only
// op computes for it.
func matchReshapeChain(e *graphEdit, n *graph.Node) (reshapeChain, bool) {
	if len(n.Inputs()) != 2 || n.Input(0) == nil {
		return reshapeChain{}, false
	}
	shape, ok := constInts(n.Input(1))
	if !ok || n.AttrInt("allowzero", 0) == 0 && slices.Contains(shape, 0) {
		return reshapeChain{}, false
	}
	r := e.absorbable(n.Input(0), shapeOnlyOps...)
	return reshapeChain{reshape: n, first: r}, r != nil
}

// reshapeChain is a Reshape and the shape-only op before it.
type reshapeChain struct{ reshape, first *graph.Node }

// readPastFirst lets the Reshape read the first op's input and removes
// that op.
func readPastFirst(e *graphEdit, c reshapeChain) (Stats, error) {
	c.reshape.SetInput(0, c.first.Input(0))
	e.remove(c.first)
	return Stats{Rewritten: 1}, nil
}
