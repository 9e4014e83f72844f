package shapes

import (
	"math"

	"github.com/optc-dev/optc/graph"
)

// Operators outside the main families: recurrent layers, losses, OneHot,
// EyeLike, NonMaxSuppression, Det.

// recurrent (RNN, GRU, LSTM): Y is [seq, dirs, batch, hidden] and Y_h,
// Y_c are [dirs, batch, hidden]; layout 1 (opset 14) puts batch first.
func recurrent(c *ctx) []*graph.Type {
	x := c.shape(0)
	elem := c.elem(0)
	dirs := int64(1)
	if c.n.AttrString("direction", "forward") == "bidirectional" {
		dirs = 2
	}
	hidden := graph.Dim{}
	if h := c.n.AttrInt("hidden_size", 0); h > 0 {
		hidden = static(h)
	}
	seq, batch := graph.Dim{}, graph.Dim{}
	batchFirst := c.n.AttrInt("layout", 0) == 1
	if len(x) == 3 {
		seq, batch = bare(x[0]), bare(x[1])
		if batchFirst {
			seq, batch = batch, seq
		}
	}
	y := graph.Shape{seq, static(dirs), batch, hidden}
	state := graph.Shape{static(dirs), batch, hidden}
	if batchFirst {
		y = graph.Shape{batch, seq, static(dirs), hidden}
		state = graph.Shape{batch, static(dirs), hidden}
	}
	return []*graph.Type{tensor(elem, y), tensor(elem, state), tensor(elem, cloneShape(state))}
}

// loss (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss): a scalar, or
// the target's shape with reduction "none"; SoftmaxCrossEntropyLoss's
// optional log_prob has the scores' shape.
func loss(c *ctx) []*graph.Type {
	out := graph.Shape{}
	if c.n.AttrString("reduction", "mean") == "none" {
		out = cloneShape(c.shape(1))
	}
	return []*graph.Type{tensor(c.elem(0), out), tensor(c.elem(0), cloneShape(c.shape(0)))}
}

// oneHot inserts a dim of size depth at axis; the values' element type.
func oneHot(c *ctx) []*graph.Type {
	elem := c.elem(2)
	in := c.shape(0)
	if in == nil {
		return one(elem, nil)
	}
	r := len(in) + 1
	axis, ok := normAxis(c.n.AttrInt("axis", -1), r)
	if !ok {
		c.problem("axis %d does not fit rank %d", c.n.AttrInt("axis", -1), r)
		return one(elem, nil)
	}
	depth := graph.Dim{}
	if d, ok := c.ints(1); ok && len(d) == 1 {
		depth = static(d[0])
	} else if f, ok := c.floats(1); ok && len(f) == 1 && f[0] >= 0 && f[0] < math.MaxInt32 {
		depth = static(int64(f[0]))
	}
	out := append(append(cloneShape(in[:axis]), depth), cloneShape(in[axis:])...)
	return one(elem, out)
}

func eyeLike(c *ctx) []*graph.Type {
	elem := graph.DataType(c.n.AttrInt("dtype", 0))
	if elem == graph.Undefined {
		elem = c.elem(0)
	}
	return one(elem, cloneShape(c.shape(0)))
}

// nonMaxSuppression selects [?, 3] int64 (batch, class, box) triples.
func nonMaxSuppression(c *ctx) []*graph.Type {
	return one(graph.Int64, graph.Shape{{}, static(3)})
}

// det drops the two matrix dims.
func det(c *ctx) []*graph.Type {
	in := c.shape(0)
	if len(in) < 2 {
		return one(c.elem(0), nil)
	}
	return one(c.elem(0), cloneShape(in[:len(in)-2]))
}
