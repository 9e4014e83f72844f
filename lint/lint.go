// Package lint checks a model against what a runtime will accept and fuse,
// before anyone spends a build on it. TensorRT is the first target: its
// explicit-quantization rules (symmetric INT8, zero points 0, per-channel
// scales only on weights along the output-channel axis, Q/DQ placements
// its fusions recognise) and the operators and types its ONNX parser
// cannot take. A finding names the node and says how to fix it.
package lint

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Severities: an error means TensorRT refuses the model or computes
// something else than it says; a warning means it builds, slower or in
// higher precision than intended.
const (
	Error   = "error"
	Warning = "warning"
)

// Finding is one problem found in a model.
type Finding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Node     string `json:"node"` // the node's name, or "op -> output" for an unnamed one; "" for a graph value
	Message  string `json:"message"`
}

// Errors counts the error-severity findings.
func Errors(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Severity == Error {
			n++
		}
	}
	return n
}

// sortFindings orders errors first, then by rule, node and message.
func sortFindings(fs []Finding) {
	rank := func(s string) int {
		if s == Error {
			return 0
		}
		return 1
	}
	slices.SortFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(rank(a.Severity), rank(b.Severity)), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Node, b.Node), cmp.Compare(a.Message, b.Message))
	})
}

// nodeID names n in a finding: its name, or for an unnamed node its op
// and first output, which ONNX makes unique.
func nodeID(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	out := ""
	if len(n.Outputs()) > 0 && n.Output(0) != nil {
		out = n.Output(0).Name
	}
	return n.OpType + " -> " + out
}

func isOp(n *graph.Node, ops ...string) bool {
	return n != nil && (n.Domain == "" || n.Domain == "ai.onnx") && slices.Contains(ops, n.OpType)
}

// constFloats returns v's values when it is a constant float32 tensor.
func constFloats(v *graph.Value) ([]float32, bool) {
	if v == nil {
		return nil, false
	}
	t := v.ConstantTensor()
	if t == nil || t.DType != graph.Float {
		return nil, false
	}
	f, err := t.Float32s()
	return f, err == nil
}

// allZero reports whether every byte of t's data is zero (the value 0 of
// every integer and float8 type).
func allZero(t *graph.Tensor) (bool, error) {
	b, err := t.Bytes()
	if err != nil {
		return false, err
	}
	for _, x := range b {
		if x != 0 {
			return false, nil
		}
	}
	return true, nil
}

func finiteScale(f float32) bool {
	return f > 0 && !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f))
}

func plural(n int, s string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, s)
	}
	return fmt.Sprintf("%d %ss", n, s)
}
