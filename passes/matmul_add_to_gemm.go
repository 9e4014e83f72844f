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
	Shapes: DeclaredShapes,
	Run:    runMatMulAddToGemm,
}

func runMatMulAddToGemm(c *Context) (Stats, error) {
	if c.Model.OpsetVersion("") < 7 {
		return Stats{}, nil
	}
	return editGraphs(c.Model, func(e *graphEdit) error {
		for _, n := range e.g.Nodes {
			if !isOp(n, "Add") || len(n.Inputs()) != 2 || len(n.Outputs()) != 1 || len(n.Attrs) != 0 {
				continue
			}
			for side := range 2 {
				mm, bias := n.Input(side).Producer(), n.Input(1-side)
				if !isOp(mm, "MatMul") || mm.Graph() != e.g || e.removed(mm) || len(mm.Inputs()) != 2 ||
					len(mm.Outputs()) != 1 || !e.singleUse(mm.Output(0)) || !gemmOperands(mm.Input(0), mm.Input(1), bias) {
					continue
				}
				a, b := mm.Input(0), mm.Input(1)
				n.OpType = "Gemm"
				n.SetInput(0, a)
				n.SetInput(1, b)
				n.SetInput(2, bias)
				e.remove(mm)
				e.st.Rewritten++
				break
			}
		}
		return nil
	})
}

// gemmOperands reports whether A, B and the bias fit Gemm (see the pass
// comment).
func gemmOperands(a, b, bias *graph.Value) bool {
	ad, ok := knownDims(a)
	if !ok || len(ad) != 2 || b == nil || bias == nil {
		return false
	}
	bt, ct := b.ConstantTensor(), bias.ConstantTensor()
	if bt == nil || ct == nil || len(bt.Dims) != 2 || bt.DType != ct.DType ||
		bt.DType != graph.Float && bt.DType != graph.Double {
		return false
	}
	if ae, ok := knownElem(a); ok && ae != bt.DType {
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
