package passes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// fuseConvBN folds an inference-mode BatchNormalization into the linear op
// before it. BN is y = s*x + t per channel, with s = scale/sqrt(var+eps)
// and t = B - mean*s, so it folds into the weights and bias of a Conv
// (output channels on axis 0 of W), a ConvTranspose (on axis 1 of W,
// per group), a Gemm (the columns of its result) or a 2-D MatMul with a
// constant weight (which becomes a Gemm with the folded bias): one op and
// one pass over the activations fewer at inference. The arithmetic is done
// in float64 and rounded once.
//
// Match: BatchNormalization with one output (no training-mode statistics,
// training_mode 0, spatial 1) whose scale, B, mean and var are constant
// float32 vectors of the op's output channel count, reading the result of
// a Conv, ConvTranspose, Gemm or MatMul in the same graph that nothing
// else reads and no graph returns; the op's weight (and bias, when
// present) constant float32. A MatMul also needs its input to be 2-D.
//
// Rewrite: new weight and bias initializers (the old ones stay for
// dead-code elimination, or for other readers); the op then produces the
// BN's output value itself, so names the graph exposes do not change.
var fuseConvBN = &Pass{
	Name:   "fuse-conv-bn",
	Doc:    "fold inference BatchNormalization into the Conv, ConvTranspose, Gemm or MatMul before it",
	Level:  2,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runFuseConvBN,
}

func runFuseConvBN(c *Context) (Stats, error) {
	opset, types := c.Model.OpsetVersion(""), c.Declared()
	match := func(_ *graphEdit, bn *graph.Node) (*convBN, bool) { return matchConvBN(bn, opset, types) }
	return Rule[*convBN]{OpTypes: []string{"BatchNormalization"}, Match: match, Apply: func(_ *graphEdit, p *convBN) (Stats, error) { return p.rewrite() }}.apply(c.Model)
}

// convBN is a matched op -> BatchNormalization pair and the folded
// parameters, computed while matching so that a failure leaves the graph
// untouched.
type convBN struct {
	op, bn *graph.Node
	w      []float64 // folded weight, in W's layout
	wDims  []int64
	b      []float64 // folded bias (Gemm: C)
	bDims  []int64
}

func matchConvBN(bn *graph.Node, opset int64, types declaredTypes) (*convBN, bool) {
	if !isOp(bn, "BatchNormalization") || !singleOutput(bn) || len(bn.Inputs()) != 5 ||
		bn.AttrInt("training_mode", 0) != 0 || bn.AttrInt("spatial", 1) != 1 {
		return nil, false
	}
	x := bn.Input(0)
	op := producedBy(x, bn.Graph(), "Conv", "ConvTranspose", "Gemm", "MatMul")
	if op == nil || onlyReader(x) != bn {
		return nil, false
	}
	wt, w, ok := floatConst(op.Input(1))
	if !ok || len(w) == 0 {
		return nil, false
	}
	var fold func(s, t []float64) (*convBN, bool)
	switch op.OpType {
	case "Conv":
		fold = foldConv(op, wt, w)
	case "ConvTranspose":
		fold = foldConvTranspose(op, wt, w)
	case "Gemm":
		fold = foldGemm(op, wt, w, opset)
	case "MatMul":
		fold = foldMatMul(op, wt, w, opset, types)
	}
	channels := outputChannels(op, wt)
	if fold == nil || channels <= 0 {
		return nil, false
	}
	s, t, ok := bnAffine(bn, channels)
	if !ok {
		return nil, false
	}
	p, ok := fold(s, t)
	if !ok || !allFinite(p.w) || !allFinite(p.b) {
		return nil, false
	}
	p.op, p.bn = op, bn
	return p, true
}

// bnAffine returns BN as y = s*x + t per channel, for n channels.
func bnAffine(bn *graph.Node, n int64) (s, t []float64, ok bool) {
	var p [4][]float32 // scale, B, mean, var
	for i := range p {
		if p[i], ok = vectorConst(bn.Input(1+i), n); !ok {
			return nil, nil, false
		}
	}
	eps := float64(bn.AttrFloat("epsilon", 1e-5))
	s, t = make([]float64, n), make([]float64, n)
	for c := range s {
		v := float64(p[3][c]) + eps
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, nil, false
		}
		s[c] = float64(p[0][c]) / math.Sqrt(v)
		t[c] = float64(p[1][c]) - float64(p[2][c])*s[c]
	}
	return s, t, true
}

// foldScaled returns W with every element multiplied by s of its output
// channel, and the bias b*s + t.
func foldScaled(w []float32, wDims []int64, channel func(i int) int, b, s, t []float64) *convBN {
	p := &convBN{w: make([]float64, len(w)), wDims: wDims, b: make([]float64, len(s)), bDims: []int64{int64(len(s))}}
	for i, x := range w {
		p.w[i] = float64(x) * s[channel(i)]
	}
	for c := range s {
		p.b[c] = b[c]*s[c] + t[c]
	}
	return p
}

// foldConv: W is [M, C/group, k...]; channel m owns the block W[m].
func foldConv(op *graph.Node, wt *graph.Tensor, w []float32) func(s, t []float64) (*convBN, bool) {
	return func(s, t []float64) (*convBN, bool) {
		b, ok := convBias(op, int64(len(s)))
		if !ok {
			return nil, false
		}
		block := len(w) / len(s)
		return foldScaled(w, wt.Dims, func(i int) int { return i / block }, b, s, t), true
	}
}

// foldConvTranspose: W is [C, M/group, k...]; input channel c belongs to
// group c/(C/group), and W[c, j] feeds output channel group*(M/group) + j.
func foldConvTranspose(op *graph.Node, wt *graph.Tensor, w []float32) func(s, t []float64) (*convBN, bool) {
	return func(s, t []float64) (*convBN, bool) {
		b, ok := convBias(op, int64(len(s)))
		if !ok {
			return nil, false
		}
		group := int(op.AttrInt("group", 1))
		inPerGroup, outPerGroup := int(wt.Dims[0])/group, int(wt.Dims[1])
		kernel := len(w) / (int(wt.Dims[0]) * outPerGroup)
		channel := func(i int) int {
			c, j := i/(outPerGroup*kernel), i/kernel%outPerGroup
			return c/inPerGroup*outPerGroup + j
		}
		return foldScaled(w, wt.Dims, channel, b, s, t), true
	}
}

// foldGemm: Y = alpha*A'*B' + beta*C with B' [K, N] (B, or B transposed);
// column n of Y scales by s[n]. C becomes beta*C*s + t, with beta 1.
func foldGemm(op *graph.Node, wt *graph.Tensor, w []float32, opset int64) func(s, t []float64) (*convBN, bool) {
	if opset < 7 || len(op.Inputs()) > 3 {
		return nil // C broadcasts unidirectionally from opset 7 on
	}
	return func(s, t []float64) (*convBN, bool) {
		n := len(s)
		channel := func(i int) int { return i % n } // B [K, N]
		if op.AttrInt("transB", 0) != 0 {
			channel = func(i int) int { return i / (len(w) / n) } // B [N, K]
		}
		p := foldScaled(w, wt.Dims, channel, make([]float64, n), s, t)
		if op.Input(2) == nil {
			return p, true
		}
		ct, c, ok := floatConst(op.Input(2))
		if !ok {
			return nil, false
		}
		rows, cols, ok := gemmBiasDims(ct.Dims, n)
		if !ok {
			return nil, false
		}
		beta := float64(op.AttrFloat("beta", 1))
		p.b = make([]float64, rows*n)
		for r := range rows {
			for j := range n {
				p.b[r*n+j] = beta*float64(c[r*cols+j%cols])*s[j] + t[j]
			}
		}
		if rows > 1 {
			p.bDims = []int64{int64(rows), int64(n)}
		}
		return p, true
	}
}

// gemmBiasDims reads the dims of a Gemm's C, which broadcasts to [M, N],
// as rows (1, or M) and columns (1, or N); ok is false for other shapes.
func gemmBiasDims(dims []int64, n int) (rows, cols int, ok bool) {
	rows, cols = 1, 1
	switch len(dims) {
	case 0:
	case 1:
		cols = int(dims[0])
	case 2:
		rows, cols = int(dims[0]), int(dims[1])
	default:
		return 0, 0, false
	}
	return rows, cols, rows >= 1 && (cols == 1 || cols == n)
}

// foldMatMul: A [M, K] x W [K, N] with a BN over N becomes
// Gemm(A, W*s, t). A must be 2-D: for higher ranks BN's channel axis (1)
// is not the one W produces.
func foldMatMul(op *graph.Node, wt *graph.Tensor, w []float32, opset int64, types declaredTypes) func(s, t []float64) (*convBN, bool) {
	if r, ok := types.rank(op.Input(0)); !ok || r != 2 || opset < 7 || len(op.Inputs()) != 2 {
		return nil
	}
	return func(s, t []float64) (*convBN, bool) {
		n := len(s)
		return foldScaled(w, wt.Dims, func(i int) int { return i % n }, make([]float64, n), s, t), true
	}
}

func (p *convBN) rewrite() (Stats, error) {
	g := p.op.Graph()
	base := p.op.Input(1).Name + "_bnfold"
	w, err := addFloatInit(g, base, p.wDims, p.w)
	if err != nil {
		return Stats{}, err
	}
	b, err := addFloatInit(g, base+"_bias", p.bDims, p.b)
	if err != nil {
		return Stats{}, err
	}
	if p.op.OpType == "MatMul" {
		out, err := takeOutput(p.bn)
		if err != nil {
			return Stats{}, err
		}
		gemm, err := g.InsertNodeBefore(p.bn, "Gemm", []*graph.Value{p.op.Input(0), w, b}, []*graph.Value{out})
		if err != nil {
			return Stats{}, err
		}
		gemm.Name = p.op.Name
		if err := g.RemoveNodes([]*graph.Node{p.op, p.bn}); err != nil {
			return Stats{}, err
		}
		return Stats{Removed: 2, Added: 1}, nil
	}
	p.op.SetInput(1, w)
	p.op.SetInput(2, b)
	if p.op.OpType == "Gemm" {
		p.op.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: 1})
	}
	if err := handOver(p.op, p.bn); err != nil {
		return Stats{}, err
	}
	if err := g.RemoveNodes([]*graph.Node{p.bn}); err != nil {
		return Stats{}, err
	}
	return Stats{Removed: 1, Rewritten: 1}, nil
}
