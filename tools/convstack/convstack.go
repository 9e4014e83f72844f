// Package convstack builds a ResNet-style stack of 3x3 convolutions: the
// kind of model INT8 speeds up on CPU (FACTS.md measured 1.7-2.0x), used
// by the quantization tests and the placement benchmark as the case where
// INT8 must win.
package convstack

import (
	"fmt"
	"math/rand/v2"

	"github.com/optc-dev/optc/graph"
)

// Model is eight 3x3 convolutions (padding 1), each followed by Relu, at c
// channels on h x h inputs with a dynamic batch; the weights are seeded
// He-initialised, so the same arguments give the same model.
func Model(c, h int64) (*graph.Model, error) { return Layers(c, h, 8) }

// Layers is Model with n convolutions: each one more costs the same
// (7 to 8 is a seventh more work, a model slower by a known amount that
// no pass removes).
func Layers(c, h int64, n int) (*graph.Model, error) {
	r := rand.New(rand.NewPCG(1, 2))
	g := graph.NewGraph("convstack")
	x, err := g.NewValue("x")
	if err != nil {
		return nil, err
	}
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(c), graph.StaticDim(h), graph.StaticDim(h)})
	g.Inputs = []*graph.Value{x}
	cur := x
	for i := range n {
		w := make([]float32, c*c*9)
		for k := range w {
			w[k] = float32(r.NormFloat64() * 0.7 / float64(3*c))
		}
		wt, err := graph.NewFloat32Tensor(fmt.Sprint("w", i), []int64{c, c, 3, 3}, w)
		if err != nil {
			return nil, err
		}
		wv, err := g.AddInitializer(wt)
		if err != nil {
			return nil, err
		}
		conv, err := g.NewValue(fmt.Sprint("conv", i))
		if err != nil {
			return nil, err
		}
		n, err := g.AddNode("Conv", []*graph.Value{cur, wv}, []*graph.Value{conv})
		if err != nil {
			return nil, err
		}
		n.Name = fmt.Sprint("conv", i)
		n.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
		relu, err := g.NewValue(fmt.Sprint("relu", i))
		if err != nil {
			return nil, err
		}
		rn, err := g.AddNode("Relu", []*graph.Value{conv}, []*graph.Value{relu})
		if err != nil {
			return nil, err
		}
		rn.Name = fmt.Sprint("relu", i)
		cur = relu
	}
	cur.Type = x.Type
	g.Outputs = []*graph.Value{cur}
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 13}}, Graph: g}, nil
}
