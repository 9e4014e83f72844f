package passes

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strconv"

	"github.com/optc-dev/optc/graph"
)

// dedupInitializers merges initializers with the same type, dims and
// bytes into the first of them: exporters repeat small constants (shapes,
// scales, zero points) per use, and converted models sometimes repeat
// whole weights. With one value per content, CSE can then merge the nodes
// that read them.
//
// Candidates are grouped by type and dims first, so that only tensors
// with a same-shaped twin are read and hashed; a hash hit is compared byte
// for byte. Left alone: initializers that are also graph inputs (callers
// may override them), string tensors, and a duplicate whose value a graph
// returns (its name must stay) or that nothing reads (eliminate-dead-code
// removes those). Nodes whose inputs are rewired count as rewritten.
var dedupInitializers = &Pass{
	Name:  "dedup-initializers",
	Doc:   "merge initializers with identical type, dims and contents",
	Level: 1,
	Form:  GraphWide,
	Run:   runDedupInitializers,
}

func runDedupInitializers(c *Context) (Stats, error) {
	seed := maphash.MakeSeed()
	return editGraphs(c.Model, func(e *graphEdit) error {
		inputs := make(map[*graph.Value]bool, len(e.g.Inputs))
		for _, v := range e.g.Inputs {
			inputs[v] = true
		}
		// The initializers by dtype and dims, in order of first sight; the
		// key is built in one reused buffer, and a string is made only for
		// a new one (a string per initializer was an eighth of the pass).
		byShape := map[string]*[]*graph.Value{}
		var groups []*[]*graph.Value
		var key []byte
		for _, v := range e.g.Initializers {
			t := v.Const
			if t == nil || inputs[v] || t.DType == graph.String {
				continue
			}
			key = strconv.AppendInt(key[:0], int64(t.DType), 10)
			for _, d := range t.Dims {
				key = strconv.AppendInt(append(key, ' '), d, 10)
			}
			group := byShape[string(key)]
			if group == nil {
				group = new([]*graph.Value)
				byShape[string(key)] = group
				groups = append(groups, group)
			}
			*group = append(*group, v)
		}
		var dups []*graph.Value
		for _, g := range groups {
			group := *g
			if len(group) < 2 {
				continue
			}
			kept := map[uint64][]*graph.Value{}
			for _, v := range group {
				data, err := v.Const.Bytes()
				if err != nil {
					return fmt.Errorf("initializer %q: %w", v.Name, err)
				}
				h := maphash.Bytes(seed, data)
				var first *graph.Value
				for _, f := range kept[h] {
					fd, err := f.Const.Bytes()
					if err != nil {
						return fmt.Errorf("initializer %q: %w", f.Name, err)
					}
					if bytes.Equal(fd, data) {
						first = f
						break
					}
				}
				if first == nil || len(v.Uses()) == 0 || e.returned(v) {
					if first == nil {
						kept[h] = append(kept[h], v)
					}
					continue
				}
				readers := map[*graph.Node]bool{}
				for _, u := range v.Uses() {
					readers[u.Node] = true
				}
				e.replaceUses(v, first)
				e.st.Rewritten += len(readers)
				dups = append(dups, v)
			}
		}
		if len(dups) == 0 {
			return nil
		}
		return e.g.RemoveInitializers(dups)
	})
}
