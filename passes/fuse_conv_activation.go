package passes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// fuseConvActivation pairs a Conv with the activation that alone reads its
// result, so that a runtime applies the activation while the conv's output
// is still in cache. ONNX has no fused conv, so by default the fusion is
// recorded, not performed: the Conv gets the metadata
// optc.fused_activation (the activation's op type) and
// optc.fused_activation_node (its node name, given one when it has none),
// and both nodes stay; targets that understand the note (and quantizers
// that must keep the pair together) read it. With Context.FusedConv the
// pair becomes one com.microsoft FusedConv, which only ONNX Runtime runs.
//
// Match: a Conv (default domain, with or without bias) whose one output
// is read by nothing but a Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid or
// Clip (constant bounds: attributes before opset 11, inputs after) in the
// same graph, and returned by no graph. For FusedConv the Conv's weight
// must also be float32 (ORT's kernel is float-only).
//
// Rewrite: metadata on the Conv (a pair already noted is not counted
// again, so the pipeline's fixed point ends), or FusedConv with the Conv's
// inputs and attributes plus activation and activation_params, producing
// the activation's output value; the com.microsoft opset is imported.
var fuseConvActivation = &Pass{
	Name:   "fuse-conv-activation",
	Doc:    "pair Conv with its activation: note it in metadata, or emit com.microsoft FusedConv",
	Level:  2,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	After: []Follows{
		{"fuse-conv-bn", "a BatchNormalization between a conv and its activation is folded into the conv first, so that the two meet"},
		{"fuse-bias-add", "likewise an Add of a per-channel constant between them"},
	},
	Run: runFuseConvActivation,
}

// Metadata keys the pass sets on a Conv.
const (
	metaFusedActivation     = "optc.fused_activation"
	metaFusedActivationNode = "optc.fused_activation_node"
)

func runFuseConvActivation(c *Context) (Stats, error) {
	opset, types := c.Model.OpsetVersion(""), c.Declared()
	match := func(_ *graphEdit, conv *graph.Node) (*convActivation, bool) {
		p, ok := matchConvActivation(conv, opset)
		return p, ok && (!c.FusedConv || isFloat32(types, conv.Input(1)))
	}
	rewrite := func(_ *graphEdit, p *convActivation) (Stats, error) { return p.annotate(), nil }
	if c.FusedConv {
		rewrite = func(_ *graphEdit, p *convActivation) (Stats, error) { return p.fuse() }
	}
	st, err := Rule[*convActivation]{OpTypes: []string{"Conv"}, Match: match, Apply: rewrite}.apply(c.Model)
	if err == nil && c.FusedConv && st.Added > 0 {
		importDomain(c.Model, msDomain)
	}
	return st, err
}

const msDomain = "com.microsoft"

// convActivation is a matched Conv -> activation pair, with the
// activation's parameters as FusedConv takes them.
type convActivation struct {
	conv, act *graph.Node
	params    []float32
}

func matchConvActivation(conv *graph.Node, opset int64) (*convActivation, bool) {
	if !isOp(conv, "Conv") || !singleOutput(conv) {
		return nil, false
	}
	y := conv.Output(0)
	act := onlyReader(y)
	if act == nil || act.Graph() != conv.Graph() || act.Input(0) != y || !singleOutput(act) {
		return nil, false
	}
	p := &convActivation{conv: conv, act: act}
	switch {
	case isOp(act, "Relu", "Sigmoid", "Tanh"):
		if len(act.Inputs()) != 1 {
			return nil, false
		}
	case isOp(act, "LeakyRelu"):
		p.params = []float32{act.AttrFloat("alpha", 0.01)}
	case isOp(act, "HardSigmoid"):
		p.params = []float32{act.AttrFloat("alpha", 0.2), act.AttrFloat("beta", 0.5)}
	case isOp(act, "Clip"):
		lo, hi, ok := clipBounds(act, opset)
		if !ok {
			return nil, false
		}
		// ORT's own fusion spells an absent bound as float's extremes.
		p.params = []float32{float32(max(lo, -math.MaxFloat32)), float32(min(hi, math.MaxFloat32))}
	default:
		return nil, false
	}
	return p, true
}

// isFloat32 reports whether v is known to hold float32 elements.
func isFloat32(types declaredTypes, v *graph.Value) bool {
	if v == nil {
		return false
	}
	if t := v.ConstantTensor(); t != nil {
		return t.DType == graph.Float
	}
	return types.floatTensor(v)
}

// annotate records the pair on the Conv; a pair noted already is no change.
func (p *convActivation) annotate() Stats {
	if p.act.Name != "" && p.conv.Meta(metaFusedActivation) == p.act.OpType && p.conv.Meta(metaFusedActivationNode) == p.act.Name {
		return Stats{}
	}
	if p.act.Name == "" {
		p.act.Name = uniqueNodeName(p.act.Graph(), p.act.OpType+"_"+p.act.Output(0).Name)
	}
	p.conv.SetMeta(metaFusedActivation, p.act.OpType)
	p.conv.SetMeta(metaFusedActivationNode, p.act.Name)
	return Stats{Rewritten: 1}
}

// fuse replaces the pair with one FusedConv.
func (p *convActivation) fuse() (Stats, error) {
	g := p.act.Graph()
	out, err := takeOutput(p.act)
	if err != nil {
		return Stats{}, err
	}
	n, err := g.InsertNodeBefore(p.act, "FusedConv", p.conv.Inputs(), []*graph.Value{out})
	if err != nil {
		return Stats{}, err
	}
	n.Name, n.Domain = p.conv.Name, msDomain
	for _, a := range p.conv.Attrs {
		n.SetAttr(a)
	}
	n.SetAttr(&graph.Attr{Name: "activation", Type: graph.AttrString, String: []byte(p.act.OpType)})
	if len(p.params) > 0 {
		n.SetAttr(&graph.Attr{Name: "activation_params", Type: graph.AttrFloats, Floats: p.params})
	}
	for _, kv := range p.conv.Metadata {
		if kv.Key != metaFusedActivation && kv.Key != metaFusedActivationNode {
			n.SetMeta(kv.Key, kv.Value)
		}
	}
	return Stats{Removed: 2, Added: 1}, g.RemoveNodes([]*graph.Node{p.conv, p.act})
}
