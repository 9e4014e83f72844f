package passes

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// hardSigmoidConvBridge gives the HardSigmoid of a HardSwish, x ·
// HardSigmoid(x) with x a conv's output, an identity depthwise 1x1 conv
// of its own to read x through: HardSigmoid(Conv_id(x)). ONNX Runtime's
// CPU provider fuses a HardSigmoid into the conv before it only when that
// conv has no other reader, and its NCHWc layout takes Relu, Sigmoid and
// Tanh but not HardSigmoid on their own; so each HardSwish leaves the
// blocked layout and comes back (two reorders of the activation) around a
// HardSigmoid and a Mul in plain NCHW. With the bridge, ORT fuses the
// HardSigmoid into the identity conv and the Mul of two blocked tensors
// stays blocked. A HardSwish node (opset 14) becomes x · HardSigmoid(
// Conv_id(x)) the same way (ORT runs it as that HardSigmoid and Mul).
//
// Exact: the identity conv multiplies each channel by 1 (no bias).
// Only where x comes from a Conv whose output channels (its weight's
// first dim) are a multiple of Context.ChannelBlock, since ORT takes a
// depthwise conv into its blocked layout only then (pad-conv-channels,
// which runs before, makes them so), and only for a HardSigmoid whose x
// has another reader (else ORT fuses it into the conv without help).
var hardSigmoidConvBridge = &Pass{
	Name:   "hardsigmoid-conv-bridge",
	Doc:    "ORT CPU: read a HardSwish's x through an identity depthwise conv so HardSigmoid fuses into it (--nchwc-block)",
	Level:  OnRequest,
	Form:   LocalRule,
	Shapes: NoShapes,
	After: []Follows{
		{"pad-conv-channels", "it bridges only convs whose channels are a multiple of the block, which pad-conv-channels makes"},
	},
	Run: runHardSigmoidConvBridge,
}

func runHardSigmoidConvBridge(c *Context) (Stats, error) {
	if c.ChannelBlock < 2 || hasSubgraphs(c.Model) {
		return Stats{}, nil
	}
	block := int64(c.ChannelBlock)
	return Rule[*graph.Node]{
		OpTypes: []string{"HardSigmoid", "HardSwish"},
		Match: func(_ *graphEdit, n *graph.Node) (*graph.Node, bool) {
			_, ok := bridgeable(n, block)
			return n, ok
		},
		Apply: func(_ *graphEdit, n *graph.Node) (Stats, error) {
			channels, _ := bridgeable(n, block)
			return bridgeHardSigmoid(n, channels)
		},
	}.apply(c.Model)
}

// bridgeHardSigmoid reads n's x through an identity depthwise conv of its
// channels: a HardSigmoid in place, a HardSwish by becoming
// Mul(x, HardSigmoid(Conv_id(x))), the Mul taking over its output.
func bridgeHardSigmoid(n *graph.Node, channels int64) (Stats, error) {
	g := n.Graph()
	var st Stats
	x := n.Input(0)
	id, err := identityConv(g, n, x, channels)
	if err != nil {
		return st, fmt.Errorf("node %s: %w", n, err)
	}
	st.Added++
	if n.OpType == "HardSigmoid" {
		n.SetInput(0, id)
		st.Rewritten++
		return st, nil
	}
	hs, err := g.NewValue(g.UniqueName(x.Name + "_hardsigmoid"))
	if err != nil {
		return st, err
	}
	sig, err := g.InsertNodeBefore(n, "HardSigmoid", []*graph.Value{id}, []*graph.Value{hs})
	if err != nil {
		return st, err
	}
	sig.SetAttr(&graph.Attr{Name: "alpha", Type: graph.AttrFloat, Float: 1.0 / 6})
	sig.SetAttr(&graph.Attr{Name: "beta", Type: graph.AttrFloat, Float: 0.5})
	out, err := takeOutput(n)
	if err != nil {
		return st, err
	}
	if _, err := g.InsertNodeBefore(n, "Mul", []*graph.Value{x, hs}, []*graph.Value{out}); err != nil {
		return st, err
	}
	if err := g.RemoveNode(n); err != nil {
		return st, err
	}
	st.Added += 2
	st.Removed++
	return st, nil
}

// bridgeable reports whether n is a HardSigmoid or HardSwish to bridge,
// and the channels of its input.
func bridgeable(n *graph.Node, block int64) (int64, bool) {
	if !isOp(n, "HardSigmoid", "HardSwish") || len(n.Inputs()) != 1 || n.Input(0) == nil {
		return 0, false
	}
	x := n.Input(0)
	conv := x.Producer()
	if conv == nil || conv.OpType != "Conv" || (conv.Domain != "" && conv.Domain != "ai.onnx") || conv.Graph() != n.Graph() {
		return 0, false
	}
	w, _, ok := floatConst(conv.Input(1))
	if !ok || len(w.Dims) != 4 || w.Dims[0]%block != 0 {
		return 0, false
	}
	if n.OpType == "HardSigmoid" && len(x.Uses()) < 2 {
		return 0, false
	}
	return w.Dims[0], true
}

// identityConv inserts, before n, a depthwise 1x1 Conv of weight 1 that
// reads x, and returns its output.
func identityConv(g *graph.Graph, n *graph.Node, x *graph.Value, channels int64) (*graph.Value, error) {
	ones := make([]float64, channels)
	for i := range ones {
		ones[i] = 1
	}
	w, err := addFloatInit(g, x.Name+"_identity_weight", []int64{channels, 1, 1, 1}, ones)
	if err != nil {
		return nil, err
	}
	out, err := g.NewValue(g.UniqueName(x.Name + "_identity"))
	if err != nil {
		return nil, err
	}
	conv, err := g.InsertNodeBefore(n, "Conv", []*graph.Value{x, w}, []*graph.Value{out})
	if err != nil {
		return nil, err
	}
	conv.SetAttr(&graph.Attr{Name: "group", Type: graph.AttrInt, Int: channels})
	conv.SetAttr(&graph.Attr{Name: "kernel_shape", Type: graph.AttrInts, Ints: []int64{1, 1}})
	return out, nil
}
