package passes

import (
	"github.com/optc-dev/optc/graph"
)

// fusePadIntoConv folds a zero Pad of the spatial axes into the pads
// attribute of the Conv (or AveragePool counting padding) that reads it:
// Conv pads with zeros itself, so the separate Pad node and its copy of
// the input go. TensorFlow and Paddle exports pad explicitly ("SAME"
// padding, asymmetric pads).
//
// Conditions: Pad in constant mode with value 0 (absent, or a constant
// zero), constant non-negative pads (input from opset 11, attribute
// before) that leave N and C alone, no axes input, and its output read
// only by the Conv; the Conv has auto_pad NOTSET. AveragePool qualifies
// only with count_include_pad=1 (padding counts as zeros) and ceil_mode=0
// (no partial windows whose divisor could differ). MaxPool pads with -inf,
// not zeros, and is left alone.
var fusePadIntoConv = &Pass{
	Name:  "fuse-pad-into-conv",
	Doc:   "fold a zero Pad of the spatial axes into the following Conv's pads",
	Level: 1,
	Form:  LocalRule,
	Run:   runFusePadIntoConv,
}

func runFusePadIntoConv(c *Context) (Stats, error) {
	return Rule[*padInto]{OpTypes: []string{"Conv", "AveragePool"}, Match: matchPadInto, Apply: foldPad}.apply(c.Model)
}

// padInto is a Pad read only by a Conv or AveragePool (reader) and the
// reader's pads with the Pad's added.
type padInto struct {
	pad, reader *graph.Node
	merged      []int64
}

func matchPadInto(e *graphEdit, n *graph.Node) (*padInto, bool) {
	if !padAbsorber(n) {
		return nil, false
	}
	p := e.absorbable(n.Input(0), "Pad")
	if p == nil {
		return nil, false
	}
	pads, ok := zeroPadSpatial(p)
	if !ok {
		return nil, false
	}
	merged, ok := addConvPads(n, pads)
	if !ok {
		return nil, false
	}
	return &padInto{pad: p, reader: n, merged: merged}, true
}

// foldPad lets the reader read the Pad's input with the merged pads and
// removes the Pad.
func foldPad(e *graphEdit, m *padInto) (Stats, error) {
	m.reader.SetInput(0, m.pad.Input(0))
	m.reader.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: m.merged})
	e.remove(m.pad)
	return Stats{Rewritten: 1}, nil
}

// padAbsorber reports whether n pads its input 0 with zeros by its pads
// attribute.
func padAbsorber(n *graph.Node) bool {
	if n.Input(0) == nil || n.AttrString("auto_pad", "NOTSET") != "NOTSET" {
		return false
	}
	switch {
	case isOp(n, "Conv"):
		return true
	case isOp(n, "AveragePool"):
		return n.AttrInt("count_include_pad", 0) == 1 && n.AttrInt("ceil_mode", 0) == 0
	}
	return false
}

// zeroPadSpatial returns the pads of Pad p when it pads with zeros,
// only after the first two axes, by non-negative amounts.
func zeroPadSpatial(p *graph.Node) ([]int64, bool) {
	if p.AttrString("mode", "constant") != "constant" {
		return nil, false
	}
	var pads []int64
	switch {
	case p.Input(1) != nil:
		var ok bool
		if pads, ok = constInts(p.Input(1)); !ok || p.Input(3) != nil || len(p.Inputs()) > 4 {
			return nil, false
		}
		if v := p.Input(2); v != nil {
			t := v.ConstantTensor()
			if t == nil {
				return nil, false
			}
			vals, err := t.Float32s()
			if err != nil || len(vals) != 1 || vals[0] != 0 {
				return nil, false
			}
		}
	case len(p.Inputs()) == 1 && p.Attr("pads") != nil:
		pads = p.AttrInts("pads")
		if p.AttrFloat("value", 0) != 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	rank := len(pads) / 2
	if len(pads)%2 != 0 || rank < 3 || pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 || pads[rank+1] != 0 {
		return nil, false
	}
	for _, x := range pads {
		if x < 0 {
			return nil, false
		}
	}
	return pads, true
}

// addConvPads returns n's pads attribute plus the spatial part of a Pad's
// pads; false when n's attributes do not fit that rank.
func addConvPads(n *graph.Node, pads []int64) ([]int64, bool) {
	rank := len(pads) / 2
	spatial := rank - 2
	if k := n.Attr("kernel_shape"); k != nil && len(k.Ints) != spatial {
		return nil, false
	}
	merged := make([]int64, 2*spatial)
	if a := n.Attr("pads"); a != nil {
		if a.Type != graph.AttrInts || len(a.Ints) != 2*spatial {
			return nil, false
		}
		copy(merged, a.Ints)
	}
	for i := range spatial {
		merged[i] += pads[2+i]
		merged[spatial+i] += pads[rank+2+i]
	}
	return merged, true
}
