package placement

import (
	"cmp"
	"slices"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// OpTime is the profiled time of one kind of kernel across a model.
type OpTime struct {
	Op    string  // the kernel ORT ran (after its own fusions and layout rewrites)
	Nodes int     // how many nodes ran it
	Ms    float64 // sum of the nodes' median times per run, milliseconds
}

// ProfileOps runs model in ORT with the profiler on (random inputs of
// batch samples, dynamic dims fixed by spec; profileRuns runs) and returns
// the time per kernel kind, slowest first, and the nodes themselves. It
// is how docs/int8-cpu.md says where an INT8 model's time goes: the
// kernel names are ORT's, so they show which QDQ groups ORT turned into
// integer kernels and which Q/DQ conversions it left running.
func ProfileOps(model graph.Serialized, sess ort.Options, spec data.Spec, batch int) ([]OpTime, []NodeTime, error) {
	m, err := model.Parse()
	if err != nil {
		return nil, nil, err
	}
	in, err := inputs(m, spec, batch)
	if err != nil {
		return nil, nil, err
	}
	nodes, _, err := profileNodes(model, sess, in)
	if err != nil {
		return nil, nil, err
	}
	return ByOp(nodes), nodes, nil
}

// ByOp sums node times per kernel kind, slowest first (ties by name, so
// the order is deterministic).
func ByOp(nodes []NodeTime) []OpTime {
	idx := map[string]int{}
	var ops []OpTime
	for _, n := range nodes {
		i, ok := idx[n.Op]
		if !ok {
			i = len(ops)
			idx[n.Op] = i
			ops = append(ops, OpTime{Op: n.Op})
		}
		ops[i].Nodes++
		ops[i].Ms += n.Ms
	}
	slices.SortFunc(ops, func(a, b OpTime) int {
		return cmp.Or(cmp.Compare(b.Ms, a.Ms), cmp.Compare(a.Op, b.Op))
	})
	return ops
}
