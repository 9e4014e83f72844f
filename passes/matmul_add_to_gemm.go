package passes

import (
	"github.com/optc-dev/optc/graph"
)

// matmulAddToGemm turns MatMul(A, B) followed by Add of a constant bias
// into one Gemm(A, B, bias): one kernel with the bias folded into the
// accumulation, as exporters of fully connected layers without Gemm emit
// them. The Add node becomes the Gemm (keeping its output and place), and
// the MatMul goes.
//
// Conditions: A is known to be 2-D, [M, K]; B is a constant [K, N];
// float32 or float64 (the types every runtime's Gemm has); the bias is a
// constant of B's type whose shape broadcasts to [M, N] without growing
// it ([], [1], [N], [1, N], [M or 1, N or 1]); the MatMul output is read
// only by the Add; opset 7 or later.
var matmulAddToGemm = &Pass{
	Name:   "matmul-add-to-gemm",
	Doc:    "turn 2-D MatMul + constant bias Add into Gemm",
	Level:  1,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runMatMulAddToGemm,
}

func runMatMulAddToGemm(c *Context) (Stats, error) {
	if c.Model.OpsetVersion("") < 7 {
		return Stats{}, nil
	}
	types := c.Declared()
	match := func(e *graphEdit, n *graph.Node) (*matMulAdd, bool) { return matchMatMulAdd(e, n, types) }
	return Rule[*matMulAdd]{OpTypes: []string{"Add"}, Match: match, Apply: toGemm}.apply(c.Model)
}

// matMulAdd is an Add of a MatMul's one output and a bias.
type matMulAdd struct {
	add, mm *graph.Node
	bias    *graph.Value
}

// matchMatMulAdd tries the MatMul as the Add's first input, then as its
// second.
func matchMatMulAdd(e *graphEdit, n *graph.Node, types declaredTypes) (*matMulAdd, bool) {
	if len(n.Inputs()) != 2 || len(n.Outputs()) != 1 || len(n.Attrs) != 0 {
		return nil, false
	}
	for side := range 2 {
		mm, bias := e.absorbable(n.Input(side), "MatMul"), n.Input(1-side)
		if mm == nil || len(mm.Inputs()) != 2 || !gemmOperands(mm.Input(0), mm.Input(1), bias, types) {
			continue
		}
		return &matMulAdd{add: n, mm: mm, bias: bias}, true
	}
	return nil, false
}

// toGemm turns the Add into Gemm(A, B, bias) and removes the MatMul.
func toGemm(e *graphEdit, m *matMulAdd) (Stats, error) {
	a, b := m.mm.Input(0), m.mm.Input(1)
	m.add.SetOpType("Gemm")
	m.add.SetInput(0, a)
	m.add.SetInput(1, b)
	m.add.SetInput(2, m.bias)
	e.remove(m.mm)
	return Stats{Rewritten: 1}, nil
}

// gemmOperands reports whether A, B and the bias fit Gemm (see the pass
// comment).
func gemmOperands(a, b, bias *graph.Value, types declaredTypes) bool {
	ad, ok := types.dims(a)
	if !ok || len(ad) != 2 || b == nil || bias == nil {
		return false
	}
	bt, ct := b.ConstantTensor(), bias.ConstantTensor()
	if bt == nil || ct == nil || len(bt.Dims) != 2 || bt.DType != ct.DType ||
		bt.DType != graph.Float && bt.DType != graph.Double {
		return false
	}
	if ae, ok := types.elem(a); ok && ae != bt.DType {
		return false
	}
	m, k, n := ad[0], bt.Dims[0], bt.Dims[1]
	if ad[1] >= 0 && ad[1] != k {
		return false
	}
	fits := func(d, full int64) bool { return d == 1 || d == full && full >= 0 }
	switch cd := ct.Dims; len(cd) {
	case 0:
		return true
	case 1:
		return fits(cd[0], n)
	case 2:
		return fits(cd[0], m) && fits(cd[1], n)
	}
	return false
}
