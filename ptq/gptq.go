package ptq

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// gptqRounding rounds the INT8 weights of the quantized Conv (group 1),
// Gemm and MatMul layers by GPTQ (prune.GPTQ) on their own per-channel
// scales, from the Gram of each layer's input in the float model: one run
// over the calibration data, a Gram per layer in memory (dim² floats,
// dim the weight's input features), nothing per sample. It returns the
// rounded weights for quantize.Options.Rounded.
//
// A non-zero deadline stops it between groups of layers: the layers not
// reached keep nearest rounding (GPTQReport.OutOfTime).
func gptqRounding(opts Options, float graph.Serialized, ranges map[string][2]float64, maxDim int64, deadline time.Time) (map[string][]float32, *schema.GPTQReport, error) {
	fm, q, err := floatAndQuantized(float, ranges, opts.Quant)
	if err != nil {
		return nil, nil, err
	}
	qmax, err := quantize.WeightQMax(opts.Quant)
	if err != nil {
		return nil, nil, err
	}
	perChannel := opts.Quant.PerChannel == nil || *opts.Quant.PerChannel
	rep := &schema.GPTQReport{}
	nodes := gptqLayers(fm, q, maxDim, rep)
	rounded := map[string][]float32{}
	if len(nodes) == 0 {
		return rounded, rep, nil
	}
	d := &prune.Data{Spec: opts.CalibData, Opts: opts.CalibOpts, Session: opts.Calib.Session, ORTLib: opts.ORTLib}
	var gptqErr, nearestErr float64
	// The Grams of a group of layers are collected in one run; a group
	// holds at most gramBytes of them (a 3x3 conv over 512 channels has a
	// 4608² Gram, 170 MB), and its layers read activations that one run
	// may fetch within half the calibration's per-run limit (a ResNet-50's
	// first 40 layers read 1 GB a batch of 8 at 224x224; each becomes
	// patches of float64 as it is read), so memory stays bounded whatever
	// the model.
	run, err := activationRuns(opts, fm, nodes)
	if err != nil {
		return nil, nil, fmt.Errorf("gptq: %w", err)
	}
	tick, done := opts.counter("gptq: layers rounded", len(nodes)), 0
	stop := opts.stops.loop("gptq layers")
	for len(nodes) > 0 {
		if stop(done, deadline) {
			rep.OutOfTime = len(nodes)
			opts.progress("gptq: %s: %d of %d layers rounded, the rest to nearest", opts.stopReason("the accuracy control's share of the budget ran out"), done, done+len(nodes))
			break
		}
		var group []*graph.Node
		var bytes int64
		for len(nodes) > 0 {
			dim := gramDim(nodes[0])
			if len(group) > 0 && (bytes+8*dim*dim > gramBytes || run[nodes[0].Input(0).Name] != run[group[0].Input(0).Name]) {
				break
			}
			group, nodes, bytes = append(group, nodes[0]), nodes[1:], bytes+8*dim*dim
		}
		hs, err := d.InputGrams(fm, group)
		if err != nil {
			return nil, nil, fmt.Errorf("gptq: %w", err)
		}
		for i, n := range group {
			tick(done)
			done++
			out, g, near, err := gptqLayer(n, hs[i], qmax, perChannel)
			if err != nil {
				return nil, nil, err
			}
			gptqErr, nearestErr = gptqErr+g, nearestErr+near
			rounded[n.Name] = out
		}
	}
	rep.Layers = len(rounded)
	if nearestErr > 0 {
		rep.ErrorRatio = gptqErr / nearestErr
	}
	return rounded, rep, nil
}

// activationRuns numbers the runs that fetch the layers' inputs within
// half the calibration's per-run byte limit, sized on the calibration
// data's first batch: each input's run.
func activationRuns(opts Options, fm *graph.Model, nodes []*graph.Node) (map[string]int, error) {
	var values []string
	for _, n := range nodes {
		if v := n.Input(0).Name; !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	src, err := data.Open(opts.CalibData, data.GraphInputs(fm.Graph), opts.CalibOpts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	batch, err := src.Next()
	if err != nil {
		return nil, fmt.Errorf("calibration data %s: batch 0: %w", opts.CalibData, err)
	}
	limit := opts.Calib.MaxRunBytes
	if limit <= 0 {
		limit = calibrate.DefaultMaxRunBytes
	}
	groups, err := calibrate.SplitByBytes(fm, values, batch.Tensors, limit/2)
	if err != nil {
		return nil, err
	}
	run := map[string]int{}
	for i, g := range groups {
		for _, v := range g {
			run[v] = i
		}
	}
	return run, nil
}

// GuardGPTQMaxDim bounds the layers the accuracy guard's GPTQ try rounds:
// GPTQ costs the cube of a layer's input features (a 3x3 conv over 512
// channels, 4608 of them, takes about a minute here), and a try the user
// did not ask for should not take many. --technique gptq rounds them all.
const GuardGPTQMaxDim = 2304

// gramBytes bounds the input Grams one calibration run collects.
const gramBytes = 128 << 20

// gramDim is the size of a layer's input vectors: its weight's input
// features (a conv's: channels times kernel positions).
func gramDim(n *graph.Node) int64 {
	d := n.Input(1).Const.Dims
	switch {
	case isOp(n, "Conv"):
		return d[1] * d[2] * d[3]
	case isOp(n, "Gemm") && n.AttrInt("transB", 0) != 0:
		return d[1]
	}
	return d[0]
}

// outputError is Σ_r Δ_r·H·Δ_rᵀ, Δ = b − a (n×k rows, H k×k): the mean
// squared change of the layer's outputs on the inputs H is the Gram of.
func outputError(a, b, h []float64, n, k int) float64 {
	var total float64
	d := make([]float64, k)
	for r := range n {
		for c := range k {
			d[c] = b[r*k+c] - a[r*k+c]
		}
		for i := range k {
			if d[i] == 0 {
				continue
			}
			var s float64
			for j := range k {
				s += h[i*k+j] * d[j]
			}
			total += d[i] * s
		}
	}
	return total
}

// gptqLayers are the quantized Conv (group 1), Gemm and MatMul layers of
// fm with a constant float weight GPTQ can round, in graph order; the
// others, and those whose Gram would pass maxDim (0: no limit), are
// counted in rep as skipped.
func gptqLayers(fm, q *graph.Model, maxDim int64, rep *schema.GPTQReport) []*graph.Node {
	quantized := map[string]bool{}
	for _, n := range q.Graph.Nodes {
		if w := n.Input(1); n.Name != "" && isOp(n, "Conv", "Gemm", "MatMul") && w != nil && isOp(w.Producer(), "DequantizeLinear") {
			quantized[n.Name] = true
		}
	}
	var nodes []*graph.Node
	for _, n := range fm.Graph.Nodes {
		if !quantized[n.Name] {
			continue
		}
		w := n.Input(1)
		ok := w != nil && w.Const != nil && w.Const.DType == graph.Float
		switch {
		case !ok:
		case isOp(n, "Conv"):
			ok = len(w.Const.Dims) == 4 && n.AttrInt("group", 1) == 1
		case isOp(n, "Gemm"):
			ok = len(w.Const.Dims) == 2 && n.AttrInt("transA", 0) == 0
		default:
			ok = len(w.Const.Dims) == 2
		}
		if !ok {
			rep.Skipped++
			continue
		}
		if maxDim > 0 && gramDim(n) > maxDim {
			rep.Skipped++
			rep.Large++
			continue
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// gptqLayer rounds layer n's weights by GPTQ on the per-channel (or
// per-tensor) scales quantize computes, from the Gram h of its input; it
// returns the rounded weights in the weight's layout, and the layer's
// output error on the calibration inputs with GPTQ and with nearest
// rounding.
func gptqLayer(n *graph.Node, h []float64, qmax float64, perChannel bool) ([]float32, float64, float64, error) {
	w := n.Input(1).Const
	vals, err := w.Float32s()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("gptq %s: %w", n.Name, err)
	}
	// rows: one per output, k input features each, in the Gram's order.
	rows, k := int(w.Dims[0]), len(vals)/int(w.Dims[0])
	transposed := isOp(n, "MatMul") || (isOp(n, "Gemm") && n.AttrInt("transB", 0) == 0)
	if transposed {
		k, rows = int(w.Dims[0]), int(w.Dims[1])
	}
	at := func(r, c int) int {
		if transposed {
			return c*rows + r
		}
		return r*k + c
	}
	wt := make([]float64, rows*k)
	for r := range rows {
		for c := range k {
			wt[r*k+c] = float64(vals[at(r, c)])
		}
	}
	scales := make([]float64, rows)
	for r := range rows {
		for c := range k {
			scales[r] = math.Max(scales[r], math.Abs(wt[r*k+c]))
		}
	}
	if !perChannel {
		all := slices.Max(scales)
		for r := range scales {
			scales[r] = all
		}
	}
	for r := range scales {
		// As quantize computes them, in float32.
		scales[r] = float64(float32(scales[r] / qmax))
		if scales[r] == 0 {
			scales[r] = 1
		}
	}
	round := func(r int, v float64) float64 {
		return math.Max(-qmax, math.Min(qmax, math.RoundToEven(v/scales[r]))) * scales[r]
	}
	orig := slices.Clone(wt)
	nearest := make([]float64, len(wt))
	for j := range wt {
		nearest[j] = round(j/k, wt[j])
	}
	if err := prune.GPTQ(wt, rows, k, slices.Clone(h), prune.DefaultDamp, func(r, col int, row []float64) float64 {
		return round(r, row[col])
	}); err != nil {
		return nil, 0, 0, fmt.Errorf("gptq %s: %w", n.Name, err)
	}
	out := make([]float32, len(vals))
	for r := range rows {
		for c := range k {
			out[at(r, c)] = float32(wt[r*k+c])
		}
	}
	return out, outputError(orig, wt, h, rows, k), outputError(orig, nearest, h, rows, k), nil
}
