package export

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/shapes"
)

// EmulateFloat16 rewrites a float16 variant (ToFloat16's result) in place
// into a float32 model that rounds like it, so that a check in ONNX
// Runtime sees float16's overflow and rounding: ORT's CPU provider runs
// float16 nodes in float32 and drops the rounding Casts between them, so
// the float16 model itself agrees with float32 even where float16
// overflows. Here every float16 activation is rounded by a Cast to
// float16 and back and every float16 constant read through a Cast to
// float32, so the nodes compute in float32 on float16-rounded values;
// If/Loop/Scan bodies alike.
// What stays unmeasured is rounding inside an operator (accumulation
// order and width). Run the result at ORT's level disable: optimization
// levels above may fold the rounding Cast pairs away.
func EmulateFloat16(m *graph.Model) error {
	if m == nil || m.Graph == nil {
		return fmt.Errorf("float16 emulation: the model has no graph")
	}
	inferred, err := shapes.Infer(m)
	if err != nil {
		return fmt.Errorf("float16 emulation: %w", err)
	}
	half := func(v *graph.Value) bool {
		ty := inferred.Types.Get(v)
		return v != nil && ty != nil && ty.Kind == graph.KindTensor && ty.Elem == graph.Float16
	}
	c := &fp16Converter{rep: &FP16Report{}} // for its Cast helpers
	var graphs []*graph.Graph
	m.Graph.Walk(func(g *graph.Graph) { graphs = append(graphs, g) })
	for _, g := range graphs {
		if err := emulateGraph(c, g, half); err != nil {
			return fmt.Errorf("float16 emulation: graph %q: %w", g.Name, err)
		}
	}
	if err := m.Verify(); err != nil {
		return fmt.Errorf("float16 emulation: the emulating model is invalid: %w", err)
	}
	return nil
}

// emulateGraph rounds g's float16 activations through Cast pairs and
// has its nodes read float16 constants through a Cast to float32: the
// constants stay where they are (a model over 2 GiB keeps them in its side
// file), the Casts are small.
func emulateGraph(c *fp16Converter, g *graph.Graph, half func(*graph.Value) bool) error {
	for _, n := range slices.Clone(g.Nodes) {
		if n.OpType == "Cast" || n.OpType == "Constant" {
			continue
		}
		for i, v := range n.Outputs() {
			if !half(v) {
				continue
			}
			raw, err := g.NewValue(g.UniqueName(v.Name + "_unrounded"))
			if err != nil {
				return err
			}
			if err := n.SetOutput(i, raw); err != nil {
				return err
			}
			if err := c.addCast(g, raw, v, graph.Float16, nodeAfter(n)); err != nil {
				return err
			}
		}
	}
	wide := map[*graph.Value]*graph.Value{}
	for _, n := range slices.Clone(g.Nodes) {
		if n.OpType == "Cast" {
			continue
		}
		for i, v := range n.Inputs() {
			if !half(v) {
				continue
			}
			up, ok := wide[v]
			if !ok {
				var err error
				if up, err = g.NewValue(g.UniqueName(v.Name + "_rounded")); err != nil {
					return err
				}
				if err := c.addCast(g, v, up, graph.Float, n); err != nil {
					return err
				}
				wide[v] = up
			}
			n.SetInput(i, up)
		}
	}
	return nil
}
