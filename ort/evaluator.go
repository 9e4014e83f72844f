package ort

import (
	"fmt"
	"slices"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/optc-dev/optc/graph"
)

// NodeEvaluator runs one node at a time in ONNX Runtime, for constant
// folding of operators optc has no Go kernel for. It satisfies
// passes.Evaluator (ort does not import passes). Init must have
// succeeded.
type NodeEvaluator struct {
	// Options for the sessions it opens; the zero value is CPU, level
	// disable (the node must run as written), one thread.
	Options Options
}

// EvalNode builds a model of n alone, with the given operator sets, whose
// inputs are inputs (nil for an omitted optional input) declared with
// their types and shapes; it runs it and returns n's outputs in order (nil
// for omitted ones).
//
// The binding can return rank-0 and float16 outputs only into buffers
// allocated from a known shape, so the output types come from ORT's
// inference, and where that leaves a shape open, from a first run that
// fetches only Shape(output).
func (e *NodeEvaluator) EvalNode(n *graph.Node, inputs []*graph.Tensor, opsets []graph.OpsetImport) ([]*graph.Tensor, error) {
	out, err := e.evalNode(n, inputs, opsets)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", n, err)
	}
	return out, nil
}

func (e *NodeEvaluator) evalNode(n *graph.Node, inputs []*graph.Tensor, opsets []graph.OpsetImport) ([]*graph.Tensor, error) {
	src, shapes, feeds, err := nodeModel(n, inputs, opsets)
	if err != nil {
		return nil, err
	}
	_, info, err := ortgo.GetInputOutputInfoWithONNXData(src.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ONNX Runtime cannot load the node: %s", oneLine(err))
	}
	if len(info) != len(src.Outputs)+len(shapes) {
		return nil, fmt.Errorf("ONNX Runtime reports %d outputs, want %d", len(info), len(src.Outputs)+len(shapes))
	}
	probe := false
	for i := range src.Outputs {
		o := info[i]
		if o.OrtValueType != ortgo.ONNXTypeTensor {
			return nil, fmt.Errorf("output %d is a %s, not a tensor", i, o.OrtValueType)
		}
		dims := []int64(o.Dimensions)
		src.Outputs[i].DType = graph.DataType(o.DataType)
		src.Outputs[i].Shape = dims
		// No dims is a scalar or an unknown rank.
		probe = probe || len(dims) == 0 || slices.Contains(dims, -1) && !nativeType(src.Outputs[i].DType)
	}
	if probe {
		dims, err := e.run(Source{Bytes: src.Bytes, Inputs: src.Inputs, Outputs: shapes}, feeds)
		if err != nil {
			return nil, err
		}
		for i, d := range dims {
			if src.Outputs[i].Shape, err = d.Int64s(); err != nil {
				return nil, err
			}
		}
	}
	res, err := e.run(src, feeds)
	if err != nil {
		return nil, err
	}
	out := make([]*graph.Tensor, len(n.Outputs()))
	copy(out, res)
	return out, nil
}

func (e *NodeEvaluator) run(src Source, feeds []*graph.Tensor) ([]*graph.Tensor, error) {
	s, err := NewSession(src, e.sessionOptions())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(feeds)
}

func (e *NodeEvaluator) sessionOptions() Options {
	o := e.Options
	if o == (Options{}) {
		o = Options{Level: LevelDisable, IntraOpThreads: 1, InterOpThreads: 1}
	}
	return o
}

// nodeModel serializes a model holding only a copy of n, reading graph
// inputs in0, in1, ... (numbered by position in n) and writing outputs
// out0, out1, ..., followed by shape0, shape1, ..., the Shape of each. It
// returns the model with its interface (the outputs not yet typed), the
// shape outputs, and the tensors to feed.
func nodeModel(n *graph.Node, inputs []*graph.Tensor, opsets []graph.OpsetImport) (Source, []IO, []*graph.Tensor, error) {
	var src Source
	if len(n.Subgraphs()) > 0 {
		return src, nil, nil, fmt.Errorf("nodes with subgraphs are not evaluated alone")
	}
	if len(inputs) != len(n.Inputs()) {
		return src, nil, nil, fmt.Errorf("%d inputs given for %d", len(inputs), len(n.Inputs()))
	}
	g := graph.NewGraph("node")
	var feeds []*graph.Tensor
	ins := make([]*graph.Value, len(inputs))
	for i, t := range inputs {
		if t == nil {
			continue
		}
		v, err := g.NewValue(fmt.Sprintf("in%d", i))
		if err != nil {
			return src, nil, nil, err
		}
		v.Type = graph.TensorType(t.DType, graph.StaticShape(t.Dims...))
		g.Inputs = append(g.Inputs, v)
		ins[i] = v
		feeds = append(feeds, t)
		src.Inputs = append(src.Inputs, IO{Name: v.Name, Kind: graph.KindTensor, DType: t.DType, Shape: t.Dims})
	}
	// Trailing omitted outputs are left off; an omitted output followed
	// by a present one is refused: ORT 1.24 crashes running such a Split.
	last := len(n.Outputs()) - 1
	for last >= 0 && n.Output(last) == nil {
		last--
	}
	if last < 0 {
		return src, nil, nil, fmt.Errorf("the node has no outputs")
	}
	outs := make([]*graph.Value, last+1)
	for i, o := range n.Outputs()[:last+1] {
		if o == nil {
			return src, nil, nil, fmt.Errorf("output %d is omitted but a later one is not", i)
		}
		v, err := g.NewValue(fmt.Sprintf("out%d", i))
		if err != nil {
			return src, nil, nil, err
		}
		g.Outputs = append(g.Outputs, v)
		outs[i] = v
		src.Outputs = append(src.Outputs, IO{Name: v.Name, Kind: graph.KindTensor}) // checked in ORT's view before a run
	}
	c, err := g.AddNode(n.OpType, ins, outs)
	if err != nil {
		return src, nil, nil, err
	}
	c.Name, c.Domain, c.Attrs = "node", n.Domain, n.Attrs
	var shapes []IO
	for i, o := range outs {
		s, err := g.NewValue(fmt.Sprintf("shape%d", i))
		if err != nil {
			return src, nil, nil, err
		}
		if _, err := g.AddNode("Shape", []*graph.Value{o}, []*graph.Value{s}); err != nil {
			return src, nil, nil, err
		}
		g.Outputs = append(g.Outputs, s)
		shapes = append(shapes, IO{Name: s.Name, Kind: graph.KindTensor, DType: graph.Int64, Shape: []int64{-1}})
	}
	m := &graph.Model{IRVersion: irVersionFor(opsets), Opsets: withDefaultDomain(opsets), Graph: g, ProducerName: "optc"}
	if src.Bytes, err = graph.Marshal(m); err != nil {
		return src, nil, nil, err
	}
	return src, shapes, feeds, nil
}

// withDefaultDomain adds the default domain (for the Shape nodes) when
// opsets lacks it.
func withDefaultDomain(opsets []graph.OpsetImport) []graph.OpsetImport {
	for _, o := range opsets {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			return opsets
		}
	}
	return append(slices.Clone(opsets), graph.OpsetImport{Version: 13})
}

// irVersionFor is the IR version released with the default domain's
// opset (at least 8), so that ORT accepts the model.
func irVersionFor(opsets []graph.OpsetImport) int64 {
	v := int64(0)
	for _, o := range opsets {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			v = o.Version
		}
	}
	switch {
	case v >= 23:
		return 11
	case v >= 21:
		return 10
	case v >= 19:
		return 9
	}
	return 8
}
