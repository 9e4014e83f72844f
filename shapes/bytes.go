package shapes

import "github.com/optc-dev/optc/graph"

// BytesAt returns the bytes of each value of m's main graph whose type
// inference makes static when m's fed inputs (those without constant
// data) are shaped and typed as inputs, in order; a value it cannot size
// is missing. m's input types are restored before it returns.
func BytesAt(m *graph.Model, inputs []*graph.Tensor) (map[*graph.Value]int64, error) {
	var fed []*graph.Value
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			fed = append(fed, v)
		}
	}
	if len(fed) != len(inputs) {
		return nil, nil
	}
	saved := make([]*graph.Type, len(fed))
	for i, v := range fed {
		saved[i] = v.Type
		v.Type = graph.TensorType(inputs[i].DType, graph.StaticShape(inputs[i].Dims...))
	}
	defer func() {
		for i, v := range fed {
			v.Type = saved[i]
		}
	}()
	res, err := Infer(m)
	if err != nil {
		return nil, err
	}
	sizes := make(map[*graph.Value]int64, res.Types.Len())
	res.Types.All(func(v *graph.Value, t *graph.Type) {
		if t == nil || t.Elem == 0 || !t.Shape.IsStatic() {
			return
		}
		elems := int64(1)
		for _, d := range t.Shape.Dims() {
			if d > 0 && elems > (1<<62)/d {
				elems = -1 // too large to be real: ByteSize refuses it
				break
			}
			elems *= d
		}
		if b, ok := t.Elem.ByteSize(elems); ok {
			sizes[v] = b
		}
	})
	return sizes, nil
}
