package passes

import (
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// fuseAttention rewrites the scaled-dot-product attention torch's
// nn.MultiheadAttention export writes (seq-first, heads merged into the
// batch: [S, B·H, d]) into ONNX Runtime's com.microsoft MultiHeadAttention,
// one kernel for the head split, Q·Kᵀ, the scale, the mask, Softmax, ·V
// and the head merge. ONNX's own Attention needs opset 23 (these exports
// are opset 17, and optc does not upgrade past 13), so the pass writes
// ORT's operator and runs only with Context.ORTContrib. The projections
// stay as they are (the packed in-projection MatMul + Add + Slices, the
// output Gemm).
//
// Match, anchored at the Softmax (float32 rank-3 input, axis -1 or 2;
// below opset 13, where the default axis is 1, the axis must be given),
// everything in one graph:
//
//	qh = Transpose[1,0,2](Reshape(q, ·))   q [S, B, D] -> [B·H, S, d]
//	kt = Transpose[1,2,0](Reshape(k, ·))   k [L, B, D] -> [B·H, d, L]
//	vh = Transpose[1,0,2](Reshape(v, ·))   v [L, B, D] -> [B·H, L, d]
//	scores = MatMul(qh·a, kt)·b (+ mask)   a, b: optional Mul or Div by
//	                                       float32 scalar constants
//	out = Transpose[1,0,2](MatMul(Softmax(scores), vh))   [S, B·H, d]
//
// The head split is proven from inferred shapes, not from the Reshape's
// shape input (which the dynamic exports compute at run time): q, k and v
// are rank 3 with the same static last dim D; each Reshape's result is
// rank 3, its first dim provably the input's first dim (the same static
// value or the same symbol) and its last dim a static d dividing D. The
// element count then fixes the middle dim to B·(D/d), and row-major order
// makes it the canonical split into H = D/d heads of d. H must be at least
// 2 (with H = 1, MatMul's broadcasting could pair a batch of 1 with a
// batch of B) and q, k, v must split into the same H and d.
//
// The mask, when the Softmax's input is an Add, is the other operand and
// must be exactly torch's key-padding mask: Where(c, f, 0), optionally
// times a positive float32 scalar constant, where f is a float32 scalar
// constant below 0 (-inf in torch), 0 is a float32 zero constant whose
// dims are 1 or c's, or ConstantOfShape(Shape(c)) of 0, and
//
//	c = Reshape(Expand(Reshape(E, ·), [1, H, 1, 1]), ·)
//	E bool [B, L] -> [B, 1, 1, L] -> [B, H, 1, L] -> [B·H, 1, L]
//
// each Reshape proven from inferred shapes as above (first dim kept, the
// inner 1s static, the last dim provably L). E true means "do not attend",
// so the key-padding mask ORT wants (int32, 1 = attend) is Cast(Not(E)),
// and MultiHeadAttention's mask_filter_value is f (times the scalar),
// which its kernel adds to the masked scores as the export does. When E's
// length is not provably the keys' length L (the dynamic exports name them
// differently), the mask is expanded to K's [B, L] first, so that an E of
// length 1 broadcasts over the keys as the Add did. Any other
// additive mask (a causal one, a float mask, a mask over queries) is
// refused: the model stays byte for byte.
//
// Every intermediate from the scaled scores to the Softmax's result and
// ·V's result is read only by the next node and returned by no graph (so
// the fusion removes them and saves their work); the head-split Reshapes
// and Transposes may have other readers (the dynamic export reads their
// shapes) and are left for dead-code to remove when nothing else reads
// them.
//
// Rewrite: MultiHeadAttention(Transpose[1,0,2](q), Transpose[1,0,2](k),
// Transpose[1,0,2](v), key_padding_mask) with num_heads H and scale a·b,
// whose [B, S, D] result is transposed back to [S, B, D] and reshaped to
// [S, B·H, d] ([0, -1, d]): the value the matched Transpose produced, in
// the same layout, so its readers are untouched.
var fuseAttention = &Pass{
	Name:   "fuse-attention",
	Doc:    "rewrite torch's multi-head attention (head split, Q·Kᵀ, scale, key-padding mask, Softmax, ·V) into com.microsoft MultiHeadAttention (ORT-only output)",
	Level:  2,
	Form:   LocalRule,
	Shapes: InferredShapes,
	Run:    runFuseAttention,
}

func runFuseAttention(c *Context) (Stats, error) {
	if !c.ORTContrib || !hasOp(c.Model, "Softmax") {
		return Stats{}, nil
	}
	shapes := c.Shapes()
	opset := c.Model.OpsetVersion("")
	match := func(_ *graphEdit, sm *graph.Node) (*attention, bool) { return matchAttention(sm, shapes, opset) }
	st, err := Rule[*attention]{OpTypes: []string{"Softmax"}, Match: match, Apply: func(_ *graphEdit, p *attention) (Stats, error) { return p.rewrite() }}.apply(c.Model)
	if err == nil && st.Added > 0 {
		importDomain(c.Model, msDomain)
	}
	return st, err
}

// attention is a matched attention core.
type attention struct {
	q, k, v      *graph.Value
	heads, d     int64
	scale        float64
	padding      *graph.Value // E, bool [B, L], true = masked; nil without a mask
	paddingHeads int64        // the H the mask was expanded to
	// expandMask: E's length is not provably the keys' (it may be 1 and
	// broadcast over them), so the key-padding mask is expanded to [B, L].
	expandMask  bool
	filterValue float64
	// chain are the nodes only the pattern reads, removed by the rewrite;
	// out is the last of them (the head-merge Transpose).
	chain []*graph.Node
	out   *graph.Node
}

func matchAttention(sm *graph.Node, shapes valueShapes, opset int64) (*attention, bool) {
	g := sm.Graph()
	smIn := sm.Input(0)
	if !singleOutput(sm) || smIn == nil || shapes.Get(smIn) == nil || shapes.Get(smIn).Elem != graph.Float {
		return nil, false
	}
	if r, ok := shapes.rank(smIn); !ok || r != 3 {
		return nil, false
	}
	if axis := sm.AttrInt("axis", -1); !(axis == -1 || axis == 2) || opset < 13 && sm.Attr("axis") == nil {
		// Below opset 13 the default axis is 1 (flattening): refuse it.
		return nil, false
	}
	p := &attention{scale: 1, chain: []*graph.Node{sm}}
	// Softmax -> MatMul(·, vh) -> Transpose[1,0,2].
	pv := onlyReader(sm.Output(0))
	if !isOp(pv, "MatMul") || pv.Input(0) != sm.Output(0) || !singleOutput(pv) {
		return nil, false
	}
	p.out = onlyReader(pv.Output(0))
	if !isOp(p.out, "Transpose") || !singleOutput(p.out) || !slices.Equal(p.out.AttrInts("perm"), []int64{1, 0, 2}) {
		return nil, false
	}
	p.chain = append(p.chain, pv, p.out)
	// The scores: the scaled product, or an Add of it and the mask.
	qk, steps, scale, ok := scaledMatMul(smIn, g)
	if !ok {
		add := producedBy(smIn, g, "Add")
		if add == nil || len(add.Inputs()) != 2 || onlyReader(smIn) != sm {
			return nil, false
		}
		for i := range 2 {
			if qk, steps, scale, ok = scaledMatMul(add.Input(i), g); ok && p.keyPadding(add.Input(1-i), g, shapes) {
				break
			}
			ok = false
		}
		if !ok {
			return nil, false
		}
		p.chain = append(p.chain, add)
	}
	p.chain = append(append(p.chain, steps...), qk)
	p.scale *= scale
	// Q: an optional scale, then the head split.
	qs := qk.Input(0)
	if n, x, f, ok := scaleStep(qs, g); ok {
		if onlyReader(qs) != qk {
			return nil, false
		}
		p.chain = append(p.chain, n)
		p.scale *= f
		qs = x
	}
	var hq, dq, hk, dk, hv, dv int64
	if p.q, hq, dq, ok = headSplit(qs, g, shapes, []int64{1, 0, 2}); !ok {
		return nil, false
	}
	if p.k, hk, dk, ok = headSplit(qk.Input(1), g, shapes, []int64{1, 2, 0}); !ok {
		return nil, false
	}
	if p.v, hv, dv, ok = headSplit(pv.Input(1), g, shapes, []int64{1, 0, 2}); !ok {
		return nil, false
	}
	if hq != hk || hq != hv || dq != dk || dq != dv || hq < 2 {
		return nil, false
	}
	p.heads, p.d = hq, dq
	if p.padding != nil {
		if p.paddingHeads != p.heads {
			return nil, false
		}
		e, k := shapes.Get(p.padding), shapes.Get(p.k)
		p.expandMask = !sameDim(e.Shape[1], k.Shape[0])
	}
	if !(p.scale > 0) || math.IsInf(p.scale, 0) || float32(p.scale) == 0 {
		return nil, false
	}
	return p, true
}

// scaledMatMul matches v = MatMul(·, ·) under optional scale nodes, each
// value on the way read only by the next node and returned by no graph;
// it returns the MatMul, the scale nodes and the product of their factors.
func scaledMatMul(v *graph.Value, g *graph.Graph) (*graph.Node, []*graph.Node, float64, bool) {
	var steps []*graph.Node
	scale := 1.0
	for {
		if onlyReader(v) == nil {
			return nil, nil, 0, false
		}
		n, x, f, ok := scaleStep(v, g)
		if !ok {
			break
		}
		steps, scale, v = append(steps, n), scale*f, x
	}
	qk := producedBy(v, g, "MatMul")
	return qk, steps, scale, qk != nil
}

// scaleStep: v = x·f or x/f with f a float32 scalar constant (rank ≤ 3,
// so it broadcasts nothing onto the rank-3 operands here); returns the
// node, x and the factor (1/f for Div).
func scaleStep(v *graph.Value, g *graph.Graph) (*graph.Node, *graph.Value, float64, bool) {
	n := producedBy(v, g, "Mul", "Div")
	if n == nil || len(n.Inputs()) != 2 {
		return nil, nil, 0, false
	}
	for i := range 2 {
		if n.OpType == "Div" && i == 0 {
			continue // c / x is not a scale of x
		}
		c, rank, ok := scalarConst(n.Input(i))
		if !ok || rank > 3 || c == 0 || math.IsInf(c, 0) || math.IsNaN(c) || n.Input(1-i) == nil {
			continue
		}
		if n.OpType == "Div" {
			c = 1 / c
		}
		return n, n.Input(1 - i), c, true
	}
	return nil, nil, 0, false
}

// headSplit matches Transpose[perm](Reshape(x, ·)) where x is [S, B, D]
// and the Reshape's result [S, B·H, d] (see the pass comment for the
// proof); it returns x, H and d.
func headSplit(v *graph.Value, g *graph.Graph, shapes valueShapes, perm []int64) (*graph.Value, int64, int64, bool) {
	t := producedBy(v, g, "Transpose")
	if t == nil || !slices.Equal(t.AttrInts("perm"), perm) {
		return nil, 0, 0, false
	}
	r := producedBy(t.Input(0), g, "Reshape")
	if r == nil {
		return nil, 0, 0, false
	}
	x := r.Input(0)
	in, out := shapes.Get(x), shapes.Get(r.Output(0))
	if in == nil || out == nil || in.Kind != graph.KindTensor || out.Kind != graph.KindTensor || in.Elem != graph.Float ||
		len(in.Shape) != 3 || len(out.Shape) != 3 {
		return nil, 0, 0, false
	}
	D, d := in.Shape[2], out.Shape[2]
	if D.Kind != graph.DimStatic || d.Kind != graph.DimStatic || d.Value <= 0 || D.Value%d.Value != 0 ||
		!sameDim(in.Shape[0], out.Shape[0]) {
		return nil, 0, 0, false
	}
	return x, D.Value / d.Value, d.Value, true
}

// sameDim reports whether two dims are provably equal: the same static
// value, or the same named symbol.
func sameDim(a, b graph.Dim) bool {
	return a.Kind == graph.DimStatic && b.Kind == graph.DimStatic && a.Value == b.Value ||
		a.Kind == graph.DimSymbolic && b.Kind == graph.DimSymbolic && a.Param != "" && a.Param == b.Param
}

// keyPadding matches torch's key-padding mask term (see the pass
// comment) and records E, the heads it was expanded to and the fill value.
func (p *attention) keyPadding(v *graph.Value, g *graph.Graph, shapes valueShapes) bool {
	factor := 1.0
	if _, x, f, ok := scaleStep(v, g); ok {
		if f <= 0 {
			return false
		}
		factor, v = f, x
	}
	w := producedBy(v, g, "Where")
	if w == nil || len(w.Inputs()) != 3 {
		return false
	}
	cond, fill, zero := w.Input(0), w.Input(1), w.Input(2)
	f, rank, ok := scalarConst(fill)
	if !ok || rank != 0 || !(f < 0) {
		return false
	}
	cd, ok := shapes.dims(cond)
	if !ok || len(cd) != 3 || !p.zeros(zero, cond, cd, g) {
		return false
	}
	// c = Reshape(Expand(Reshape(E, ·), [1, H, 1, 1]), ·)
	r3 := producedBy(cond, g, "Reshape")
	if r3 == nil {
		return false
	}
	ex := producedBy(r3.Input(0), g, "Expand")
	if ex == nil {
		return false
	}
	es, ok := constInts(ex.Input(1))
	if !ok || len(es) != 4 || es[0] != 1 || es[1] < 2 || es[2] != 1 || es[3] != 1 {
		return false
	}
	r1 := producedBy(ex.Input(0), g, "Reshape")
	if r1 == nil {
		return false
	}
	e := r1.Input(0)
	et, r1t, r3t := shapes.Get(e), shapes.Get(r1.Output(0)), shapes.Get(cond)
	if et == nil || r1t == nil || r3t == nil || et.Kind != graph.KindTensor || et.Elem != graph.Bool ||
		len(et.Shape) != 2 || len(r1t.Shape) != 4 || len(r3t.Shape) != 3 {
		return false
	}
	one := graph.StaticDim(1)
	// [B, L] -> [B, 1, 1, L]: first dim kept, inner 1s, so the last is L.
	if !sameDim(et.Shape[0], r1t.Shape[0]) || !sameDim(r1t.Shape[1], one) || !sameDim(r1t.Shape[2], one) {
		return false
	}
	// [B, H, 1, L] -> [B·H, 1, L]: the last dim provably L.
	if !sameDim(r3t.Shape[1], one) || !(sameDim(r3t.Shape[2], r1t.Shape[3]) || sameDim(r3t.Shape[2], et.Shape[1])) {
		return false
	}
	p.padding, p.paddingHeads, p.filterValue = e, es[1], f*factor
	if math.IsNaN(p.filterValue) {
		return false
	}
	return true
}

// zeros reports whether z is a float32 zero that Where(c, f, z) broadcasts
// to c's shape cd and no further: a constant of zeros whose dims (aligned
// right) are 1 or c's static dims, or ConstantOfShape(Shape(c)) of 0.
func (p *attention) zeros(z, cond *graph.Value, cd []int64, g *graph.Graph) bool {
	if t, f, ok := floatConst(z); ok {
		if len(t.Dims) > len(cd) {
			return false
		}
		for i, n := range t.Dims {
			if c := cd[len(cd)-len(t.Dims)+i]; n != 1 && (c < 0 || n != c) {
				return false
			}
		}
		for _, x := range f {
			if x != 0 {
				return false
			}
		}
		return true
	}
	cs := producedBy(z, g, "ConstantOfShape")
	if cs == nil {
		return false
	}
	sh := producedBy(cs.Input(0), g, "Shape")
	if sh == nil || sh.Input(0) != cond || sh.Attr("start") != nil || sh.Attr("end") != nil {
		return false
	}
	a := cs.Attr("value")
	if a == nil {
		return true // the default fill is a float32 0
	}
	if a.Type != graph.AttrTensor || a.Tensor == nil || a.Tensor.DType != graph.Float {
		return false
	}
	f, err := a.Tensor.Float32s()
	return err == nil && len(f) == 1 && f[0] == 0
}

// expandToKeys writes Expand(mask, Slice(Shape(k), [0], [2])): mask
// broadcast to k's [B, L].
func (p *attention) expandToKeys(g *graph.Graph, node func(string, []*graph.Value, ...*graph.Value) (*graph.Node, error), mask, k *graph.Value) (*graph.Value, error) {
	shape, err := node("Shape", []*graph.Value{k}, nil)
	if err != nil {
		return nil, err
	}
	bounds := make([]*graph.Value, 2)
	for i, x := range []int64{0, 2} {
		t, err := graph.NewInt64Tensor(g.UniqueName("attention_mask_bound"), []int64{1}, []int64{x})
		if err != nil {
			return nil, errf(p.out, "%v", err)
		}
		if bounds[i], err = g.AddInitializer(t); err != nil {
			return nil, errf(p.out, "%v", err)
		}
	}
	bl, err := node("Slice", []*graph.Value{shape.Output(0), bounds[0], bounds[1]}, nil)
	if err != nil {
		return nil, err
	}
	ex, err := node("Expand", []*graph.Value{mask, bl.Output(0)}, nil)
	if err != nil {
		return nil, err
	}
	return ex.Output(0), nil
}

func (p *attention) rewrite() (Stats, error) {
	g := p.out.Graph()
	base := p.chain[0].Name // the Softmax's
	if base == "" {
		base = "attention"
	}
	added := 0
	node := func(op string, ins []*graph.Value, outs ...*graph.Value) (*graph.Node, error) {
		for i, v := range outs {
			if v != nil {
				continue
			}
			nv, err := g.NewValue(g.UniqueName(base + "/" + op + "_output"))
			if err != nil {
				return nil, errf(p.out, "%v", err)
			}
			outs[i] = nv
		}
		n, err := g.InsertNodeBefore(p.out, op, ins, outs)
		if err != nil {
			return nil, errf(p.out, "%v", err)
		}
		n.Name = uniqueNodeName(g, base+"/"+op)
		added++
		return n, nil
	}
	perm := &graph.Attr{Name: "perm", Type: graph.AttrInts, Ints: []int64{1, 0, 2}}
	batchFirst := func(x *graph.Value) (*graph.Value, error) {
		n, err := node("Transpose", []*graph.Value{x}, nil)
		if err != nil {
			return nil, err
		}
		n.SetAttr(perm)
		return n.Output(0), nil
	}
	ins := make([]*graph.Value, 3, 5)
	for i, x := range []*graph.Value{p.q, p.k, p.v} {
		t, err := batchFirst(x)
		if err != nil {
			return Stats{}, err
		}
		ins[i] = t
	}
	if p.padding != nil {
		not, err := node("Not", []*graph.Value{p.padding}, nil)
		if err != nil {
			return Stats{}, err
		}
		cast, err := node("Cast", []*graph.Value{not.Output(0)}, nil)
		if err != nil {
			return Stats{}, err
		}
		cast.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Int32)})
		mask := cast.Output(0)
		if p.expandMask {
			// Expand(mask, Shape(K)[0:2]): [B, 1] broadcast over the keys
			// as the Add did; [B, L] unchanged.
			if mask, err = p.expandToKeys(g, node, mask, ins[1]); err != nil {
				return Stats{}, err
			}
		}
		ins = append(ins, nil, mask) // no bias; key_padding_mask
	}
	mha, err := node("MultiHeadAttention", ins, nil)
	if err != nil {
		return Stats{}, err
	}
	mha.Domain = msDomain
	mha.SetAttr(&graph.Attr{Name: "num_heads", Type: graph.AttrInt, Int: p.heads})
	mha.SetAttr(&graph.Attr{Name: "scale", Type: graph.AttrFloat, Float: float32(p.scale)})
	if p.padding != nil {
		mha.SetAttr(&graph.Attr{Name: "mask_filter_value", Type: graph.AttrFloat, Float: float32(p.filterValue)})
	}
	seqFirst, err := batchFirst(mha.Output(0)) // [B, S, D] -> [S, B, D]
	if err != nil {
		return Stats{}, err
	}
	shape, err := graph.NewInt64Tensor(g.UniqueName(base+"/heads_shape"), []int64{3}, []int64{0, -1, p.d})
	if err != nil {
		return Stats{}, errf(p.out, "%v", err)
	}
	sv, err := g.AddInitializer(shape)
	if err != nil {
		return Stats{}, errf(p.out, "%v", err)
	}
	out, err := takeOutput(p.out)
	if err != nil {
		return Stats{}, errf(p.out, "%v", err)
	}
	if _, err := node("Reshape", []*graph.Value{seqFirst, sv}, out); err != nil { // [S, B·H, d], as before
		return Stats{}, err
	}
	if err := g.RemoveNodes(p.chain); err != nil {
		return Stats{}, errf(mha, "%v", err)
	}
	return Stats{Removed: len(p.chain), Added: added}, nil
}
