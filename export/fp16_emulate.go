package export

import (
	"fmt"
	"slices"

	"optc/graph"
	"optc/shapes"
)

// EmulateFloat16 rewrites a float16 variant (ToFloat16's result) in place
// into a float32 model that rounds like it, so that a check in ONNX
// Runtime sees float16's overflow and rounding: ORT's CPU provider runs
// float16 nodes in float32 and drops the rounding Casts between them, so
// the float16 model itself agrees with float32 even where float16
// overflows. Here every float16 constant holds its rounded values as
// float32, and every float16 activation is rounded by a Cast to float16
// and back, which the nodes read in float32; If/Loop/Scan bodies alike.
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
		ty := inferred.Types[v]
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
// widens its float16 constants.
func emulateGraph(c *fp16Converter, g *graph.Graph, half func(*graph.Value) bool) error {
	widen := func(v *graph.Value) {
		if v.Type != nil && v.Type.Kind == graph.KindTensor {
			v.Type = graph.TensorType(graph.Float, v.Type.Shape)
		}
	}
	for _, n := range slices.Clone(g.Nodes) {
		if n.OpType == "Constant" {
			if t16 := n.Output(0).ConstantTensor(); t16 != nil && t16.DType == graph.Float16 {
				w, err := widened(t16)
				if err != nil {
					return fmt.Errorf("constant %q: %w", n.Output(0).Name, err)
				}
				n.SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: w})
				widen(n.Output(0))
			}
			continue
		}
		if n.OpType == "Cast" {
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
	for _, v := range g.Initializers {
		if v.Const != nil && v.Const.DType == graph.Float16 {
			w, err := widened(v.Const)
			if err != nil {
				return fmt.Errorf("initializer %q: %w", v.Name, err)
			}
			v.Const = w
			widen(v)
		}
	}
	for _, n := range slices.Clone(g.Nodes) {
		if n.OpType == "Cast" {
			continue
		}
		for i, v := range n.Inputs() {
			if !half(v) || v.IsConstant() {
				continue
			}
			up, err := g.NewValue(g.UniqueName(v.Name + "_rounded"))
			if err != nil {
				return err
			}
			if err := c.addCast(g, v, up, graph.Float, n); err != nil {
				return err
			}
			n.SetInput(i, up)
		}
	}
	return nil
}

// widened is t16's values as float32.
func widened(t16 *graph.Tensor) (*graph.Tensor, error) {
	f, err := t16.Float32s()
	if err != nil {
		return nil, err
	}
	return graph.NewFloat32Tensor(t16.Name, t16.Dims, f)
}
