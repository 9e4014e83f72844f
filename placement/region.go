// Package placement decides where INT8 pays on ONNX Runtime's CPU
// provider. INT8 Q/DQ is not faster everywhere: on many CPUs depthwise and
// 1x1 convolutions, squeeze-excite blocks and small models run slower
// quantized than ORT's float NCHWc kernels, while dense 3x3 convolutions
// run up to twice as fast. So the quantized graph is split into regions
// (each node quantize.Apply quantizes: a weighted op with the Relu/Clip
// fused into it, or an Add/Mul/Concat/pool between Q/DQ boundaries), each
// region's float and INT8 cost is measured with ORT's profiler, a greedy
// search reverts whole kinds of region (depthwise convs, 1x1 convs, ...)
// where A/B timing says INT8 loses, and the whole-model candidates are
// timed against each other; the fastest that keeps the accuracy budget
// wins, and FP32 when none is faster.
//
// The decision is written as placement.json and replays without
// measuring, so that CI rebuilds are deterministic.
package placement

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// quantized is the INT8 model quantize.Apply makes from the float bytes,
// with the regions it quantized (in graph order, every one int8).
type quantized struct {
	model      *graph.Model
	serialized graph.Serialized
	regions    []schema.Region
	// nodes are the region nodes of model, by region.
	nodes []*graph.Node
	// what describes a whole-model alternative in the file's reason ("":
	// a placement of the regions).
	what string
	// report is what quantize said it did (the scheme recorded).
	report *quantize.Report
}

// quantizeKeeping quantizes a fresh copy of float with the regions whose
// decision is Float kept float. With regions nil it finds the regions: the
// nodes Apply rewrote.
func quantizeKeeping(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options, regions []schema.Region) (*quantized, error) {
	m, err := float.Parse()
	if err != nil {
		return nil, err
	}
	opts.KeepFloat = slices.Clone(opts.KeepFloat)
	for _, r := range regions {
		if r.Index < 0 || r.Index >= len(m.Graph.Nodes) {
			return nil, fmt.Errorf("region %q: node index %d is outside the graph's %d nodes", r.ID, r.Index, len(m.Graph.Nodes))
		}
		if r.Decision == schema.DecisionFloat {
			opts.KeepFloat = append(opts.KeepFloat, r.Index)
		}
	}
	before := slices.Clone(m.Graph.Nodes)
	rep, err := quantize.Apply(m, ranges, opts)
	if err != nil {
		return nil, err
	}
	reported := map[string]bool{}
	for _, e := range rep.Quantized {
		reported[e.Node] = true
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("quantized model is invalid (a bug in optc): %w", err)
	}
	q := &quantized{model: m, regions: regions, report: rep}
	for _, r := range regions {
		q.nodes = append(q.nodes, before[r.Index])
	}
	if regions == nil {
		for i, n := range before {
			// A node Apply quantized: it reads a DequantizeLinear now, or
			// it was rewritten into integer ops (a HardSigmoid's uint8
			// Clip, which keeps its name). A float op that merely reads a
			// quantized op's output through its Q/DQ is no region:
			// keeping it float would change nothing.
			if !reported[n.String()] || (!readsDequantized(n) && n.Graph() != nil) {
				continue
			}
			id := n.Name
			if id == "" {
				id = fmt.Sprintf("#%d %s", i, n.OpType)
			}
			q.regions = append(q.regions, schema.Region{ID: id, Index: i, Op: n.OpType, Decision: schema.DecisionINT8})
			q.nodes = append(q.nodes, n)
		}
	}
	if q.serialized, err = graph.MarshalReferencing(m); err != nil {
		return nil, err
	}
	return q, nil
}

// readsDequantized reports whether quantize.Apply rewrote n: one of its
// inputs now comes from a DequantizeLinear.
func readsDequantized(n *graph.Node) bool {
	if n.OpType == "DequantizeLinear" || n.OpType == "QuantizeLinear" {
		return false
	}
	for _, in := range n.Inputs() {
		if in == nil {
			continue // an omitted optional input (LSTM's sequence_lens)
		}
		if p := in.Producer(); p != nil && p.OpType == "DequantizeLinear" {
			return true
		}
	}
	return false
}

// withDecisions returns regions with the ones whose node index is in float
// kept float, every other one int8.
func withDecisions(regions []schema.Region, float map[int]bool) []schema.Region {
	out := slices.Clone(regions)
	for i := range out {
		out[i].Decision = schema.DecisionINT8
		if float[out[i].Index] {
			out[i].Decision = schema.DecisionFloat
		}
	}
	return out
}
