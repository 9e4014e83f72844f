package optimize

import (
	"fmt"
	"math"

	"optc/data"
	"optc/graph"
)

// integerDivisor returns an integer Div or Mod of m (subgraphs included)
// whose divisor is not a constant, so that it may come from the check's
// random inputs; nil when there is none. ONNX Runtime's integer kernels
// divide without a check: a zero divisor kills the process with SIGFPE,
// which no error handling can catch.
func integerDivisor(m *graph.Model) *graph.Node {
	var found *graph.Node
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if found != nil || n.OpType != "Div" && n.OpType != "Mod" || n.Domain != "" && n.Domain != "ai.onnx" {
				continue
			}
			d := n.Input(1)
			if d == nil || d.ConstantTensor() != nil {
				continue
			}
			// An undeclared type may be an integer.
			if d.Type == nil || d.Type.Kind != graph.KindTensor || d.Type.Elem == graph.Undefined || !d.Type.Elem.IsFloat() {
				found = n
			}
		}
	})
	return found
}

// divisorSafeRange returns the data options for the check's random inputs
// of m: when m divides integers by something the inputs may make zero,
// the default range [0, 1) (integers all 0) becomes [1, 2), with a note; a
// range the user gave that holds the integer 0 is an error.
func divisorSafeRange(m *graph.Model, dopts data.Options) (data.Options, string, error) {
	n := integerDivisor(m)
	if n == nil || !(math.Ceil(dopts.Low) <= 0 && 0 < dopts.High) {
		return dopts, "", nil
	}
	if dopts.Low == 0 && dopts.High == 1 {
		dopts.Low, dopts.High = 1, 2
		return dopts, fmt.Sprintf("random inputs drawn from [1, 2) instead of [0, 1): %s divides integers, and ONNX Runtime crashes on an integer division by zero", n), nil
	}
	return dopts, "", fmt.Errorf("%s divides integers, and the check's random integer inputs in [%g, %g) include 0, on which ONNX Runtime crashes; give --range without the integer 0 (e.g. 1,10) or --no-check", n, dopts.Low, dopts.High)
}
