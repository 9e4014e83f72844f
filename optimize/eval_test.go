package optimize_test

import (
	"optc/ort"
	"optc/passes"
)

// evaluator is the constant-folding fallback the tests give the passes,
// as optimize.Run does.
func evaluator() passes.Evaluator { return &ort.NodeEvaluator{} }
