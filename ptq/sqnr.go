package ptq

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/internal/parallel"
	"github.com/optc-dev/optc/report/schema"
)

// TensorSQNR is how faithfully one quantized activation is represented:
// 10 log10(sum x^2 / sum (x - dq(q(x)))^2) over evaluation samples, where x
// is the float model's tensor and dq(q(x)) what the INT8 model computes at
// the same place, over the finite pairs. Identical tensors are capped at
// MaxSQNR; a tensor that is zero in float but not in INT8, or NaN/Inf in
// INT8 where float is finite, is -Inf; one with no finite pair NaN.
type TensorSQNR struct {
	Tensor string          `json:"tensor"`
	SQNRdB jsonfloat.Float `json:"sqnr_db"`
}

// sqnrOf is the SQNR an accumulator measured, capped at MaxSQNR: -Inf
// where INT8 is NaN/Inf and float finite (infinite noise), NaN when
// nothing was finite.
func sqnrOf(acc *compare.Accumulator) jsonfloat.Float {
	st := acc.Result()
	if st.NewNonFinite > 0 {
		return jsonfloat.Float(math.Inf(-1))
	}
	return jsonfloat.Float(min(float64(st.SNRdB), schema.MaxSQNR)) // NaN stays NaN
}

// sqnrRunBytes bounds what one SQNR run fetches, per model. Both models'
// values of a group are held at once, each with its float32 copy, so a
// quarter of calibration's bound keeps them to about what one calibration
// run holds; a part computes only what its group needs (calibrate.OpenParts),
// so the extra parts cost less than extra whole-model runs.
var sqnrRunBytes int64 = calibrate.DefaultMaxRunBytes / 4 // a var so a test can split finer

// sqnrSamples is how many evaluation samples the per-tensor SQNR uses,
// run sqnrBatch at a time.
const sqnrSamples, sqnrBatch = 32, 8

// tensorSQNR pairs every activation Q/DQ of the INT8 model with the float
// tensor it quantizes, runs both models on sqnrSamples of the evaluation
// data with those values exposed, and returns the SQNR of each, worst
// first.
func tensorSQNR(opts Options, float, int8Model graph.Serialized, spec string, dopts data.Options) ([]TensorSQNR, error) {
	fm, qm, err := parseBoth(float, int8Model)
	if err != nil {
		return nil, err
	}
	var xs, dqs []string
	for _, n := range qm.Graph.Nodes {
		if n.OpType != "DequantizeLinear" {
			continue
		}
		q := n.Input(0).Producer()
		if q == nil || q.OpType != "QuantizeLinear" || fm.Graph.Value(q.Input(0).Name) == nil || slices.Contains(xs, q.Input(0).Name) {
			continue
		}
		xs, dqs = append(xs, q.Input(0).Name), append(dqs, n.Output(0).Name)
	}
	if len(xs) == 0 {
		return nil, nil
	}
	// Both models' values for sqnrSamples samples would be the largest
	// thing a build holds (about 9 GiB for PaddleOCR det at 320x320), so
	// the samples run in batches of sqnrBatch and the values in groups of
	// at most sqnrRunBytes per run; each tensor's sums
	// take its elements in the same order as from one run of all samples.
	dopts.Samples, dopts.Batch = sqnrSamples, sqnrBatch
	if b := data.StaticBatch(data.GraphInputs(fm.Graph), dopts.Spec); b > 0 {
		// A model with a fixed batch size gets one batch of that size.
		dopts.Samples, dopts.Batch = b, b
	}
	var groups [][]string
	err = forBatches(spec, data.GraphInputs(fm.Graph), dopts, func(b int, batch *data.Batch) error {
		if b == 0 {
			groups, err = calibrate.SplitByBytes(fm, xs, batch.Tensors, sqnrRunBytes)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("float model: %w", err)
	}
	pair := map[string]string{}
	for i, x := range xs {
		pair[x] = dqs[i]
	}
	// Per group, the float model's tensors and the INT8 model's at the
	// same places.
	both := make([][][]string, len(groups))
	for i, g := range groups {
		var q []string
		for _, x := range g {
			q = append(q, pair[x])
		}
		both[i] = [][]string{g, q}
	}
	// compare's SNR is the same ratio, over the finite pairs.
	accs := map[string]*compare.Accumulator{}
	for _, x := range xs {
		accs[x] = compare.NewAccumulator(x, math.Inf(1), 0, compare.StatMax)
	}
	tick := opts.counter("per-tensor SQNR: groups of tensors", len(groups))
	err = runGroups(spec, dopts, opts.Session, []*graph.Model{fm, qm}, both, func(i, _ int, outs [][]*graph.Tensor) error {
		tick(i)
		g, fv, qv := groups[i], outs[0], outs[1]
		// Each tensor has its own accumulator: they are filled side by
		// side, each taking its batches in order.
		return parallel.For(len(g), func(j int) error {
			f, err := fv[j].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", g[j], err)
			}
			q, err := qv[j].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", both[i][1][j], err)
			}
			// The float32 copies are per tensor; the runs' values go as
			// soon as they are read.
			fv[j], qv[j] = nil, nil
			return accs[g[j]].Add(f, q, nil)
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]TensorSQNR, len(xs))
	for i, x := range xs {
		out[i] = TensorSQNR{Tensor: x, SQNRdB: sqnrOf(accs[x])}
	}
	slices.SortStableFunc(out, func(a, b TensorSQNR) int {
		return cmp.Compare(a.SQNRdB, b.SQNRdB) // NaN first
	})
	return out, nil
}

// parseBoth parses the float and the INT8 model that a per-tensor or
// per-layer SQNR measures side by side, float first.
func parseBoth(float, int8Model graph.Serialized) (fm, qm *graph.Model, err error) {
	if fm, err = float.Parse(); err != nil {
		return nil, nil, err
	}
	if qm, err = int8Model.Parse(); err != nil {
		return nil, nil, err
	}
	return fm, qm, nil
}

// LayerSQNR is one weighted layer's own quantization error in the INT8
// model: 10 log10(sum y^2 / sum (y - y8)^2), where y8 is what the layer
// computes in the INT8 model and y what its float self computes from the
// same input (the INT8 model's tensor before the layer's input Q/DQ). It
// is what keeping the layer float removes there, not what the layers
// after it make of that. A layer the INT8 model left float has MaxSQNR.
type LayerSQNR struct {
	Node   string          `json:"node"`
	SQNRdB jsonfloat.Float `json:"sqnr_db"`
}

// layerSQNR measures every named layer's LayerSQNR on the evaluation
// data (at most samples of it) in one pass over one probe model: the INT8
// model with, beside each quantized layer, a float copy reading the float
// side of its inputs, both outputs fetched. It returns them worst first
// (NaN first, then -Inf). The probe runs Q/DQ as float arithmetic where
// an output is fetched, so it measures the quantization, not ORT's INT8
// kernels: a ranking, not a verdict.
func layerSQNR(opts Options, float, int8Model graph.Serialized, layers []string, spec string, dopts data.Options, samples int) ([]LayerSQNR, error) {
	fm, pm, err := parseBoth(float, int8Model)
	if err != nil {
		return nil, err
	}
	pairs, err := addFloatProbes(fm, pm, layers)
	if err != nil {
		return nil, fmt.Errorf("probe model: %w", err)
	}
	out := make([]LayerSQNR, 0, len(layers))
	measured := map[string]bool{}
	if len(pairs) > 0 {
		res, err := runProbes(opts, fm, pm, pairs, spec, dopts, samples)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		for _, p := range pairs {
			measured[p.node] = true
		}
	}
	for _, l := range layers {
		if !measured[l] {
			out = append(out, LayerSQNR{Node: l, SQNRdB: jsonfloat.Float(schema.MaxSQNR)})
		}
	}
	slices.SortStableFunc(out, func(a, b LayerSQNR) int {
		return cmp.Compare(a.SQNRdB, b.SQNRdB) // NaN first
	})
	return out, nil
}

// probePair is one layer's output in the INT8 model and its float copy's.
type probePair struct{ node, int8Out, floatOut string }

// addFloatProbes adds to pm (the INT8 model) a float copy of each named
// layer the quantizer rewrote: fm's node with its attributes, reading
// the tensor before each activation Q/DQ and fm's own constants where pm
// reads dequantized ones.
func addFloatProbes(fm, pm *graph.Model, layers []string) ([]probePair, error) {
	want := map[string]*graph.Node{}
	for _, n := range fm.Graph.Nodes {
		if n.Name != "" && slices.Contains(layers, n.Name) {
			want[n.Name] = n
		}
	}
	var pairs []probePair
	for _, n := range slices.Clone(pm.Graph.Nodes) {
		f := want[n.Name]
		if f == nil || f.OpType != n.OpType || len(f.Inputs()) != len(n.Inputs()) || len(n.Outputs()) != 1 || !readsDequantized(n) {
			continue
		}
		ins := make([]*graph.Value, len(n.Inputs()))
		for i, v := range n.Inputs() {
			if v == nil {
				continue
			}
			fv, err := floatSide(pm.Graph, v, f.Input(i))
			if err != nil {
				return nil, fmt.Errorf("layer %q input %d: %w", n.Name, i, err)
			}
			ins[i] = fv
		}
		y, err := pm.Graph.NewValue(pm.Graph.UniqueName(n.Output(0).Name + "_float_probe"))
		if err != nil {
			return nil, err
		}
		p, err := pm.Graph.AddNode(f.OpType, ins, []*graph.Value{y})
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", n.Name, err)
		}
		p.Name, p.Domain, p.Attrs = y.Name, f.Domain, f.Attrs
		pairs = append(pairs, probePair{node: n.Name, int8Out: n.Output(0).Name, floatOut: y.Name})
	}
	return pairs, nil
}

// readsDequantized: some input of n comes from a DequantizeLinear (the
// quantizer rewrote n).
func readsDequantized(n *graph.Node) bool {
	return slices.ContainsFunc(n.Inputs(), func(v *graph.Value) bool {
		return v != nil && v.Producer() != nil && v.Producer().OpType == "DequantizeLinear"
	})
}

// floatSide is what a float copy of a layer reads where the INT8 layer
// reads v: the tensor an activation Q/DQ quantizes, the float model's
// constant (fv) where v dequantizes a stored one, else v itself.
func floatSide(g *graph.Graph, v, fv *graph.Value) (*graph.Value, error) {
	dq := v.Producer()
	if dq == nil || dq.OpType != "DequantizeLinear" {
		return v, nil
	}
	if q := dq.Input(0).Producer(); q != nil && q.OpType == "QuantizeLinear" {
		return q.Input(0), nil
	}
	if fv == nil || fv.Const == nil {
		return v, nil
	}
	b, err := fv.Const.Bytes()
	if err != nil {
		return nil, err
	}
	t := &graph.Tensor{Name: g.UniqueName(fv.Name + "_float_probe"), DType: fv.Const.DType, Dims: fv.Const.Dims}
	if err := t.SetBytes(b); err != nil {
		return nil, err
	}
	return g.AddInitializer(t)
}

// runProbes runs the probe model over the samples, the pairs in groups
// of at most sqnrRunBytes per run, and returns each pair's SQNR.
func runProbes(opts Options, fm, pm *graph.Model, pairs []probePair, spec string, dopts data.Options, samples int) ([]LayerSQNR, error) {
	dopts = probeRuns(fm, dopts, samples)
	outs := make([]string, len(pairs))
	byOut := map[string]probePair{}
	for i, p := range pairs {
		outs[i], byOut[p.int8Out] = p.int8Out, p
	}
	var groups [][]string
	err := forBatches(spec, data.GraphInputs(pm.Graph), dopts, func(b int, batch *data.Batch) (err error) {
		if b == 0 {
			// Each group fetches both outputs of its layers.
			groups, err = calibrate.SplitByBytes(pm, outs, batch.Tensors, sqnrRunBytes/2)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	fetch := make([][][]string, len(groups))
	for i, g := range groups {
		var names []string
		for _, o := range g {
			names = append(names, o, byOut[o].floatOut)
		}
		fetch[i] = [][]string{names}
	}
	accs := map[string]*compare.Accumulator{}
	for _, p := range pairs {
		accs[p.int8Out] = compare.NewAccumulator(p.node, math.Inf(1), 0, compare.StatMax)
	}
	tick := opts.counter("fallback: each layer's own error, groups of layers", len(groups))
	err = runGroups(spec, dopts, opts.Session, []*graph.Model{pm}, fetch, func(i, _ int, outs [][]*graph.Tensor) error {
		tick(i)
		g, vs := groups[i], outs[0]
		return parallel.For(len(g), func(j int) error {
			q, err := vs[2*j].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", g[j], err)
			}
			f, err := vs[2*j+1].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", byOut[g[j]].floatOut, err)
			}
			vs[2*j], vs[2*j+1] = nil, nil
			return accs[g[j]].Add(f, q, nil)
		})
	})
	if err != nil {
		return nil, err
	}
	res := make([]LayerSQNR, len(pairs))
	for i, p := range pairs {
		res[i] = LayerSQNR{Node: p.node, SQNRdB: sqnrOf(accs[p.int8Out])}
	}
	return res, nil
}

// probeRuns is dopts for the probe's pass over at most samples
// evaluation samples, sqnrBatch at a time; a model with a fixed batch
// size runs whole batches of that size.
func probeRuns(fm *graph.Model, dopts data.Options, samples int) data.Options {
	dopts.Samples, dopts.Batch = samples, sqnrBatch
	if b := data.StaticBatch(data.GraphInputs(fm.Graph), dopts.Spec); b > 0 {
		dopts.Samples, dopts.Batch = max(b, samples/b*b), b
	}
	return dopts
}
