package passes

import "github.com/optc-dev/optc/graph"

// fuseBiasAdd folds an Add of a per-channel constant after a Conv or
// ConvTranspose into the op's bias. Exporters write the bias this way
// (PaddleOCR det: ConvTranspose -> Add -> BatchNormalization), and the
// separate Add hides the op from fuse-conv-bn.
var fuseBiasAdd = &Pass{
	Name:  "fuse-bias-add",
	Doc:   "fold an Add of a per-channel constant after Conv/ConvTranspose into its bias",
	Level: 2,
	Form:  LocalRule,
	Run:   runFuseBiasAdd,
}

// biasAdd is a matched op -> Add pair and the new bias.
type biasAdd struct {
	op, add *graph.Node
	bias    []float64
}

func runFuseBiasAdd(c *Context) (Stats, error) {
	return Rule[*biasAdd]{OpTypes: []string{"Add"}, Match: func(_ *graphEdit, add *graph.Node) (*biasAdd, bool) { return matchBiasAdd(add) },
		Apply: func(_ *graphEdit, p *biasAdd) (Stats, error) { return p.rewrite() }}.apply(c.Model)
}

func matchBiasAdd(add *graph.Node) (*biasAdd, bool) {
	if !isOp(add, "Add") || len(add.Inputs()) != 2 || !singleOutput(add) {
		return nil, false
	}
	for i := range 2 {
		x, k := add.Input(i), add.Input(1-i)
		op := producedBy(x, add.Graph(), "Conv", "ConvTranspose")
		if op == nil || onlyReader(x) != add || k == nil {
			continue
		}
		wt := op.Input(1).ConstantTensor()
		if wt == nil || wt.DType != graph.Float {
			continue
		}
		m := outputChannels(op, wt)
		kt, kv, ok := floatConst(k)
		if m == 0 || !ok {
			continue
		}
		per, ok := perChannel(kt.Dims, kv, len(wt.Dims), m)
		if !ok {
			continue
		}
		b, ok := convBias(op, m)
		if !ok {
			continue
		}
		for c := range b {
			b[c] += per[c]
		}
		if !allFinite(b) {
			continue
		}
		return &biasAdd{op: op, add: add, bias: b}, true
	}
	return nil, false
}

// perChannel returns a constant of the given dims as one value per channel
// of an NCHW-style output of the given rank with m channels, when it
// broadcasts along the channel axis only (a scalar counts) and adds no
// dimension to the output.
func perChannel(dims []int64, vals []float32, rank int, m int64) ([]float64, bool) {
	if len(dims) > rank {
		return nil, false
	}
	ch := 1 - (rank - len(dims)) // the channel axis in dims, when >= 0
	out := make([]float64, m)
	if len(vals) == 1 {
		for c := range out {
			out[c] = float64(vals[0])
		}
		return out, true
	}
	for i, d := range dims {
		if i != ch && d != 1 || i == ch && d != m {
			return nil, false
		}
	}
	for c := range out {
		out[c] = float64(vals[c])
	}
	return out, true
}

func (p *biasAdd) rewrite() (Stats, error) {
	g := p.op.Graph()
	b, err := addFloatInit(g, p.op.Input(1).Name+"_bias", []int64{int64(len(p.bias))}, p.bias)
	if err != nil {
		return Stats{}, err
	}
	p.op.SetInput(2, b)
	if err := handOver(p.op, p.add); err != nil {
		return Stats{}, err
	}
	if err := g.RemoveNodes([]*graph.Node{p.add}); err != nil {
		return Stats{}, err
	}
	return Stats{Removed: 1, Rewritten: 1}, nil
}
