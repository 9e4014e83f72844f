package passes

import (
	"github.com/optc-dev/optc/graph"
)

// constantsToInitializers turns Constant nodes of the main graph into
// initializers of the same name. Exporters such as Paddle keep every
// weight in a Constant node; as initializers they are what the other
// passes and runtimes treat as weights, and the nodes are gone.
//
// Left alone: Constants in subgraphs, string and sparse constants, a
// Constant whose output a graph returns or whose declared type disagrees
// with its data, and models of IR version below 4 (where every
// initializer must also be a graph input).
var constantsToInitializers = &Pass{
	Name:  "constants-to-initializers",
	Doc:   "turn Constant nodes of the main graph into initializers",
	Level: 1,
	Form:  GraphWide,
	// It reads a value's declared type only to keep a Constant whose
	// tensor does not fit it.
	Shapes: DeclaredShapes,
	Run:    runConstantsToInitializers,
}

func runConstantsToInitializers(c *Context) (Stats, error) {
	if c.Model.IRVersion < 4 || !c.Model.Graph.HasOp("Constant") {
		return Stats{}, nil
	}
	types := c.Declared()
	return editGraphs(c.Model, func(e *graphEdit) error {
		if e.g != c.Model.Graph {
			return nil
		}
		for _, n := range e.g.Nodes {
			if !isOp(n, "Constant") || len(n.Inputs()) != 0 || len(n.Outputs()) != 1 {
				continue
			}
			v := n.Output(0)
			if v == nil || e.returned(v) {
				continue
			}
			t := constantTensor(n)
			if t == nil || !types.admits(v, t) {
				continue
			}
			t.Name = v.Name
			// The value stays (its readers keep reading it); only its
			// producer changes from the node to the initializer list.
			if err := n.SetOutput(0, nil); err != nil {
				return err
			}
			v.Const = t
			e.g.Initializers = append(e.g.Initializers, v)
			e.remove(n)
		}
		return nil
	})
}

// constantTensor returns a fresh tensor (sharing the data) with what the
// Constant node n computes, or nil for the forms left alone.
func constantTensor(n *graph.Node) *graph.Tensor {
	if len(n.Attrs) != 1 {
		return nil
	}
	a := n.Attrs[0]
	if a.RefAttrName != "" {
		return nil
	}
	var t *graph.Tensor
	var err error
	switch {
	case a.Name == "value" && a.Type == graph.AttrTensor && a.Tensor != nil:
		if a.Tensor.DType == graph.String || !a.Tensor.DType.Known() {
			return nil
		}
		if _, err := a.Tensor.NumElements(); err != nil {
			return nil
		}
		c := *a.Tensor
		c.Dims = append([]int64{}, a.Tensor.Dims...)
		return &c
	case a.Name == "value_float" && a.Type == graph.AttrFloat:
		t, err = graph.NewFloat32Tensor("", nil, []float32{a.Float})
	case a.Name == "value_floats" && a.Type == graph.AttrFloats:
		t, err = graph.NewFloat32Tensor("", []int64{int64(len(a.Floats))}, a.Floats)
	case a.Name == "value_int" && a.Type == graph.AttrInt:
		t, err = graph.NewInt64Tensor("", nil, []int64{a.Int})
	case a.Name == "value_ints" && a.Type == graph.AttrInts:
		t, err = graph.NewInt64Tensor("", []int64{int64(len(a.Ints))}, a.Ints)
	}
	if err != nil {
		return nil
	}
	return t
}
