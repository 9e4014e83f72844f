package passes

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// padConvChannels widens the channels of 2-D float convolutions to a
// multiple of Context.ChannelBlock with zero filters, so that ONNX
// Runtime's CPU provider runs every conv of a chain in its blocked NCHWc
// layout. ORT takes a conv into that layout only when its input channels
// are fewer than the block or a multiple of it, and a depthwise conv only
// when its channels are a multiple of it (the block is 16 floats with
// AVX-512, 8 with AVX2); a conv it does not take runs as a plain
// im2col+GEMM and breaks the chain with layout reorders on both sides.
// MobileNetV3-style nets are full of 8-, 24-, 40- and 88-channel layers.
// The INT8 models quantized from a padded model gain too: ORT's symmetric
// INT8 conv kernels want channel multiples as well (ORTInt8Layout).
//
// A conv whose output channels are not a multiple of the block gets zero
// filters (and zero biases) up to the next multiple. The extra channels
// are carried through the ops that treat channels apart (activations,
// pools, Add/Mul/Sub of two such tensors or with a scalar): a depthwise
// conv reading them gets zero filters for them, a conv of group 1 zero
// input weights, so no real channel ever reads them. Any other reader
// (and a graph output) gets a Slice back to the real channels. The result
// is exact for finite activations: every real output sums the same
// products, plus products with zero weights. (A padded channel holds a
// finite constant: 0 after a conv, then what the channel-wise ops make of
// it, e.g. HardSigmoid's 0.5.)
//
// Only the main graph of a model without subgraphs is rewritten, and only
// convs whose weight is a float32 initializer of rank 4 and whose bias,
// if any, is a float32 initializer; grouped convs that are not depthwise
// are left as they are (their padded inputs are sliced).
//
// It is a graph-wide pass, not a Rule: what it does at a node depends on
// how every input of that node was padded before it (channelPadding
// carries that forward in node order), which no match at one anchor can
// see.
var padConvChannels = &Pass{
	Name:   "pad-conv-channels",
	Doc:    "ORT CPU: pad conv channels with zero filters to a multiple of the NCHWc block (--nchwc-block) or of the INT8 kernels' alignment",
	Level:  OnRequest,
	Form:   GraphWide,
	Shapes: DeclaredShapes,
	Run:    runPadConvChannels,
}

func runPadConvChannels(c *Context) (Stats, error) {
	if c.ChannelBlock < 2 || !c.Model.Graph.HasOp("Conv") || hasSubgraphs(c.Model) {
		return Stats{}, nil
	}
	p := &channelPadding{g: c.Model.Graph, block: int64(c.ChannelBlock), opset: c.Model.OpsetVersion(""), types: c.Declared(),
		padded: map[*graph.Value]paddedChannels{}, sliced: map[*graph.Value]*graph.Value{}}
	for _, n := range append([]*graph.Node(nil), p.g.Nodes...) {
		if err := p.visit(n); err != nil {
			return p.st, fmt.Errorf("node %s: %w", n, err)
		}
	}
	return p.st, nil
}

// hasSubgraphs reports whether some node of m holds a graph.
func hasSubgraphs(m *graph.Model) bool {
	n := 0
	m.Graph.Walk(func(*graph.Graph) { n++ })
	return n > 1
}

// paddedChannels is a value whose channel axis (1) holds width channels,
// of which the first real are the model's.
type paddedChannels struct{ real, width int64 }

type channelPadding struct {
	g      *graph.Graph
	block  int64
	opset  int64
	padded map[*graph.Value]paddedChannels
	sliced map[*graph.Value]*graph.Value // padded value -> its real channels
	types  declaredTypes
	st     Stats
}

// channelwiseOps compute each channel from the same channel of their
// first input alone, and keep a finite value finite.
var channelwiseOps = map[string]bool{
	"Relu": true, "LeakyRelu": true, "Sigmoid": true, "HardSigmoid": true, "HardSwish": true, "Tanh": true,
	"Clip": true, "Identity": true, "MaxPool": true, "AveragePool": true, "GlobalAveragePool": true, "GlobalMaxPool": true,
}

func (p *channelPadding) visit(n *graph.Node) error {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return p.unpadInputs(n)
	}
	carried := false
	switch {
	case n.OpType == "Conv":
		var err error
		if carried, err = p.conv(n); err != nil {
			return err
		}
	case channelwiseOps[n.OpType]:
		carried = p.channelwise(n)
	case n.OpType == "Add" || n.OpType == "Mul" || n.OpType == "Sub":
		carried = p.binary(n)
	}
	if carried {
		return nil
	}
	return p.unpadInputs(n)
}

// unpadInputs gives each padded input of n its real channels.
func (p *channelPadding) unpadInputs(n *graph.Node) error {
	for i, v := range n.Inputs() {
		if _, ok := p.padded[v]; !ok || v == nil {
			continue
		}
		s, err := p.slice(v, n)
		if err != nil {
			return err
		}
		n.SetInput(i, s)
	}
	return nil
}

// mark records that v (the output of a rewritten node) is padded, and
// widens its declared channel dim.
func (p *channelPadding) mark(v *graph.Value, pc paddedChannels) {
	p.padded[v] = pc
	if t := p.types.typ(v); t != nil && t.Kind == graph.KindTensor && len(t.Shape) >= 2 {
		t = t.Clone()
		t.Shape[1] = graph.StaticDim(pc.width)
		v.Type = t
	}
}

// carries reports whether n's output 0 may hold padded channels: its only
// output, returned by no graph.
func carries(n *graph.Node) bool {
	return len(n.Outputs()) == 1 && n.Output(0) != nil && !n.Graph().IsOutput(n.Output(0))
}

func (p *channelPadding) channelwise(n *graph.Node) bool {
	pc, ok := p.padded[n.Input(0)]
	if !ok || !carries(n) {
		return false
	}
	for _, v := range n.Inputs()[1:] { // Clip's bounds
		if v != nil {
			if _, _, scalar := scalarConst(v); !scalar {
				return false
			}
		}
	}
	p.mark(n.Output(0), pc)
	return true
}

func (p *channelPadding) binary(n *graph.Node) bool {
	if len(n.Inputs()) != 2 || !carries(n) {
		return false
	}
	a, okA := p.padded[n.Input(0)]
	b, okB := p.padded[n.Input(1)]
	switch {
	case okA && okB:
		if a != b || a.real < 2 {
			return false // a broadcast over channels (1 against C) would not line up
		}
	case okA:
		if _, _, scalar := scalarConst(n.Input(1)); !scalar {
			return false
		}
	case okB:
		if _, _, scalar := scalarConst(n.Input(0)); !scalar {
			return false
		}
		a = b
	default:
		return false
	}
	p.mark(n.Output(0), a)
	return true
}

// conv pads n's filters: input channels to its padded input's width,
// output channels to the block. It reports whether n took its input as
// it is (padded or not).
func (p *channelPadding) conv(n *graph.Node) (bool, error) {
	w, wf, ok := floatConst(n.Input(1))
	if !ok || len(w.Dims) != 4 || len(n.Inputs()) > 3 {
		return false, nil
	}
	outC, inC := w.Dims[0], w.Dims[1]
	var bias []float32
	if len(n.Inputs()) == 3 && n.Input(2) != nil {
		if _, bias, ok = floatConst(n.Input(2)); !ok || int64(len(bias)) != outC {
			return false, nil
		}
	}
	group := n.AttrInt("group", 1)
	in, inPadded := p.padded[n.Input(0)]
	newIn, newOut := inC, outC
	switch {
	case group == 1:
		if inPadded {
			if in.real != inC {
				return false, nil
			}
			newIn = in.width
		}
		if carries(n) {
			newOut = roundUp(outC, p.block)
		}
	case inC == 1 && group == outC && inPadded && in.real == outC && carries(n):
		newOut = in.width // depthwise: one filter per (padded) channel
	default:
		return false, nil
	}
	if newIn == inC && newOut == outC {
		return true, nil
	}
	g := p.g
	k := w.Dims[2] * w.Dims[3]
	padded := make([]float64, newOut*newIn*k)
	for o := range outC {
		for i := range inC {
			for j := range k {
				padded[(o*newIn+i)*k+j] = float64(wf[(o*inC+i)*k+j])
			}
		}
	}
	oldW, oldB := n.Input(1), n.Input(2)
	nw, err := addFloatInit(g, oldW.Name, []int64{newOut, newIn, w.Dims[2], w.Dims[3]}, padded)
	if err != nil {
		return false, err
	}
	n.SetInput(1, nw)
	if bias != nil && newOut != outC {
		pb := make([]float64, newOut)
		for i, x := range bias {
			pb[i] = float64(x)
		}
		nb, err := addFloatInit(g, oldB.Name, []int64{newOut}, pb)
		if err != nil {
			return false, err
		}
		n.SetInput(2, nb)
	}
	for _, old := range []*graph.Value{oldW, oldB} {
		if old != nil && old.Const != nil && len(old.Uses()) == 0 && !g.IsOutput(old) {
			if err := g.RemoveInitializer(old); err != nil {
				return false, err
			}
		}
	}
	if group != 1 {
		n.SetAttr(&graph.Attr{Name: "group", Type: graph.AttrInt, Int: newOut})
	}
	if newOut != outC {
		p.mark(n.Output(0), paddedChannels{real: outC, width: newOut})
	}
	p.st.Rewritten++
	return true, nil
}

// slice returns v's real channels, a Slice of v on axis 1 made once and
// placed before its first reader (before).
func (p *channelPadding) slice(v *graph.Value, before *graph.Node) (*graph.Value, error) {
	if s, ok := p.sliced[v]; ok {
		return s, nil
	}
	g := p.g
	out, err := g.NewValue(g.UniqueName(v.Name + "_channels"))
	if err != nil {
		return nil, err
	}
	real := p.padded[v].real
	var n *graph.Node
	if p.opset >= 10 {
		var ins []*graph.Value
		for _, c := range []struct {
			name string
			x    int64
		}{{"_starts", 0}, {"_ends", real}, {"_axes", 1}} {
			t, err := graph.NewInt64Tensor(g.UniqueName(v.Name+c.name), []int64{1}, []int64{c.x})
			if err != nil {
				return nil, err
			}
			iv, err := g.AddInitializer(t)
			if err != nil {
				return nil, err
			}
			ins = append(ins, iv)
		}
		n, err = g.InsertNodeBefore(before, "Slice", append([]*graph.Value{v}, ins...), []*graph.Value{out})
	} else {
		n, err = g.InsertNodeBefore(before, "Slice", []*graph.Value{v}, []*graph.Value{out})
		if err == nil {
			n.SetAttr(&graph.Attr{Name: "starts", Type: graph.AttrInts, Ints: []int64{0}})
			n.SetAttr(&graph.Attr{Name: "ends", Type: graph.AttrInts, Ints: []int64{real}})
			n.SetAttr(&graph.Attr{Name: "axes", Type: graph.AttrInts, Ints: []int64{1}})
		}
	}
	if err != nil {
		return nil, err
	}
	n.Name = uniqueNodeName(g, v.Name+"_channels")
	p.sliced[v] = out
	p.st.Added++
	return out, nil
}

func roundUp(x, block int64) int64 { return (x + block - 1) / block * block }
