package passes

import (
	"slices"
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
	Run:   runMergeReshapes,
}

// shapeOnlyOps keep the elements in order and change only the shape.
var shapeOnlyOps = []string{"Reshape", "Flatten", "Squeeze", "Unsqueeze"}

func runMergeReshapes(c *Context) (Stats, error) {
	return editGraphs(c.Model, func(e *graphEdit) error {
		for _, n := range e.g.Nodes {
			if !isOp(n, "Reshape") || len(n.Inputs()) != 2 || n.Input(0) == nil {
				continue
			}
			shape, ok := constInts(n.Input(1))
			if !ok || n.AttrInt("allowzero", 0) == 0 && slices.Contains(shape, 0) {
				continue
			}
			r := n.Input(0).Producer()
			if r == nil || r.Domain != "" && r.Domain != "ai.onnx" || !slices.Contains(shapeOnlyOps, r.OpType) ||
				r.Graph() != e.g || e.removed(r) || len(r.Outputs()) != 1 || !e.singleUse(r.Output(0)) || r.Input(0) == nil {
				continue
			}
			n.SetInput(0, r.Input(0))
			e.remove(r)
			e.st.Rewritten++
		}
		return nil
	})
}
