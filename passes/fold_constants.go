package passes

import (
	"errors"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/kernels"
)

// foldConstants evaluates every node whose inputs are all constant
// (initializers that are not graph inputs, Constant outputs, omitted
// optional inputs) and turns its outputs into initializers of the same
// name, so shape arithmetic and weight preprocessing cost nothing at run
// time. Nodes are visited in order, so a chain folds in one run; the
// nodes that fed a fold become dead and eliminate-dead-code removes them.
//
// The Go kernels (package kernels) come first; for an operator they do not
// implement, Context.Eval (ONNX Runtime) is asked, when there is one.
// Results that kernels call undefined (integer division by zero) are
// never folded. Outputs are bounded: no tensor over FoldSizeLimit bytes,
// and no fold whose outputs exceed its inputs by more than a sixteenth of
// the limit (ConstantOfShape, Expand, Tile and Range of large shapes stay
// nodes; the kernels refuse them before computing anything); layout-only
// operators (Transpose, Reshape, Squeeze, ...) fold whatever their size,
// since their output is their input's bytes.
var foldConstants = &Pass{
	Name:   "fold-constants",
	Doc:    "evaluate nodes whose inputs are all constant and store their outputs as initializers",
	Level:  1,
	Form:   GraphWide,
	Shapes: DeclaredShapes,
	Run:    runFoldConstants,
}

// notFolded lists operators whose result is not a function of their
// inputs.
var notFolded = map[string]bool{
	"RandomNormal": true, "RandomNormalLike": true, "RandomUniform": true, "RandomUniformLike": true,
	"Multinomial": true, "Bernoulli": true, "Dropout": true,
}

// notEvaluated lists operators never handed to the evaluator: integer
// Div and Mod trap on a zero divisor (taking the process down), and the
// others can make outputs far larger than their inputs, which the
// evaluator would compute before the size check could refuse them.
var notEvaluated = map[string]bool{
	"Div": true, "Mod": true,
	"ConstantOfShape": true, "Expand": true, "Tile": true, "Range": true, "Pad": true,
	"Resize": true, "Upsample": true, "OneHot": true, "Col2Im": true,
}

// layoutOnly lists operators whose output holds their data input's
// elements, reordered or reshaped: folded whatever their size.
var layoutOnly = map[string]bool{
	"Transpose": true, "Reshape": true, "Squeeze": true, "Unsqueeze": true, "Flatten": true, "Identity": true,
}

func runFoldConstants(c *Context) (Stats, error) {
	var st Stats
	var err error
	types := c.Declared()
	c.Model.Graph.Walk(func(g *graph.Graph) {
		if err != nil {
			return
		}
		var folded []*graph.Node
		for _, n := range g.Nodes {
			outs := c.evalConstant(n, types)
			if outs == nil {
				continue
			}
			// The outputs keep their names, uses and declarations and
			// become initializers; in a subgraph, a node that reads only
			// outer constants is folded into the outer graph instead, so
			// that two If branches folding the same weights share one
			// copy (dedup-initializers merges them) rather than each
			// holding its own.
			home := foldHome(n)
			for i, v := range n.Outputs() {
				if v == nil {
					continue
				}
				if err = n.SetOutput(i, nil); err != nil {
					return
				}
				if home != g {
					outs[i].Name = home.UniqueName(v.Name)
					var nv *graph.Value
					if nv, err = home.AddInitializer(outs[i]); err != nil {
						return
					}
					nv.Type = types.typ(v)
					g.ReplaceAllUses(v, nv)
					continue
				}
				outs[i].Name = v.Name
				v.Const = outs[i]
				g.Initializers = append(g.Initializers, v)
			}
			folded = append(folded, n)
		}
		if len(folded) > 0 {
			err = g.RemoveNodes(folded)
			st.Removed += len(folded)
		}
	})
	return st, err
}

// foldHome is the graph n's folded outputs go into: the innermost graph
// that defines one of its inputs (n's own graph for the main graph, or
// when it reads a constant of its own subgraph).
func foldHome(n *graph.Node) *graph.Graph {
	g := n.Graph()
	depth := func(x *graph.Graph) int {
		d := 0
		for ; x.Parent != nil; x = x.Parent {
			d++
		}
		return d
	}
	home, hd := g, -1
	for _, v := range n.Inputs() {
		if v == nil || v.Graph() == nil {
			continue
		}
		if d := depth(v.Graph()); d > hd {
			home, hd = v.Graph(), d
		}
	}
	if hd < 0 {
		return g
	}
	return home
}

// evalConstant returns n's outputs (one per output, nil where omitted)
// when n can be folded, else nil.
func (c *Context) evalConstant(n *graph.Node, types declaredTypes) []*graph.Tensor {
	if n.Domain != "" && n.Domain != "ai.onnx" || n.OpType == "Constant" || notFolded[n.OpType] || len(n.Subgraphs()) > 0 {
		return nil
	}
	ins := make([]*graph.Tensor, len(n.Inputs()))
	var inBytes int64
	present := 0
	for i, v := range n.Inputs() {
		if v == nil {
			continue
		}
		t := v.ConstantTensor()
		if t == nil || t.DType == graph.String {
			return nil
		}
		ins[i] = t
		inBytes += t.ByteSize()
		present++
	}
	if present == 0 {
		return nil
	}
	for _, v := range n.Outputs() {
		if t := types.typ(v); v != nil && t != nil && (t.Kind != graph.KindTensor || t.Elem == graph.String) {
			return nil
		}
	}
	limit := c.FoldSizeLimit
	if limit <= 0 {
		limit = DefaultFoldSizeLimit
	}
	if layoutOnly[n.OpType] {
		// The same elements in another order or shape: folding adds no
		// bytes (its input dies), whatever its size, and a weight behind
		// such an op becomes a constant quantization can read.
		limit = max(limit, inBytes)
	}
	grow := inBytes + limit/16
	opset := c.Model.OpsetVersion(n.Domain)
	outs, err := kernels.EvalLimit(min(limit, grow), n.OpType, n.Domain, opset, n, ins)
	if errors.Is(err, kernels.ErrUnsupported) && c.Eval != nil && !notEvaluated[n.OpType] {
		outs, err = c.Eval.EvalNode(n, ins, c.Model.Opsets)
	}
	if err != nil || len(outs) < len(n.Outputs()) {
		return nil
	}
	var outBytes int64
	for i, v := range n.Outputs() {
		if v == nil {
			continue
		}
		t := outs[i]
		if t == nil || t.ByteSize() > limit || !types.admits(v, t) {
			return nil
		}
		outBytes += t.ByteSize()
	}
	if outBytes > grow {
		return nil
	}
	return outs
}
