package passes

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// eliminateCSE merges nodes that compute the same thing: same operator,
// domain and attributes, reading the very same values. The first one in
// graph order stays and the readers of a later twin read its outputs.
// Exporters repeat shape computations (Shape, Gather, Unsqueeze, Concat)
// and identical Constants per use; merging them also lets later passes see
// one value where there were many.
//
// One pass over each graph in order finds every twin, since a merge
// rewires the readers before they are visited: a node's twins are looked
// for among the earlier readers of its least-read input (cseScanUses),
// and compared in full. Left alone: operators outside the default ONNX domain
// (whose semantics optc does not know), random operators and Dropout,
// nodes with subgraphs or with sparse-tensor or type attributes, and a
// later twin whose output a graph returns (its name must stay).
var eliminateCSE = &Pass{
	Name:  "eliminate-common-subexpressions",
	Doc:   "merge nodes with the same operator, attributes and inputs",
	Level: 1,
	Form:  GraphWide,
	Run:   runEliminateCSE,
}

// nondeterministicOps draw random numbers: two calls differ.
var nondeterministicOps = []string{
	"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
	"Bernoulli", "Multinomial", "Dropout",
}

// cseScanUses bounds the readers a node's twins are looked for among:
// twins read the very same values, so they are among the readers of the
// node's least-read input, and a scan of those (usually one or two) costs
// no lookup in a table of every node, which at a million nodes misses the
// CPU caches on each. A node whose every input is read more widely (or
// that reads nothing: a Constant) goes to a hash map instead. A value's
// readers can grow past the bound during the pass (merges move readers to
// the twin kept); a twin missed that way is found when the pass runs
// again.
const cseScanUses = 1024

func runEliminateCSE(c *Context) (Stats, error) {
	seed := maphash.MakeSeed()
	return editGraphs(c.Model, func(e *graphEdit) error {
		pos := e.g.Positions() // removals wait until the edit ends: Nodes stays as it is
		// Nodes that go by key: the first of each key, and the rare
		// others whose key collides with it.
		var byKey map[uint64][]*graph.Node
		for _, n := range e.g.Nodes {
			if !cseCandidate(n) {
				continue
			}
			var twin *graph.Node
			if x := leastRead(n); x != nil && len(x.Uses()) <= cseScanUses {
				twin = earliestTwin(n, x, pos)
			} else {
				key := cseKey(seed, n)
				for _, m := range byKey[key] {
					if cseEqual(m, n) {
						twin = m
						break
					}
				}
				if twin == nil {
					if byKey == nil {
						byKey = map[uint64][]*graph.Node{}
					}
					byKey[key] = append(byKey[key], n)
					continue
				}
			}
			if twin == nil || slices.ContainsFunc(n.Outputs(), func(v *graph.Value) bool { return v != nil && e.returned(v) }) {
				continue
			}
			for i, out := range n.Outputs() {
				if out != nil {
					e.replaceUses(out, twin.Output(i))
				}
			}
			e.remove(n)
		}
		return nil
	})
}

// leastRead is the input of n with the fewest readers (nil when n reads
// nothing).
func leastRead(n *graph.Node) *graph.Value {
	var x *graph.Value
	for _, v := range n.Inputs() {
		if v != nil && (x == nil || len(v.Uses()) < len(x.Uses())) {
			x = v
		}
	}
	return x
}

// earliestTwin is the first node in graph order before n that reads x and
// computes what n computes, or nil. The first of a set of twins is never
// removed (it has no earlier twin), so it is the one the others merge
// into.
func earliestTwin(n *graph.Node, x *graph.Value, pos func(*graph.Node) int) *graph.Node {
	var twin *graph.Node
	at, twinAt := pos(n), -1
	for _, u := range x.Uses() {
		m := u.Node
		if m == n {
			continue
		}
		if i := pos(m); i >= 0 && i < at && (twin == nil || i < twinAt) && cseEqual(m, n) {
			twin, twinAt = m, i
		}
	}
	return twin
}

// cseCandidate reports whether n may be merged with a twin.
func cseCandidate(n *graph.Node) bool {
	if n.Domain != "" && n.Domain != "ai.onnx" || slices.Contains(nondeterministicOps, n.OpType) || len(n.Outputs()) == 0 {
		return false
	}
	for _, a := range n.Attrs {
		switch a.Type {
		case graph.AttrFloat, graph.AttrInt, graph.AttrString, graph.AttrFloats, graph.AttrInts, graph.AttrStrings:
		case graph.AttrTensor:
			if a.Tensor == nil || !tensorComparable(a.Tensor) {
				return false
			}
		case graph.AttrTensors:
			for _, t := range a.Tensors {
				if t == nil || !tensorComparable(t) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// tensorComparable reports whether t's contents can be read for a
// comparison.
func tensorComparable(t *graph.Tensor) bool {
	if t.DType == graph.String {
		_, err := t.Strings()
		return err == nil
	}
	_, err := t.Bytes()
	return err == nil
}

// sortedAttrs returns n's attributes by name: their order means nothing.
// Already in order (none or one, as most nodes have), they are n's own
// list, not a copy: the caller must not change it.
func sortedAttrs(n *graph.Node) []*graph.Attr {
	byName := func(a, b *graph.Attr) int { return cmp.Compare(a.Name, b.Name) }
	if slices.IsSortedFunc(n.Attrs, byName) {
		return n.Attrs
	}
	return slices.SortedFunc(slices.Values(n.Attrs), byName)
}

// cseKey hashes what cseEqual compares.
func cseKey(seed maphash.Seed, n *graph.Node) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	str := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	num := func(x uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	str(n.OpType)
	str(n.Domain)
	str(n.Overload)
	num(uint64(len(n.Inputs())))
	for _, v := range n.Inputs() {
		num(maphash.Comparable(seed, v))
	}
	num(uint64(len(n.Outputs())))
	for _, v := range n.Outputs() {
		if v == nil {
			h.WriteByte(0)
		} else {
			h.WriteByte(1)
		}
	}
	for _, a := range sortedAttrs(n) {
		str(a.Name)
		str(a.RefAttrName)
		num(uint64(a.Type))
		num(uint64(math.Float32bits(a.Float)))
		num(uint64(a.Int))
		h.Write(a.String)
		num(uint64(len(a.Floats)))
		for _, f := range a.Floats {
			num(uint64(math.Float32bits(f)))
		}
		num(uint64(len(a.Ints)))
		for _, x := range a.Ints {
			num(uint64(x))
		}
		num(uint64(len(a.Strings)))
		for _, s := range a.Strings {
			h.Write(s)
			h.WriteByte(0)
		}
		for _, t := range append([]*graph.Tensor{a.Tensor}, a.Tensors...) {
			if t == nil {
				continue
			}
			num(uint64(t.DType))
			num(uint64(len(t.Dims)))
			for _, d := range t.Dims {
				num(uint64(d))
			}
			if b, err := t.Bytes(); err == nil {
				h.Write(b)
			}
		}
	}
	return h.Sum64()
}

// cseEqual reports whether a and b compute the same outputs.
func cseEqual(a, b *graph.Node) bool {
	if a.OpType != b.OpType || a.Domain != b.Domain || a.Overload != b.Overload ||
		!slices.Equal(a.Inputs(), b.Inputs()) || len(a.Outputs()) != len(b.Outputs()) || len(a.Attrs) != len(b.Attrs) {
		return false
	}
	for i, v := range a.Outputs() {
		if (v == nil) != (b.Output(i) == nil) {
			return false
		}
	}
	return slices.EqualFunc(sortedAttrs(a), sortedAttrs(b), attrEqual)
}

// attrEqual compares two attributes of the kinds cseCandidate admits.
// Floats compare by their bits, so NaN equals NaN and -0 differs from 0.
func attrEqual(a, b *graph.Attr) bool {
	f32 := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }
	return a.Name == b.Name && a.Type == b.Type && a.RefAttrName == b.RefAttrName &&
		f32(a.Float, b.Float) && a.Int == b.Int && bytes.Equal(a.String, b.String) &&
		slices.EqualFunc(a.Floats, b.Floats, f32) && slices.Equal(a.Ints, b.Ints) &&
		slices.EqualFunc(a.Strings, b.Strings, bytes.Equal) &&
		(a.Tensor == nil) == (b.Tensor == nil) && (a.Tensor == nil || tensorEqual(a.Tensor, b.Tensor)) &&
		slices.EqualFunc(a.Tensors, b.Tensors, tensorEqual)
}

// tensorEqual compares type, dims and contents.
func tensorEqual(a, b *graph.Tensor) bool {
	if a.DType != b.DType || !slices.Equal(a.Dims, b.Dims) {
		return false
	}
	if a.DType == graph.String {
		sa, err1 := a.Strings()
		sb, err2 := b.Strings()
		return err1 == nil && err2 == nil && slices.EqualFunc(sa, sb, bytes.Equal)
	}
	ba, err1 := a.Bytes()
	bb, err2 := b.Bytes()
	return err1 == nil && err2 == nil && bytes.Equal(ba, bb)
}
