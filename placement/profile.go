package placement

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/latency"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
)

// profileRuns is how many runs the profiler records per model; the
// per-node figure is their median, so the first (cold) runs do not count.
const profileRuns = 15

// traceEvent is the part of an ORT profiler event this package reads.
type traceEvent struct {
	Cat  string  `json:"cat"`
	Name string  `json:"name"`
	Dur  float64 `json:"dur"` // microseconds
	Args struct {
		OpName string `json:"op_name"` // the kernel ORT ran: QLinearConv, ...
	} `json:"args"`
}

// nodeTimes runs the model in ORT with the profiler on and returns the
// median time per run of each node, in milliseconds, by the name ORT gives
// it.
func nodeTimes(model graph.Serialized, sess ort.Options, inputs []*graph.Tensor) (map[string]float64, cost, error) {
	nodes, k, err := profileNodes(model, sess, inputs)
	if err != nil {
		return nil, k, err
	}
	times := make(map[string]float64, len(nodes))
	for _, n := range nodes {
		times[n.Name] = n.Ms
	}
	return times, k, nil
}

// NodeTime is one node of ORT's optimized graph as the profiler saw it.
type NodeTime struct {
	Name string  // as ORT names it after its rewrites
	Op   string  // the kernel ORT ran (QLinearConv, com.microsoft FusedConv, ...)
	Ms   float64 // median per run, milliseconds
}

// profileNodes runs the model profileRuns times in ORT with the profiler
// on and returns each node's median time per run, in ORT's node order of
// first appearance, and what the session and the runs cost.
func profileNodes(model graph.Serialized, sess ort.Options, inputs []*graph.Tensor) ([]NodeTime, cost, error) {
	var k cost
	dir, err := os.MkdirTemp("", "optc-placement-")
	if err != nil {
		return nil, k, err
	}
	defer os.RemoveAll(dir)
	m, err := model.Parse()
	if err != nil {
		return nil, k, err
	}
	ins, outs := ort.Interface(m)
	sess.ProfilePrefix = filepath.Join(dir, "profile")
	created := time.Now()
	s, err := ort.NewSession(ort.SourceFrom(model, ins, outs), sess)
	if err != nil {
		return nil, k, err
	}
	k.session = time.Since(created)
	runs := make([]float64, profileRuns)
	for i := range runs {
		t := time.Now()
		if _, err := s.Run(inputs); err != nil {
			s.Close()
			return nil, k, err
		}
		runs[i] = float64(time.Since(t))
	}
	k.run = time.Duration(latency.Median(runs))
	if err := s.Close(); err != nil {
		return nil, k, err
	}
	traces, err := filepath.Glob(sess.ProfilePrefix + "*.json")
	if err != nil || len(traces) != 1 {
		return nil, k, fmt.Errorf("ORT wrote %d profile traces under %s, want 1", len(traces), dir)
	}
	b, err := os.ReadFile(traces[0])
	if err != nil {
		return nil, k, err
	}
	var events []traceEvent
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, k, fmt.Errorf("ORT profile trace %s: %w", traces[0], err)
	}
	durs := map[string][]float64{}
	var nodes []NodeTime
	for _, e := range events {
		name, ok := strings.CutSuffix(e.Name, "_kernel_time")
		if e.Cat != "Node" || !ok {
			continue
		}
		if _, seen := durs[name]; !seen {
			nodes = append(nodes, NodeTime{Name: name, Op: e.Args.OpName})
		}
		durs[name] = append(durs[name], e.Dur/1000)
	}
	for i := range nodes {
		nodes[i].Ms = latency.Median(durs[nodes[i].Name])
	}
	return nodes, k, nil
}

// ortSuffix is what ORT appends to the name of a node it rewrote: QDQ
// fusion makes "conv_token_12", layout transformation "conv_nchwc".
var ortSuffix = regexp.MustCompile(`(_token_\d+|_nchwc)+$`)

// regionCosts attributes profiled node times to regions: the region's own
// node, the Relu/Clip fused into it (by node or output name), and (INT8 model) the Q/DQ nodes that
// feed only it or that quantize its output, shared Q/DQ split evenly
// between their readers. Nodes ORT adds (layout reorders) belong to no
// region; the whole-model timings count them.
func regionCosts(q *quantized, times map[string]float64) []float64 {
	owner := map[string][]int{} // node name -> regions it counts for
	own := func(name string, r int) {
		if name != "" && !slices.Contains(owner[name], r) {
			owner[name] = append(owner[name], r)
		}
	}
	for r, n := range q.nodes {
		// ORT's layout transformation names an NCHWc node after its output.
		own(n.Name, r)
		if n.Output(0) == nil {
			continue // its first output omitted (an LSTM's Y)
		}
		own(n.Output(0).Name, r)
		if act := quantize.OutputActivation(n); act != nil && act != n.Output(0) && act.Producer() != nil {
			own(act.Producer().Name, r)
			own(act.Name, r)
		}
	}
	regionOf := map[*graph.Node]int{}
	for r, n := range q.nodes {
		regionOf[n] = r
	}
	readers := func(v *graph.Value) []int {
		var rs []int
		for _, u := range v.Uses() {
			if r, ok := regionOf[u.Node]; ok && !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		return rs
	}
	for _, n := range q.model.Graph.Nodes {
		switch n.OpType {
		case "DequantizeLinear":
			owner[n.Name] = readers(n.Output(0))
		case "QuantizeLinear":
			var rs []int
			for _, u := range n.Output(0).Uses() {
				if u.Node.OpType == "DequantizeLinear" {
					rs = append(rs, readers(u.Node.Output(0))...)
				}
			}
			owner[n.Name] = rs
		}
	}
	costs := make([]float64, len(q.nodes))
	for name, t := range times {
		rs := owner[ortSuffix.ReplaceAllString(name, "")]
		for _, r := range rs {
			costs[r] += t / float64(len(rs))
		}
	}
	return costs
}
