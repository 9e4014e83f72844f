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

// ResidualNodesPerBlock is the number of nodes one ResidualNet block adds
// (ResidualNet adds a dead Neg to every fourth block besides).
const ResidualNodesPerBlock = 12

// ResidualNet is a model of blocks residual blocks on a 1x4x4x4 float
// input, shaped so that every kind of -O2 pass has work at every size:
//
//	x -> Identity -> Conv(1x1) -> BatchNormalization -> Relu
//	  -> Conv(1x1) -> BatchNormalization -> Add(x) -> Relu
//
// The first BatchNormalization reads its parameters from Constant nodes
// (constants-to-initializers), the second from initializers; the convs'
// biases are all the same zero tensor under different names
// (dedup-initializers), the weights differ per block (so conv-bn folding
// computes new ones); every fourth block also feeds a Neg nothing reads.
func ResidualNet(blocks int) (*graph.Model, error) {
	const c = 4
	g := graph.NewGraph("residual")
	b := builder{g: g}
	x := b.value("x")
	x.Type = graph.TensorType(graph.Float, graph.StaticShape(1, c, 4, 4))
	g.Inputs = []*graph.Value{x}
	cur := x
	for i := range blocks {
		p := fmt.Sprint("b", i, "_")
		id := b.node("Identity", p+"id", cur)
		conv := func(name string, in *graph.Value, k int) *graph.Value {
			w := make([]float32, c*c)
			for j := range w {
				w[j] = float32((i*31+k*17+j*7)%29)/29 - 0.5
			}
			return b.node("Conv", p+name, in,
				b.init(p+name+"_w", []int64{c, c, 1, 1}, w),
				b.init(p+name+"_b", []int64{c}, make([]float32, c)))
		}
		bnParams := func(name string, constant bool) []*graph.Value {
			var vs []*graph.Value
			for k, what := range []string{"scale", "bias", "mean", "var"} {
				vals := make([]float32, c)
				for j := range vals {
					vals[j] = float32(1+(i+j+k)%5) / 5
				}
				if constant {
					vs = append(vs, b.constant(p+name+"_"+what, []int64{c}, vals))
				} else {
					vs = append(vs, b.init(p+name+"_"+what, []int64{c}, vals))
				}
			}
			return vs
		}
		h := conv("conv1", id, 1)
		h = b.node("BatchNormalization", p+"bn1", append([]*graph.Value{h}, bnParams("bn1", true)...)...)
		h = b.node("Relu", p+"relu1", h)
		h = conv("conv2", h, 2)
		h = b.node("BatchNormalization", p+"bn2", append([]*graph.Value{h}, bnParams("bn2", false)...)...)
		h = b.node("Add", p+"add", h, cur)
		if i%4 == 0 {
			b.node("Neg", p+"dead", h)
		}
		cur = b.node("Relu", p+"out", h)
	}
	if b.err != nil {
		return nil, b.err
	}
	cur.Type = graph.TensorType(graph.Float, graph.StaticShape(1, c, 4, 4))
	g.Outputs = []*graph.Value{cur}
	return &graph.Model{IRVersion: 8, Opsets: []graph.OpsetImport{{Version: 17}}, Graph: g}, nil
}

// builder adds values and nodes to g, keeping the first error.
type builder struct {
	g   *graph.Graph
	err error
}

func (b *builder) value(name string) *graph.Value {
	if b.err != nil {
		return nil
	}
	v, err := b.g.NewValue(name)
	b.err = err
	return v
}

// node adds op reading ins and returns its one output, named like the node.
func (b *builder) node(op, name string, ins ...*graph.Value) *graph.Value {
	out := b.value(name)
	if b.err != nil {
		return nil
	}
	n, err := b.g.AddNode(op, ins, []*graph.Value{out})
	if err == nil {
		n.Name = name
	}
	b.err = err
	return out
}

func (b *builder) init(name string, dims []int64, vals []float32) *graph.Value {
	t := b.tensor(name, dims, vals)
	if t == nil {
		return nil
	}
	v, err := b.g.AddInitializer(t)
	b.err = err
	return v
}

func (b *builder) constant(name string, dims []int64, vals []float32) *graph.Value {
	t := b.tensor(name, dims, vals)
	if t == nil {
		return nil
	}
	out := b.node("Constant", name, nil...)
	if b.err != nil {
		return nil
	}
	out.Producer().SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: t})
	return out
}

// tensor makes a float32 tensor, or records the error and returns nil.
func (b *builder) tensor(name string, dims []int64, vals []float32) *graph.Tensor {
	if b.err != nil {
		return nil
	}
	t, err := graph.NewFloat32Tensor(name, dims, vals)
	b.err = err
	return t
}
