package quantize

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/optc-dev/optc/graph"
)

// Dynamic INT8 (ApplyDynamic) needs no calibration: each MatMul (and Gemm
// with a constant B) whose weight is a constant keeps that weight as int8
// (symmetric, per output column by default, 7 bits where reduce-range
// applies: the same U8S8 kernels saturate), and its activation input is
// quantized at run time, per tensor and per run, by DynamicQuantizeLinear
// (uint8, asymmetric, the range of that run). In standard ONNX:
//
//	X ─> DynamicQuantizeLinear ─> (Xq, Xs, Xzp)
//	MatMulInteger(Xq, Wq, Xzp) ─> Cast(float) ─> Mul(·, Mul(Xs, Ws)) [─> Add(bias)]
//
// which is the shape ORT 1.24.1's own fusions look for at level extended
// and above (MatMulIntegerToFloat, then DynamicQuantizeMatMul when the
// DynamicQuantizeLinear feeds that one MatMulInteger alone; ORT's
// onnxruntime/core/optimizer/matmul_integer_to_float.cc and
// dynamic_quantize_matmul_fusion.cc): the scale product is Mul(Xs, Ws) in
// that order and feeds the one Mul, and each MatMul gets its own
// DynamicQuantizeLinear, so every group fuses into one kernel. With
// Options.ORTContrib the fused com.microsoft DynamicQuantizeMatMul is
// written directly (a model for ONNX Runtime alone).

// DynamicMinOpset is the default-domain opset DynamicQuantizeLinear needs.
const DynamicMinOpset = 11

// ApplyDynamic rewrites m's eligible MatMul and Gemm nodes (main graph) to
// dynamic INT8 for ORT's CPU provider. It uses opts.Exclude, KeepFloat,
// PerChannel, ReduceRange and ORTContrib; the target is ort.
func ApplyDynamic(m *graph.Model, opts Options) (*Report, error) {
	sc, err := SchemeFor(TargetORT)
	if err != nil {
		return nil, err
	}
	if opts.Target != "" && opts.Target != TargetORT {
		return nil, fmt.Errorf("quantize: dynamic INT8 is for target %s (ONNX Runtime's CPU kernels), not %s", TargetORT, opts.Target)
	}
	if v := m.OpsetVersion(""); v < DynamicMinOpset {
		return nil, fmt.Errorf("quantize: the model imports default-domain opset %d; DynamicQuantizeLinear needs opset >= %d", v, DynamicMinOpset)
	}
	g := m.Graph
	for _, n := range g.Nodes {
		if isOp(n, "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear") {
			return nil, fmt.Errorf("quantize: the model is already quantized (node %s)", n)
		}
	}
	excl := make([]*regexp.Regexp, len(opts.Exclude))
	for i, s := range opts.Exclude {
		if excl[i], err = regexp.Compile(s); err != nil {
			return nil, fmt.Errorf("quantize: exclude pattern %q: %w", s, err)
		}
	}
	keep := map[*graph.Node]bool{}
	for _, i := range opts.KeepFloat {
		if i < 0 || i >= len(g.Nodes) {
			return nil, fmt.Errorf("quantize: KeepFloat index %d is outside the graph's %d nodes", i, len(g.Nodes))
		}
		keep[g.Nodes[i]] = true
	}
	rep := &Report{Target: TargetORT, PerChannel: opts.PerChannel == nil || *opts.PerChannel, Dynamic: true}
	rep.ReduceRange, rep.ReduceRangeReason = reduceRange(sc, opts)
	d := &dynamic{g: g, rep: rep, qmax: 127, contrib: opts.ORTContrib, weights: map[dynKey]dynWeight{}}
	if rep.ReduceRange {
		d.qmax = 63
	}
	for _, n := range append([]*graph.Node(nil), g.Nodes...) {
		if n.Domain != "" || (n.OpType != "MatMul" && n.OpType != "Gemm") {
			continue
		}
		why := ""
		if keep[n] {
			why = "kept float by the placement"
		}
		for i, re := range excl {
			if why == "" && ((n.Name != "" && re.MatchString(n.Name)) || re.MatchString(n.OpType)) {
				why = "excluded by pattern " + strconv.Quote(opts.Exclude[i])
			}
		}
		if why == "" {
			why = dynamicSkip(n)
		}
		if why != "" {
			if why != "not a weight layer" {
				rep.Skipped = append(rep.Skipped, Entry{Node: n.String(), Op: n.OpType, Detail: why})
			}
			continue
		}
		detail, err := d.rewrite(n)
		if err != nil {
			return nil, fmt.Errorf("quantize: %s: %w", n, err)
		}
		rep.Quantized = append(rep.Quantized, Entry{Node: n.String(), Op: n.OpType, Detail: detail})
	}
	// Float weights nothing reads any more go.
	for _, w := range d.old {
		if len(w.Uses()) == 0 && !w.IsReturned() && w.Const != nil {
			if err := g.RemoveInitializer(w); err != nil {
				return nil, err
			}
		}
	}
	if d.contrib && len(rep.Quantized) > 0 && m.OpsetVersion(msDomain) == 0 {
		m.Opsets = append(m.Opsets, graph.OpsetImport{Domain: msDomain, Version: 1})
	}
	return rep, nil
}

// msDomain is ONNX Runtime's contrib operator domain.
const msDomain = "com.microsoft"

// dynamicSkip says why n is not rewritten, or "". A MatMul or Gemm whose
// B is not a constant float matrix is "not a weight layer" (attention's
// activation products): it is not listed.
func dynamicSkip(n *graph.Node) string {
	if len(n.Inputs()) < 2 || n.Input(0) == nil || len(n.Outputs()) != 1 {
		return "not a weight layer"
	}
	w := n.Input(1)
	if w.Const == nil || w.Const.DType != graph.Float || len(w.Const.Dims) != 2 {
		return "not a weight layer"
	}
	if n.OpType == "MatMul" {
		return ""
	}
	if n.AttrInt("transA", 0) != 0 {
		return "Gemm with transA"
	}
	if c := n.Input(2); c != nil {
		if c.Const == nil || c.Const.DType != graph.Float {
			return "Gemm's C is not a constant"
		}
	}
	return ""
}

type dynKey struct {
	w      *graph.Value
	transB bool
	alpha  float32
}

// dynWeight is a weight stored as int8 [K, N] with its scales (alpha
// folded in).
type dynWeight struct {
	q, scale *graph.Value
}

type dynamic struct {
	g       *graph.Graph
	rep     *Report
	qmax    float64
	contrib bool
	weights map[dynKey]dynWeight
	old     []*graph.Value
	names   map[string]bool // node names taken (ORT refuses duplicates)
}

// nodeName returns prefix, or prefix_2, _3, ..., not yet a node's name.
func (d *dynamic) nodeName(prefix string) string {
	if d.names == nil {
		d.names = map[string]bool{}
		for _, n := range d.g.Nodes {
			d.names[n.Name] = true
		}
	}
	name := prefix
	for i := 2; d.names[name]; i++ {
		name = prefix + "_" + strconv.Itoa(i)
	}
	d.names[name] = true
	return name
}

// weight quantizes w (W[K, N], or Wᵀ with transB) once per reading, per
// column or per tensor.
func (d *dynamic) weight(w *graph.Value, transB bool, alpha float32) (dynWeight, error) {
	key := dynKey{w, transB, alpha}
	if dw, ok := d.weights[key]; ok {
		return dw, nil
	}
	raw, err := w.Const.Bytes()
	if err != nil {
		return dynWeight{}, fmt.Errorf("weight %q: %w", w.Name, err)
	}
	k, n := w.Const.Dims[0], w.Const.Dims[1]
	if transB {
		// MatMulInteger has no transB: store W[K, N].
		t := make([]byte, len(raw))
		for r := range k {
			for c := range n {
				copy(t[4*(c*k+r):4*(c*k+r)+4], raw[4*(r*n+c):4*(r*n+c)+4])
			}
		}
		raw, k, n = t, n, k
	}
	axis := -1
	if d.rep.PerChannel {
		axis = 1
	}
	scales, data := quantizeWeights(raw, []int64{k, n}, axis, d.qmax, nil)
	for i := range scales {
		scales[i] *= alpha
	}
	q, err := d.init(w.Name+"_int8", graph.Int8, []int64{k, n}, data)
	if err != nil {
		return dynWeight{}, err
	}
	var dims []int64
	if axis >= 0 {
		dims = []int64{n}
	}
	s, err := d.init(w.Name+"_scale", graph.Float, dims, f32bytes(scales))
	if err != nil {
		return dynWeight{}, err
	}
	dw := dynWeight{q: q, scale: s}
	d.weights[key] = dw
	d.old = append(d.old, w)
	d.rep.Weights++
	return dw, nil
}

func (d *dynamic) init(prefix string, dt graph.DataType, dims []int64, data []byte) (*graph.Value, error) {
	return addInitializer(d.g, prefix, dt, dims, data)
}

// bias returns Gemm n's beta·C as a constant, or nil without C.
func (d *dynamic) bias(n *graph.Node) (*graph.Value, error) {
	c := n.Input(2)
	if c == nil {
		return nil, nil
	}
	beta := n.AttrFloat("beta", 1)
	if beta == 1 {
		return c, nil
	}
	vals, err := c.Const.Float32s()
	if err != nil {
		return nil, err
	}
	scaled := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(scaled[4*i:], math.Float32bits(beta*v))
	}
	return d.init(c.Name+"_beta", graph.Float, c.Const.Dims, scaled)
}

// rewrite replaces n by its dynamic INT8 form, writing n's output.
func (d *dynamic) rewrite(n *graph.Node) (string, error) {
	transB := n.OpType == "Gemm" && n.AttrInt("transB", 0) != 0
	alpha := float32(1)
	if n.OpType == "Gemm" {
		alpha = n.AttrFloat("alpha", 1)
	}
	dw, err := d.weight(n.Input(1), transB, alpha)
	if err != nil {
		return "", err
	}
	var bias *graph.Value
	if n.OpType == "Gemm" {
		if bias, err = d.bias(n); err != nil {
			return "", err
		}
	}
	x, out := n.Input(0), n.Output(0)
	if err := n.SetOutput(0, nil); err != nil {
		return "", err
	}
	base := n.Name
	if base == "" {
		base = out.Name
	}
	val := func(suffix string) (*graph.Value, error) { return d.g.NewValue(d.g.UniqueName(base + suffix)) }
	node := func(op string, ins []*graph.Value, outs ...*graph.Value) (*graph.Node, error) {
		nn, err := d.g.InsertNodeBefore(n, op, ins, outs)
		if err != nil {
			return nil, err
		}
		nn.Name = d.nodeName(base + "_" + op)
		return nn, nil
	}
	scale := "per column"
	if !d.rep.PerChannel {
		scale = "per tensor"
	}
	detail := fmt.Sprintf("dynamic: int8 weight %s, uint8 activation quantized at run time", scale)
	if d.contrib {
		ins := []*graph.Value{x, dw.q, dw.scale}
		if bias != nil && len(bias.Const.Dims) == 1 && bias.Const.Dims[0] == dw.q.Const.Dims[1] {
			ins = append(ins, nil, bias)
			bias = nil
		}
		y := out
		if bias != nil {
			if y, err = val("_nobias"); err != nil {
				return "", err
			}
		}
		f, err := node("DynamicQuantizeMatMul", ins, y)
		if err != nil {
			return "", err
		}
		f.Domain = msDomain
		if bias != nil {
			if _, err := node("Add", []*graph.Value{y, bias}, out); err != nil {
				return "", err
			}
		}
		return detail + " (com.microsoft DynamicQuantizeMatMul)", d.g.RemoveNode(n)
	}
	xq, err := val("_x_quantized")
	if err != nil {
		return "", err
	}
	xs, err := val("_x_scale")
	if err != nil {
		return "", err
	}
	xz, err := val("_x_zero_point")
	if err != nil {
		return "", err
	}
	if _, err := node("DynamicQuantizeLinear", []*graph.Value{x}, xq, xs, xz); err != nil {
		return "", err
	}
	acc, err := val("_int32")
	if err != nil {
		return "", err
	}
	if _, err := node("MatMulInteger", []*graph.Value{xq, dw.q, xz}, acc); err != nil {
		return "", err
	}
	accf, err := val("_int32_float")
	if err != nil {
		return "", err
	}
	c, err := node("Cast", []*graph.Value{acc}, accf)
	if err != nil {
		return "", err
	}
	c.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(graph.Float)})
	s, err := val("_scale")
	if err != nil {
		return "", err
	}
	// Xs first, then Ws: the order ORT's MatMulIntegerToFloat fusion reads.
	if _, err := node("Mul", []*graph.Value{xs, dw.scale}, s); err != nil {
		return "", err
	}
	y := out
	if bias != nil {
		if y, err = val("_nobias"); err != nil {
			return "", err
		}
	}
	if _, err := node("Mul", []*graph.Value{accf, s}, y); err != nil {
		return "", err
	}
	if bias != nil {
		if _, err := node("Add", []*graph.Value{y, bias}, out); err != nil {
			return "", err
		}
	}
	return detail, d.g.RemoveNode(n)
}
