package optimize

import (
	"fmt"
	"math"

	"optc/data"
	"optc/graph"
)

// zeroHazard returns a node of m (subgraphs included) that ONNX Runtime
// mishandles when an integer input the check feeds is 0, and what happens
// then; nil when there is none. The check's default random integers, from
// [0, 1), are all 0.
//   - Div and Mod on integers divide without a check: a zero divisor kills
//     the process with SIGFPE, which no error handling can catch (crash).
//   - ReverseSequence skips a batch entry whose sequence length is 0 and
//     leaves its output unwritten, so two runs differ.
func zeroHazard(m *graph.Model) (n *graph.Node, what string, crash bool) {
	m.Graph.Walk(func(g *graph.Graph) {
		for _, x := range g.Nodes {
			if n != nil || x.Domain != "" && x.Domain != "ai.onnx" {
				continue
			}
			switch {
			case (x.OpType == "Div" || x.OpType == "Mod") && fedInteger(x.Input(1)):
				n, what, crash = x, "divides integers, and ONNX Runtime crashes on an integer division by zero", true
			case x.OpType == "ReverseSequence" && fedInteger(x.Input(1)):
				n, what = x, "takes sequence lengths, and ONNX Runtime leaves the output of a length 0 unwritten"
			}
		}
	})
	return n, what, crash
}

// fedInteger reports whether v is not a constant (so it may come from the
// check's inputs) and may be an integer (an undeclared type may be one).
func fedInteger(v *graph.Value) bool {
	if v == nil || v.ConstantTensor() != nil {
		return false
	}
	return v.Type == nil || v.Type.Kind != graph.KindTensor || v.Type.Elem == graph.Undefined || !v.Type.Elem.IsFloat()
}

// zeroSafeRange returns the data options for the check's random inputs of
// m: when m has a zero hazard, the default range [0, 1) (integers all 0)
// becomes [1, 2), with a note; a range the user gave that holds the
// integer 0 is an error where 0 would crash the process.
func zeroSafeRange(m *graph.Model, dopts data.Options) (data.Options, string, error) {
	n, what, crash := zeroHazard(m)
	if n == nil || !(math.Ceil(dopts.Low) <= 0 && 0 < dopts.High) {
		return dopts, "", nil
	}
	if dopts.Low == 0 && dopts.High == 1 {
		dopts.Low, dopts.High = 1, 2
		return dopts, fmt.Sprintf("random inputs drawn from [1, 2) instead of [0, 1): %s %s", n, what), nil
	}
	if !crash {
		return dopts, "", nil
	}
	return dopts, "", fmt.Errorf("%s %s, and the check's random integer inputs in [%g, %g) include 0; give --range without the integer 0 (e.g. 1,10) or --no-check", n, what, dopts.Low, dopts.High)
}
