package optimize_test

import (
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
)

// evaluator is the constant-folding fallback the tests give the passes,
// as optimize.Run does.
func evaluator() passes.Evaluator { return &ort.NodeEvaluator{} }
