package prune

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// weightOp returns the kind of weight op n is (Conv, ConvTranspose, Gemm,
// MatMul: operators whose input 1 is a prunable weight), or "". ONNX
// Runtime's FusedConv, which optc's fusions write, is a Conv.
func weightOp(n *graph.Node) string {
	switch {
	case n.Domain == "" && (n.OpType == "Conv" || n.OpType == "ConvTranspose" || n.OpType == "Gemm" || n.OpType == "MatMul"):
		return n.OpType
	case n.Domain == "com.microsoft" && n.OpType == "FusedConv":
		return "Conv"
	}
	return ""
}

// defaultMinElements is Options.MinElements when it is 0.
const defaultMinElements = 1024

// weight is one constant float32 weight read as input 1 by one or more of
// the weight ops. A weight shared by several nodes appears once.
type weight struct {
	node   *graph.Node   // the first node reading it (names the layer)
	nodes  []*graph.Node // every weight op reading it as input 1
	value  *graph.Value
	tensor *graph.Tensor
	// skip says why the weight cannot be rewritten at all (whatever the
	// method): an input of another kind of node, a graph output.
	skip string
}

// layer returns the report line for w before pruning.
func (w *weight) layer() schema.PruneLayer {
	n, _ := w.tensor.NumElements()
	return schema.PruneLayer{Node: w.node.Name, Op: w.node.OpType, Weight: w.value.Name, Params: n}
}

// isWeightUse reports whether u reads a weight: input 1 of a weight op.
func isWeightUse(u graph.Use) bool {
	return u.Index == 1 && weightOp(u.Node) != ""
}

// findWeights returns the constant weights of m's weight ops, in node
// order over the main graph and its subgraphs. Weights that are constant
// but not float32 are returned too, with skip set, so that reports can say
// why they were left alone; non-constant inputs (activations, graph
// inputs) are not weights and are left out.
func findWeights(m *graph.Model) []*weight {
	var ws []*weight
	seen := map[*graph.Value]*weight{}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if weightOp(n) == "" {
				continue
			}
			v := n.Input(1)
			if v == nil {
				continue
			}
			if w := seen[v]; w != nil {
				w.nodes = append(w.nodes, n)
				continue
			}
			t := v.ConstantTensor()
			if t == nil {
				continue
			}
			w := &weight{node: n, nodes: []*graph.Node{n}, value: v, tensor: t}
			seen[v] = w
			ws = append(ws, w)
			switch {
			case t.DType != graph.Float:
				w.skip = fmt.Sprintf("%s weight (float32 only)", t.DType)
			case v.IsReturned():
				w.skip = "the weight is also a graph output"
			default:
				for _, u := range v.Uses() {
					if !isWeightUse(u) {
						w.skip = fmt.Sprintf("the weight is also read by %s %q", u.Node.OpType, u.Node.Name)
						break
					}
				}
			}
		}
	})
	return ws
}

// isDepthwise reports whether a Conv (or ConvTranspose) weight of dims is
// depthwise: one input channel per group, more than one group.
func isDepthwise(n *graph.Node, dims []int64) bool {
	if len(dims) < 3 {
		return false
	}
	group := n.AttrInt("group", 1)
	switch weightOp(n) {
	case "Conv":
		return group > 1 && dims[1] == 1
	case "ConvTranspose":
		return group > 1 && group == dims[0] && dims[1] == 1
	}
	return false
}

// commonSkip says why w is left alone by every method: what findWeights
// found, an exclusion, too few elements, a depthwise conv. It returns ""
// for a prunable weight.
func commonSkip(w *weight, opts Options) string {
	if w.skip != "" {
		return w.skip
	}
	for _, n := range w.nodes {
		if slices.Contains(opts.Exclude, n.Name) {
			return fmt.Sprintf("excluded (node %q)", n.Name)
		}
	}
	if slices.Contains(opts.Exclude, w.value.Name) {
		return fmt.Sprintf("excluded (weight %q)", w.value.Name)
	}
	minN := opts.MinElements
	if minN == 0 {
		minN = defaultMinElements
	}
	if n, err := w.tensor.NumElements(); err != nil {
		return err.Error()
	} else if n < minN {
		return fmt.Sprintf("%d elements, fewer than %d", n, minN)
	}
	for _, n := range w.nodes {
		if isDepthwise(n, w.tensor.Dims) {
			return fmt.Sprintf("depthwise %s %q", n.OpType, n.Name)
		}
	}
	return ""
}

// countZeros counts the zero elements of vals (either sign).
func countZeros(vals []float32) int64 {
	var z int64
	for _, v := range vals {
		if v == 0 {
			z++
		}
	}
	return z
}

// fraction is a/b, 0 when b is 0.
func fraction(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// replaceWeight gives w's value a new tensor holding vals. The old tensor
// is not modified: its data may alias the loaded file's read-only mapping.
func replaceWeight(w *weight, vals []float32) error {
	old := w.tensor
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	t, err := graph.NewTensor(old.Name, graph.Float, old.Dims, b)
	if err != nil {
		return err
	}
	t.DocString = old.DocString
	if w.value.Const != nil {
		w.value.Const = t
	} else if p := w.value.Producer(); p != nil && p.OpType == "Constant" {
		a := p.Attr("value")
		if a == nil || a.Tensor != old {
			return fmt.Errorf("weight %q: the Constant node does not hold it", w.value.Name)
		}
		a.Tensor = t
	} else {
		return fmt.Errorf("weight %q is neither an initializer nor a Constant", w.value.Name)
	}
	w.tensor = t
	return nil
}

// totalParams is the number of elements of every initializer and Constant
// node value of m, subgraphs included.
func totalParams(m *graph.Model) int64 {
	var total int64
	m.Graph.Walk(func(g *graph.Graph) {
		for _, v := range g.Initializers {
			if v.Const != nil {
				n, _ := v.Const.NumElements()
				total += n
			}
		}
		for _, n := range g.Nodes {
			if n.OpType != "Constant" || n.Domain != "" {
				continue
			}
			if a := n.Attr("value"); a != nil && a.Tensor != nil {
				k, _ := a.Tensor.NumElements()
				total += k
			}
		}
	})
	return total
}

// sparsityTotals adds up what every pruned layer holds after pruning, for
// the report's overall sparsity.
type sparsityTotals struct{ zeroed, elems int64 }

// after sets l's sparsity after pruning from its values and counts it.
func (t *sparsityTotals) after(l *schema.PruneLayer, vals []float32) {
	z := countZeros(vals)
	l.After = fraction(z, l.Params)
	t.zeroed += z
	t.elems += l.Params
}

// finish writes the totals and m's parameter count into rep.
func (t sparsityTotals) finish(rep *schema.PruneReport, m *graph.Model) {
	rep.Sparsity = fraction(t.zeroed, t.elems)
	rep.ParamsAfter = totalParams(m)
}
