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
	// Form is how the pass is written: a local Rule or a graph-wide loop
	// (TestPassForms checks it against the pass's Run).
	Form Form
	// Shapes is what the pass reads of value types and shapes (a
	// combination of DeclaredShapes and InferredShapes), declared
	// as x/tools/go/analysis declares Requires. The driver hands a pass
	// only the analyses it declares (analyses.go); the tests check that
	// nothing reads types around the driver and that every declared
	// analysis is asked for, and TestPassDependencies the table order.
	Shapes ShapeUse
	// ProvidesShapes says the pass writes inferred types onto values
	// (infer-shapes, last in the table, so every round ends with them).
	ProvidesShapes bool
	// After names the passes this one must follow in the table, and why:
	// what it rewrites is what they make (TestPassOrder checks the table
	// and every named pipeline holding both).
	After []Follows
	Run   func(c *Context) (Stats, error)
}

// Follows is an ordering constraint: the pass named runs before the one
// that lists it, for the reason given.
type Follows struct {
	Pass, Why string
}

// Form is how a pass is written.
type Form int

const (
	formUnset Form = iota
	// LocalRule: one anchor node and its neighbours at a time, written as
	// a Rule (rule.go): the anchor's op types, Match, Apply.
	LocalRule
	// GraphWide: compares or rewrites many unrelated nodes at once (CSE,
	// folding, dead code, shape inference, channel padding, the opset
	// upgrade), so it loops over the graph itself.
	GraphWide
)

// ShapeUse is what a pass reads of value types and shapes.
type ShapeUse int

const (
	// NoShapes: the pass does not look at value types.
	NoShapes ShapeUse = 0
	// DeclaredShapes: the pass reads the types declared on values
	// (Context.Declared: dims, elem, rank). infer-shapes writes them at the end
	// of each round, so the pass sees new values' types from the next
	// round on, and complete ones in the round that ends the fixed point.
	// It never assumes a type it cannot read.
	DeclaredShapes ShapeUse = 1 << iota
	// InferredShapes: the pass reads Context.Shapes, an inference of the
	// current model that the driver computes on first use and drops after
	// any pass that changed the model.
	//
	// There is deliberately no "invalidates shapes" declaration letting a
	// pass keep the inference across its changes: the inference is keyed
	// by value, and a rewrite that leaves every untouched value's shape
	// alone still adds values it has no entry for (a fused node's output)
	// and can make inference more precise (a folded shape computation
	// makes a Reshape's output static). A kept inference would show the
	// next fusion "unknown" where a fresh one knows, so it would fuse in
	// a later round or not at all, and the output would depend on which
	// passes declared what. Inferring again costs about a millisecond on
	// the zoo's largest models, once per changed pass before a pass that
	// reads it (only the transformer fusions do).
	InferredShapes
)

// OnRequest is the Level of a pass no -O level runs: it runs when named
// (--passes) or called by a driver that needs it (ptq: upgrade-opset).
const OnRequest = 3

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
	// Opset is the default-domain opset upgrade-opset moves the model to
	// (0: DefaultUpgradeOpset).
	Opset int64
	// ChannelBlock is the channel block of ONNX Runtime's NCHWc CPU
	// kernels that pad-conv-channels and hardsigmoid-conv-bridge shape the
	// model for (16 with AVX-512, 8 with AVX2; 0: they do nothing).
	ChannelBlock int

	shapes      valueShapes // Shapes' inference; valid while shapesValid
	shapesValid bool
	// running is the pass the driver runs now (nil outside Run), and
	// undeclared the first analysis it asked for without declaring it.
	running    *Pass
	undeclared string
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
