package passes

import (
	"github.com/optc-dev/optc/graph"
)

// mergeTransposes folds a Transpose that only feeds another Transpose into
// it: Transpose(Transpose(x, p), q) is Transpose(x, c) with c[i] = p[q[i]].
// When c is the identity both nodes go (layout round trips such as
// NCHW->NHWC->NCHW are common in converted models). Chains collapse in one
// run because nodes are visited in order.
//
// A permutation that is absent (reverse the axes) is used only when the
// rank is known from the other permutation or the input's type.
var mergeTransposes = &Pass{
	Name:   "merge-transposes",
	Doc:    "merge consecutive Transposes, removing pairs that cancel",
	Level:  1,
	Form:   LocalRule,
	Shapes: DeclaredShapes,
	Run:    runMergeTransposes,
}

func runMergeTransposes(c *Context) (Stats, error) {
	types := c.Declared()
	match := func(e *graphEdit, n *graph.Node) (*transposePair, bool) { return matchTransposePair(e, n, types) }
	return Rule[*transposePair]{OpTypes: []string{"Transpose"}, Match: match, Apply: mergeTransposePair}.apply(c.Model)
}

// transposePair is a Transpose (first) read only by another (second), and
// the permutation of both together.
type transposePair struct {
	first, second *graph.Node
	composed      []int64
	// cancel: composed is the identity and second's readers may read
	// first's input instead.
	cancel bool
}

func matchTransposePair(e *graphEdit, n *graph.Node, types declaredTypes) (*transposePair, bool) {
	if len(n.Inputs()) != 1 || len(n.Outputs()) != 1 {
		return nil, false
	}
	first := e.absorbable(n.Input(0), "Transpose")
	if first == nil {
		return nil, false
	}
	p, q, ok := transposePerms(first, n, types)
	if !ok {
		return nil, false
	}
	composed := make([]int64, len(q))
	identity := true
	for i, qi := range q {
		composed[i] = p[qi]
		identity = identity && composed[i] == int64(i)
	}
	return &transposePair{first: first, second: n, composed: composed,
		cancel: identity && e.canBypass(n.Output(0), first.Input(0))}, true
}

// mergeTransposePair removes both nodes when they cancel, else lets
// second read first's input with the composed permutation.
func mergeTransposePair(e *graphEdit, tp *transposePair) (Stats, error) {
	x := tp.first.Input(0)
	if tp.cancel {
		e.bypass(tp.second.Output(0), x)
		e.remove(tp.second)
		e.remove(tp.first)
		return Stats{}, nil
	}
	tp.second.SetInput(0, x)
	tp.second.SetAttr(&graph.Attr{Name: "perm", Type: graph.AttrInts, Ints: tp.composed})
	e.remove(tp.first)
	return Stats{Rewritten: 1}, nil
}

// transposePerms returns the permutations of first and then second, with
// an absent one spelled out; false when they are not permutations of the
// same rank or the rank is unknown.
func transposePerms(first, second *graph.Node, types declaredTypes) (p, q []int64, ok bool) {
	rank := -1
	for _, n := range []*graph.Node{first, second} {
		if a := n.Attr("perm"); a != nil {
			if a.Type != graph.AttrInts {
				return nil, nil, false
			}
			rank = len(a.Ints)
		}
	}
	if rank < 0 {
		dims, known := types.dims(first.Input(0))
		if !known {
			return nil, nil, false
		}
		rank = len(dims)
	}
	perm := func(n *graph.Node) []int64 {
		if a := n.Attr("perm"); a != nil {
			return a.Ints
		}
		rev := make([]int64, rank)
		for i := range rev {
			rev[i] = int64(rank - 1 - i)
		}
		return rev
	}
	p, q = perm(first), perm(second)
	return p, q, isPermutation(p, rank) && isPermutation(q, rank)
}

// isPermutation reports whether p holds each of 0..rank-1 once.
func isPermutation(p []int64, rank int) bool {
	if len(p) != rank {
		return false
	}
	seen := make([]bool, rank)
	for _, x := range p {
		if x < 0 || x >= int64(rank) || seen[x] {
			return false
		}
		seen[x] = true
	}
	return true
}
