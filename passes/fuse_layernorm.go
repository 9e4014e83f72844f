package passes

import (
	"slices"

	"github.com/optc-dev/optc/graph"
)

// fuseLayerNorm recognises layer normalization written out as nine ops,
// how exporters below opset 17 write nn.LayerNorm (torch 1.13 at opsets 11
// to 16, and hand-written LayerNorms at any opset),
//
//	mu = ReduceMean(x, axes)          d = Sub(x, mu)
//	v  = ReduceMean(Pow(d, 2), axes)  (or Mul(d, d))
//	y  = Div(d, Sqrt(Add(v, eps)))    [Mul(y, gamma)] [Add(., beta)]
//
// and replaces them with one LayerNormalization, only with
// Context.ORTContrib (a model for ONNX Runtime alone): ONNX's from opset
// 17; below 17 the LayerNormalization ONNX Runtime registers in the
// default domain for opsets 1 to 16 (ORT 1.24 has no com.microsoft
// LayerNormalization; onnx.checker and other runtimes reject it there).
// Opt-in because the fused kernel is less exact than the written-out form
// on inputs whose mean is large against their spread (below); ORT makes
// the same fusion itself from level basic, so for ORT the result is what
// it would compute anyway. torch 1.13 writes LayerNormalization itself from opset 17, so
// the zoo's opset-17 encoders have nothing to fuse.
//
// Match, anchored at the Div: both ReduceMeans over the same axes, which
// are exactly the k trailing axes of x (negative axes -k..-1, or positive
// ones with x's rank known), keepdims 1 (opset 18's axes input a constant);
// the Pow's exponent a float32 scalar 2; eps a float32 scalar >= 0; the
// constants' ranks at most x's known rank (so no broadcast grows the
// result); d read by the square and the Div alone, every other
// intermediate read only by the next op, none returned by a graph, all in
// the Div's graph. The Mul and Add are taken when the Div's (Mul's) result
// feeds only them and gamma (beta) is a float32 constant whose shape,
// leading 1s dropped, is exactly x's k trailing dims (static); a missing
// gamma becomes ones of that shape, so that case needs those dims too.
//
// Rewrite: LayerNormalization(x, gamma, beta) with axis -k and epsilon
// eps (stash_type float) producing the last op's output value; gamma and
// beta are reshaped into new initializers when they carry leading 1s.
// The fused kernel computes the variance as E[x²] - E[x]² in float32 (ORT's
// CPU kernel), which loses precision when |mean| is much larger than the
// standard deviation; exporters' LayerNorms follow residual adds whose
// means are small.
var fuseLayerNorm = &Pass{
	Name:   "fuse-layernorm",
	Doc:    "replace ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add] with LayerNormalization (with --ort-contrib only)",
	Level:  2,
	Form:   LocalRule,
	Shapes: DeclaredShapes | InferredShapes,
	Run:    runFuseLayerNorm,
}

func runFuseLayerNorm(c *Context) (Stats, error) {
	opset := c.Model.OpsetVersion("")
	if !c.ORTContrib || opset < 1 || !hasOp(c.Model, "ReduceMean") {
		return Stats{}, nil
	}
	shapes, types := c.Shapes(), c.Declared()
	match := func(_ *graphEdit, div *graph.Node) (*layerNorm, bool) {
		return matchLayerNorm(div, opset, shapes, types)
	}
	return Rule[*layerNorm]{OpTypes: []string{"Div"}, Match: match, Apply: func(_ *graphEdit, p *layerNorm) (Stats, error) { return p.rewrite() }}.apply(c.Model)
}

// layerNorm is a matched pattern: x, the normalized trailing dims, eps,
// the gamma and beta constants (nil when absent) and the nodes to remove,
// the last one's output being the result.
type layerNorm struct {
	x           *graph.Value
	rank        int     // x's rank, or a lower bound of it
	normDims    []int64 // x's k trailing dims; -1 where not static
	eps         float32
	gamma, beta *graph.Value
	nodes       []*graph.Node
}

func matchLayerNorm(div *graph.Node, opset int64, shapes valueShapes, types declaredTypes) (*layerNorm, bool) {
	v, ok := matchVariance(div)
	if !ok {
		return nil, false
	}
	g, d := div.Graph(), div.Input(0)
	sub := producedBy(d, g, "Sub")
	if sub == nil || len(sub.Inputs()) != 2 {
		return nil, false
	}
	x, mu := sub.Input(0), sub.Input(1)
	mean := producedBy(mu, g, "ReduceMean")
	if x == nil || mean == nil || onlyReader(mu) != sub || mean.Input(0) != x {
		return nil, false
	}
	rank, rankKnown := shapes.rank(x)
	if !rankKnown {
		rank = types.minRank(x, 32)
	}
	k, ok := trailingMeanAxes(mean, opset, rank, rankKnown)
	if !ok {
		return nil, false
	}
	if k2, ok := trailingMeanAxes(v.meanSq, opset, rank, rankKnown); !ok || k2 != k {
		return nil, false
	}
	rank = max(rank, k) // x has the k axes averaged
	if rank < v.maxConstRank {
		return nil, false
	}
	p := &layerNorm{x: x, rank: rank, eps: float32(v.eps), nodes: []*graph.Node{mean, sub, v.sq, v.meanSq, v.addEps, v.sqrt, div}}
	p.normDims = make([]int64, k)
	for i := range p.normDims {
		p.normDims[i] = -1
	}
	if dims, ok := shapes.dims(x); ok && len(dims) >= k {
		copy(p.normDims, dims[len(dims)-k:])
	}
	p.matchAffine(div)
	if p.gamma == nil && slices.Contains(p.normDims, -1) {
		return nil, false // ones of an unknown shape
	}
	return p, true
}

// variance is the denominator of a decomposed LayerNorm: Div(d,
// Sqrt(Add(ReduceMean(Pow(d, 2) or Mul(d, d)), eps))).
type variance struct {
	sqrt, addEps, meanSq, sq *graph.Node
	eps                      float64
	maxConstRank             int // the highest rank of the constants (eps, 2)
}

// matchVariance matches div's denominator, each value read by the next
// node alone, and d (div's numerator) read by the square and div alone.
func matchVariance(div *graph.Node) (variance, bool) {
	var v variance
	if !isOp(div, "Div") || len(div.Inputs()) != 2 || !singleOutput(div) {
		return v, false
	}
	g := div.Graph()
	d, s := div.Input(0), div.Input(1)
	if v.sqrt = producedBy(s, g, "Sqrt"); v.sqrt == nil || onlyReader(s) != div {
		return v, false
	}
	v.addEps = producedBy(v.sqrt.Input(0), g, "Add")
	if v.addEps == nil || onlyReader(v.sqrt.Input(0)) != v.sqrt || len(v.addEps.Inputs()) != 2 {
		return v, false
	}
	var sum *graph.Value
	for i := range 2 {
		if c, r, ok := scalarConst(v.addEps.Input(i)); ok && c >= 0 && v.addEps.Input(1-i) != nil {
			sum, v.eps, v.maxConstRank = v.addEps.Input(1-i), c, r
			break
		}
	}
	if v.meanSq = producedBy(sum, g, "ReduceMean"); v.meanSq == nil || onlyReader(sum) != v.addEps {
		return v, false
	}
	v.sq = producedBy(v.meanSq.Input(0), g, "Pow", "Mul")
	if v.sq == nil || onlyReader(v.meanSq.Input(0)) != v.meanSq || len(v.sq.Inputs()) != 2 || v.sq.Input(0) != d {
		return v, false
	}
	if isOp(v.sq, "Pow") {
		c, r, ok := scalarConst(v.sq.Input(1))
		if !ok || c != 2 {
			return v, false
		}
		v.maxConstRank = max(v.maxConstRank, r)
	} else if v.sq.Input(1) != d {
		return v, false
	}
	// d feeds the square and the Div, nothing else.
	if d.IsReturned() {
		return v, false
	}
	for _, u := range d.Uses() {
		if u.Node != v.sq && u.Node != div {
			return v, false
		}
	}
	return v, true
}

// matchAffine takes the optional affine part after div: Mul(gamma), then
// Add(beta).
func (p *layerNorm) matchAffine(div *graph.Node) {
	g := div.Graph()
	mul := onlyReader(div.Output(0))
	if !isOp(mul, "Mul") || mul.Graph() != g || !singleOutput(mul) {
		return
	}
	gamma := p.affineOperand(mul, div.Output(0))
	if gamma == nil {
		return
	}
	p.gamma = gamma
	p.nodes = append(p.nodes, mul)
	if add := onlyReader(mul.Output(0)); isOp(add, "Add") && add.Graph() == g && singleOutput(add) {
		if beta := p.affineOperand(add, mul.Output(0)); beta != nil {
			p.beta = beta
			p.nodes = append(p.nodes, add)
		}
	}
}

// trailingMeanAxes returns k when the ReduceMean n averages exactly the k
// trailing axes of its input and keeps them as 1s. Negative axes -k..-1
// are trailing whatever the rank; positive ones need rankKnown.
func trailingMeanAxes(n *graph.Node, opset int64, rank int, rankKnown bool) (int, bool) {
	if n.AttrInt("keepdims", 1) != 1 || n.AttrInt("noop_with_empty_axes", 0) != 0 {
		return 0, false
	}
	var axes []int64
	if opset < 18 {
		if len(n.Inputs()) != 1 || n.Attr("axes") == nil {
			return 0, false
		}
		axes = n.AttrInts("axes")
	} else {
		if len(n.Inputs()) != 2 || n.Attr("axes") != nil {
			return 0, false
		}
		t := n.Input(1).ConstantTensor()
		if t == nil || t.DType != graph.Int64 {
			return 0, false
		}
		var err error
		if axes, err = t.Int64s(); err != nil {
			return 0, false
		}
	}
	k := len(axes)
	if k == 0 || rankKnown && rank < k {
		return 0, false
	}
	seen := map[int64]bool{}
	for _, a := range axes {
		switch {
		case a < 0 && a >= -int64(k):
			a += int64(k) // -k..-1 -> 0..k-1
		case a >= 0 && rankKnown && a >= int64(rank-k) && a < int64(rank):
			a -= int64(rank - k)
		default:
			return 0, false
		}
		if seen[a] {
			return 0, false
		}
		seen[a] = true
	}
	return k, true
}

// affineOperand returns the constant operand of the Mul or Add n whose
// other operand is y, when its shape (leading 1s dropped) is the
// normalized shape.
func (p *layerNorm) affineOperand(n *graph.Node, y *graph.Value) *graph.Value {
	if len(n.Inputs()) != 2 {
		return nil
	}
	for i := range 2 {
		if n.Input(i) != y {
			continue
		}
		c := n.Input(1 - i)
		t, _, ok := floatConst(c)
		if !ok || len(t.Dims) > p.rank {
			return nil
		}
		dims := t.Dims
		for len(dims) > len(p.normDims) && dims[0] == 1 {
			dims = dims[1:]
		}
		if !slices.Equal(dims, p.normDims) {
			return nil
		}
		return c
	}
	return nil
}

func (p *layerNorm) rewrite() (Stats, error) {
	last := p.nodes[len(p.nodes)-1]
	g := last.Graph()
	var gamma, beta *graph.Value
	var err error
	if gamma, err = p.param(g, p.gamma, 1, "_gamma"); err != nil {
		return Stats{}, errf(last, "%v", err)
	}
	ins := []*graph.Value{p.x, gamma}
	if p.beta != nil {
		if beta, err = p.param(g, p.beta, 0, "_beta"); err != nil {
			return Stats{}, errf(last, "%v", err)
		}
		ins = append(ins, beta)
	}
	out, err := takeOutput(last)
	if err != nil {
		return Stats{}, err
	}
	n, err := g.InsertNodeBefore(last, "LayerNormalization", ins, []*graph.Value{out})
	if err != nil {
		return Stats{}, err
	}
	n.Name = last.Name
	n.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: -int64(len(p.normDims))})
	n.SetAttr(&graph.Attr{Name: "epsilon", Type: graph.AttrFloat, Float: p.eps})
	return Stats{Removed: len(p.nodes), Added: 1}, g.RemoveNodes(p.nodes)
}

// param returns v when its dims are the normalized shape, a reshaped copy
// when they carry leading 1s, or (v nil) a constant of fill.
func (p *layerNorm) param(g *graph.Graph, v *graph.Value, fill float64, suffix string) (*graph.Value, error) {
	if v != nil {
		t, f, _ := floatConst(v)
		if slices.Equal(t.Dims, p.normDims) {
			return v, nil
		}
		t2, err := graph.NewFloat32Tensor(g.UniqueName(v.Name+suffix), p.normDims, f)
		if err != nil {
			return nil, err
		}
		return g.AddInitializer(t2)
	}
	n := int64(1)
	for _, d := range p.normDims {
		n *= d
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = fill
	}
	return addFloatInit(g, p.x.Name+"_layernorm"+suffix, p.normDims, vals)
}
