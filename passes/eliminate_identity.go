package passes

import (
	"github.com/optc-dev/optc/graph"
)

// eliminateIdentity removes Identity nodes, and Dropout nodes that run in
// inference mode, by letting their readers read the input directly.
// Exporters leave both behind (Identity to rename a value, Dropout from
// the training graph); at inference they copy their input.
//
// A Dropout goes only when its mask output is unused, the model's opset
// is at least 7 (older ones had an is_test attribute that could select
// training), and its training_mode input (opset 12) is absent or a
// constant false. A node whose output a graph returns stays unless its
// input can take the output's name (see graphEdit.canBypass).
var eliminateIdentity = &Pass{
	Name:  "eliminate-identity",
	Doc:   "remove Identity nodes and inference-mode Dropout",
	Level: 1,
	Form:  LocalRule,
	Run:   runEliminateIdentity,
}

func runEliminateIdentity(c *Context) (Stats, error) {
	return Rule[*graph.Node]{OpTypes: []string{"Identity", "Dropout"}, Match: matchCopy, Apply: bypassNode}.apply(c.Model)
}

// matchCopy matches an Identity, or a Dropout that copies its input,
// whose output its input can replace.
func matchCopy(e *graphEdit, n *graph.Node) (*graph.Node, bool) {
	switch {
	case n.OpType == "Identity" && len(n.Inputs()) == 1 && len(n.Outputs()) == 1:
	case n.OpType == "Dropout" && inferenceDropout(e, n):
	default:
		return nil, false
	}
	return n, e.canBypass(n.Output(0), n.Input(0))
}

// bypassNode lets the readers of n's output read its input instead and
// removes n (the Apply of the rules that drop a node that copies its
// input).
func bypassNode(e *graphEdit, n *graph.Node) (Stats, error) {
	e.bypass(n.Output(0), n.Input(0))
	e.remove(n)
	return Stats{}, nil
}

// inferenceDropout reports whether Dropout n copies its input and nothing
// reads its mask.
func inferenceDropout(e *graphEdit, n *graph.Node) bool {
	if e.opset() < 7 || len(n.Inputs()) > 3 || len(n.Outputs()) > 2 {
		return false
	}
	if mask := n.Output(1); mask != nil && (len(mask.Uses()) > 0 || e.returned(mask)) {
		return false
	}
	if tm := n.Input(2); tm != nil {
		t := tm.ConstantTensor()
		if t == nil || t.DType != graph.Bool {
			return false
		}
		vals, err := t.Int64s()
		if err != nil || len(vals) != 1 || vals[0] != 0 {
			return false
		}
	}
	return true
}
