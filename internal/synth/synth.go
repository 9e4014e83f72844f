// Package synth builds synthetic models of a chosen size for tests and
// benchmarks that measure how optc scales with the number of nodes.
package synth

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// ReluChain is a model of n Relu nodes in a chain on a 2x3 float input;
// when deadEvery > 0 every deadEvery-th link also feeds a Neg whose output
// nothing reads (dead code for the cleanup passes).
func ReluChain(n, deadEvery int) (*graph.Model, error) {
	g := graph.NewGraph("chain")
	x, err := g.NewValue("x")
	if err != nil {
		return nil, err
	}
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
	g.Inputs = []*graph.Value{x}
	cur := x
	for i := range n {
		next, err := g.NewValue(fmt.Sprint("v", i))
		if err != nil {
			return nil, err
		}
		if _, err := g.AddNode("Relu", []*graph.Value{cur}, []*graph.Value{next}); err != nil {
			return nil, err
		}
		if deadEvery > 0 && i%deadEvery == 0 {
			dead, err := g.NewValue(fmt.Sprint("dead", i))
			if err != nil {
				return nil, err
			}
			if _, err := g.AddNode("Neg", []*graph.Value{cur}, []*graph.Value{dead}); err != nil {
				return nil, err
			}
		}
		cur = next
	}
	cur.Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
	g.Outputs = []*graph.Value{cur}
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g}, nil
}
