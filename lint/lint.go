// Package lint is what every target's checks report: a Finding names the
// rule, the node and the fix. The rules live with the target that owns
// them (TensorRT's in export/tensorrt/trtlint); optc lint and the build
// find them through the target registry (export/target.Linter).
package lint

import (
	"cmp"
	"slices"
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

// Sort orders errors first, then by rule, node and message.
func Sort(fs []Finding) {
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
