package passes

import (
	"math"
	"slices"
	"strconv"

	"github.com/optc-dev/optc/graph"
)

// The matcher: small questions a local fusion asks of the graph, so that a
// rule reads as "match Conv -> BatchNormalization where the Conv output
// has one consumer and the BN parameters are constant; rewrite" rather
// than as index juggling. Each fusion is a Rule (rule.go) whose Match is
// built from these; every helper more than one pass uses lives here.

// isOp reports whether n is one of ops of the default ONNX domain.
func isOp(n *graph.Node, ops ...string) bool {
	return n != nil && (n.Domain == "" || n.Domain == "ai.onnx") && slices.Contains(ops, n.OpType)
}

// producedBy returns v's producer when it is one of ops (default domain),
// in the graph g, with v as its only output; else nil.
func producedBy(v *graph.Value, g *graph.Graph, ops ...string) *graph.Node {
	if v == nil {
		return nil
	}
	n := v.Producer()
	if !isOp(n, ops...) || n.Graph() != g || !singleOutput(n) {
		return nil
	}
	return n
}

// singleOutput reports whether n computes exactly one value, as output 0
// (optional outputs such as BatchNormalization's running statistics are
// absent or omitted).
func singleOutput(n *graph.Node) bool {
	if n.Output(0) == nil {
		return false
	}
	for _, v := range n.Outputs()[1:] {
		if v != nil {
			return false
		}
	}
	return true
}

// onlyReader returns the node that reads v when that node is its one
// consumer: v has a single use and no graph returns it. Otherwise nil.
func onlyReader(v *graph.Value) *graph.Node {
	if v == nil || len(v.Uses()) != 1 || v.IsReturned() {
		return nil
	}
	return v.Uses()[0].Node
}

// floatConst returns v's data when v is a constant float32 tensor (an
// initializer that is not a graph input, or a Constant node's value).
func floatConst(v *graph.Value) (*graph.Tensor, []float32, bool) {
	if v == nil {
		return nil, nil, false
	}
	t := v.ConstantTensor()
	if t == nil || t.DType != graph.Float {
		return nil, nil, false
	}
	f, err := t.Float32s()
	if err != nil {
		return nil, nil, false
	}
	return t, f, true
}

// vectorConst returns the data of a constant float32 vector of n
// elements (rank 1).
func vectorConst(v *graph.Value, n int64) ([]float32, bool) {
	t, f, ok := floatConst(v)
	if !ok || len(t.Dims) != 1 || t.Dims[0] != n {
		return nil, false
	}
	return f, true
}

// scalarConst returns the value of a constant float32 tensor of one
// element (of any rank: exporters write the 3 of x+3 as shape [1]) and
// its rank.
func scalarConst(v *graph.Value) (x float64, rank int, ok bool) {
	t, f, ok := floatConst(v)
	if !ok || len(f) != 1 {
		return 0, 0, false
	}
	return float64(f[0]), len(t.Dims), true
}

// otherOperand returns, when one of n's two inputs is a constant scalar
// equal to want (within tol), the other input and the constant's rank.
// Commutative ops use it to accept both operand orders.
func otherOperand(n *graph.Node, want, tol float64) (*graph.Value, int, bool) {
	if len(n.Inputs()) != 2 {
		return nil, 0, false
	}
	for i := range 2 {
		if c, rank, ok := scalarConst(n.Input(i)); ok && math.Abs(c-want) <= tol && n.Input(1-i) != nil {
			return n.Input(1 - i), rank, true
		}
	}
	return nil, 0, false
}

// clipBounds returns a Clip's bounds: attributes below opset 11, constant
// scalar inputs from 11 on; an absent bound is infinite. ok is false where
// a bound is not a known constant.
func clipBounds(n *graph.Node, opset int64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if opset < 11 {
		if len(n.Inputs()) != 1 {
			return 0, 0, false
		}
		if a := n.Attr("min"); a != nil {
			if a.Type != graph.AttrFloat {
				return 0, 0, false
			}
			lo = float64(a.Float)
		}
		if a := n.Attr("max"); a != nil {
			if a.Type != graph.AttrFloat {
				return 0, 0, false
			}
			hi = float64(a.Float)
		}
		return lo, hi, true
	}
	if n.Attr("min") != nil || n.Attr("max") != nil || len(n.Inputs()) > 3 {
		return 0, 0, false
	}
	for i, b := range []*float64{&lo, &hi} {
		v := n.Input(1 + i)
		if v == nil {
			continue
		}
		x, _, ok := scalarConst(v)
		if !ok {
			return 0, 0, false
		}
		*b = x
	}
	return lo, hi, true
}

// handOver makes dst produce last's output 0 in place of its own output 0
// (which must feed only last): the fused pattern keeps the value, name and
// declared type of its end, so graph outputs and later readers are
// untouched. last takes dst's old output, and removing last drops it.
func handOver(dst, last *graph.Node) error {
	mid, out := dst.Output(0), last.Output(0)
	if err := dst.SetOutput(0, nil); err != nil {
		return err
	}
	if err := last.SetOutput(0, mid); err != nil {
		return err
	}
	return dst.SetOutput(0, out)
}

// takeOutput detaches output 0 from last, the end of a pattern about to
// be removed, so that the nodes replacing the pattern can produce it.
func takeOutput(last *graph.Node) (*graph.Value, error) {
	out := last.Output(0)
	return out, last.SetOutput(0, nil)
}

// addFloatInit adds a float32 initializer named after prefix (made unique)
// holding vals, rounded from float64.
func addFloatInit(g *graph.Graph, prefix string, dims []int64, vals []float64) (*graph.Value, error) {
	f := make([]float32, len(vals))
	for i, x := range vals {
		f[i] = float32(x)
	}
	t, err := graph.NewFloat32Tensor(g.UniqueName(prefix), dims, f)
	if err != nil {
		return nil, err
	}
	return g.AddInitializer(t)
}

// allFinite reports whether every element is a finite float32.
func allFinite(vals []float64) bool {
	for _, x := range vals {
		if math.IsNaN(x) || math.Abs(x) > math.MaxFloat32 {
			return false
		}
	}
	return true
}

// uniqueNodeName returns a node name starting with prefix that no node of
// g's model has.
func uniqueNodeName(g *graph.Graph, prefix string) string {
	used := g.NodeNames()
	name := prefix
	for i := 1; used[name]; i++ {
		name = prefix + "_" + strconv.Itoa(i)
	}
	return name
}

// Ops whose first output has at least their first input's rank
// (elementwise unary) or at least the largest rank of their inputs
// (broadcasting), for minRank.
var (
	rankKeepingOps = []string{"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip", "Neg", "Abs", "Exp", "Identity", "Softmax", "BatchNormalization"}
	broadcastOps   = []string{"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"}
	// Spatial ops read and write [N, C, D1, ...]: rank 3 at least.
	spatialOps = []string{"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"}
)

// hasOp reports whether any graph of m has a default-domain node of one of
// ops: the fusions that need shape inference skip it (and themselves) on
// models without their anchor.
func hasOp(m *graph.Model, ops ...string) bool {
	found := false
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if !found && isOp(n, ops...) {
				found = true
			}
		}
	})
	return found
}

// outputChannels is the number of channels op computes, as its weight
// says: 0 where the weight has the wrong rank or group does not divide it.
func outputChannels(op *graph.Node, w *graph.Tensor) int64 {
	d := w.Dims
	switch op.OpType {
	case "Conv":
		if len(d) >= 3 {
			return d[0]
		}
	case "ConvTranspose":
		group := op.AttrInt("group", 1)
		if len(d) >= 3 && group >= 1 && d[0]%group == 0 {
			return d[1] * group
		}
	case "Gemm":
		if len(d) == 2 {
			if op.AttrInt("transB", 0) != 0 {
				return d[0]
			}
			return d[1]
		}
	case "MatMul":
		if len(d) == 2 {
			return d[1]
		}
	}
	return 0
}

// convBias returns the op's bias input as float64 (zeros when absent), or
// false when it is not a constant float32 vector of n.
func convBias(op *graph.Node, n int64) ([]float64, bool) {
	b := make([]float64, n)
	if op.Input(2) == nil {
		return b, len(op.Inputs()) <= 3
	}
	f, ok := vectorConst(op.Input(2), n)
	if !ok || len(op.Inputs()) > 3 {
		return nil, false
	}
	for i, x := range f {
		b[i] = float64(x)
	}
	return b, true
}

// constInts returns the contents of a constant integer value.
func constInts(v *graph.Value) ([]int64, bool) {
	if v == nil {
		return nil, false
	}
	t := v.ConstantTensor()
	if t == nil {
		return nil, false
	}
	xs, err := t.Int64s()
	if err != nil {
		return nil, false
	}
	return xs, true
}
