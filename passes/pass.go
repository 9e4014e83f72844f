// Package passes holds optc's graph rewrites. Each pass is one file, one
// job, with a name and a doc line, registered in the ordered table in
// pipeline.go. Passes know only the IR (package graph); a pass that needs
// to evaluate an operator it has no Go kernel for gets an Evaluator from
// the driver.
package passes

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// Pass is one graph rewrite.
type Pass struct {
	Name string
	Doc  string
	// Level is the lowest -O level that runs the pass: 1 for exact
	// cleanups and folding, 2 for fusions.
	Level int
	Run   func(c *Context) (Stats, error)
}

// Stats says what a pass changed.
type Stats struct {
	Removed   int `json:"nodes_removed"`
	Added     int `json:"nodes_added"`
	Rewritten int `json:"nodes_rewritten"`
}

// Changed reports whether the pass changed anything.
func (s Stats) Changed() bool { return s.Removed+s.Added+s.Rewritten > 0 }

func (s *Stats) add(o Stats) {
	s.Removed += o.Removed
	s.Added += o.Added
	s.Rewritten += o.Rewritten
}

// Context is what a pass works on.
type Context struct {
	Model *graph.Model
	// Eval evaluates operators the passes have no Go kernel for; nil when
	// no runtime is available (then such nodes are left alone).
	Eval Evaluator
	// FoldSizeLimit is the largest tensor, in bytes, constant folding may
	// create (default 1 MiB, see DefaultFoldSizeLimit).
	FoldSizeLimit int64
	// FusedConv lets conv-activation fusion emit com.microsoft FusedConv
	// (ONNX Runtime targets only); otherwise the fusion is recorded in the
	// Conv's metadata and the activation stays a node of its own.
	FusedConv bool
	// ORTContrib says the model is meant for ONNX Runtime alone: the
	// transformer fusions may then emit ORT's operators (com.microsoft
	// Gelu, FastGelu, SkipLayerNormalization, and LayerNormalization below
	// opset 17, which ORT registers in the default domain) where ONNX has
	// no standard one. Off, every pass writes standard ONNX only, which
	// TensorRT and other runtimes read too.
	ORTContrib bool
}

// DefaultFoldSizeLimit keeps constant folding from turning a small
// expression (e.g. ConstantOfShape of a large shape) into a large weight.
const DefaultFoldSizeLimit = 1 << 20

// Evaluator runs one node on constant inputs, in a model with the given
// operator sets, and returns its outputs.
type Evaluator interface {
	EvalNode(n *graph.Node, inputs []*graph.Tensor, opsets []graph.OpsetImport) ([]*graph.Tensor, error)
}

// errf formats an error about node n in pass p.
func errf(n *graph.Node, format string, args ...any) error {
	return fmt.Errorf("node %s: %s", n, fmt.Sprintf(format, args...))
}
