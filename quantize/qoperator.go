package quantize

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
)

// Format is how Apply writes the quantized model.
type Format string

// The formats.
const (
	// FormatQDQ keeps QuantizeLinear/DequantizeLinear around float ops;
	// the runtime fuses them (the default).
	FormatQDQ Format = "qdq"
	// FormatQOperator rewrites the QDQ groups into ONNX's quantized
	// operators (ToQOperator), as ORT's QuantFormat.QOperator does.
	FormatQOperator Format = "qoperator"
)

// Formats are the formats Apply writes: the one list flags, the build
// config, completion and messages use.
var Formats = []Format{FormatQDQ, FormatQOperator}

// ReduceRangeModes are the values of the reduce-range setting: auto (7-bit
// weights on x86 CPUs without VNNI), on and off.
var ReduceRangeModes = []string{"auto", "on", "off"}

// ParseReduceRange turns a reduce-range setting into Options.ReduceRange:
// nil for auto (decided from the CPU), else on or off.
func ParseReduceRange(mode string) (*bool, error) {
	if !slices.Contains(ReduceRangeModes, mode) {
		return nil, fmt.Errorf("%q: want %s", mode, choice.Or(ReduceRangeModes))
	}
	if mode == "auto" {
		return nil, nil
	}
	on := mode == "on"
	return &on, nil
}

// QOperatorReport says what ToQOperator did: the quantized operators it
// made, and the QDQ groups it left alone and why.
type QOperatorReport struct {
	QLinearConv   int     `json:"qlinear_conv"`
	QLinearMatMul int     `json:"qlinear_matmul"`
	Rewritten     []Entry `json:"rewritten"`
	KeptQDQ       []Entry `json:"kept_qdq"`
}

// qdqGroup is one DQ inputs -> op [-> Relu/Clip] -> Q chain that a
// quantized operator computes.
type qdqGroup struct {
	op     *graph.Node
	act    *graph.Node // a Relu/Clip the output Q makes a no-op, or nil
	q      *graph.Node // the QuantizeLinear of the output
	inputs []*graph.Value
	detail string
}

// ToQOperator rewrites QDQ groups into ONNX's quantized operators:
// DQ(x), DQ(w)[, DQ(int32 bias)] -> Conv -> Q becomes QLinearConv, and
// DQ(a), DQ(b) -> MatMul -> Q becomes QLinearMatMul. A Relu or Clip between
// the op and the Q is absorbed only when quantizing makes it a no-op (its
// bounds lie at or beyond the ends of the Q's integer range, e.g. a Relu
// before a Q whose zero point is the type's minimum). Groups that cannot be
// rewritten exactly stay QDQ and are listed with the reason: an output kept
// float, a float bias, Gemm and ConvTranspose (ONNX has no quantized Gemm:
// QGemm is com.microsoft, and QLinearMatMul followed by a float bias add
// would round twice). Q/DQ nodes and constants left unused are removed.
func ToQOperator(m *graph.Model) (*QOperatorReport, error) {
	g := m.Graph
	rep := &QOperatorReport{}
	for _, n := range slices.Clone(g.Nodes) {
		if !isOp(n, "Conv", "MatMul", "Gemm", "ConvTranspose") || !readsDequantized(n) {
			continue
		}
		grp, why := matchQDQGroup(n)
		if why != "" {
			rep.KeptQDQ = append(rep.KeptQDQ, Entry{Node: n.String(), Op: n.OpType, Detail: why})
			continue
		}
		entry := Entry{Node: n.String(), Op: n.OpType, Detail: grp.detail}
		if err := rewriteQDQGroup(g, grp); err != nil {
			return rep, fmt.Errorf("qoperator %s: %w", n, err)
		}
		rep.Rewritten = append(rep.Rewritten, entry)
		if n.OpType == "Conv" {
			rep.QLinearConv++
		} else {
			rep.QLinearMatMul++
		}
	}
	return rep, nil
}

func readsDequantized(n *graph.Node) bool {
	return slices.ContainsFunc(n.Inputs(), func(v *graph.Value) bool {
		return v != nil && isOp(v.Producer(), "DequantizeLinear")
	})
}

// matchQDQGroup checks every condition under which the quantized operator
// computes what the QDQ group computes, and returns the group or why not.
func matchQDQGroup(n *graph.Node) (*qdqGroup, string) {
	switch n.OpType {
	case "Gemm":
		return nil, "Gemm: ONNX has no quantized Gemm (QGemm is com.microsoft) and QLinearMatMul plus a float bias would round twice"
	case "ConvTranspose":
		return nil, "ConvTranspose: ONNX has no quantized ConvTranspose"
	}
	x, why := dequantized(n.Input(0), "input 0")
	if why != "" {
		return nil, why
	}
	if why := x.perTensor("input 0"); why != "" {
		return nil, why
	}
	w, why := dequantized(n.Input(1), "input 1 (the weight)")
	if why != "" {
		return nil, why
	}
	channelAxis, rank := int64(0), int64(len(w.data.Dims))
	if n.OpType == "MatMul" {
		channelAxis = rank - 1
		if rank != 2 {
			return nil, fmt.Sprintf("MatMul weight has rank %d; QLinearMatMul's per-column b needs 2-D", rank)
		}
	}
	if why := w.symmetricWeight(channelAxis); why != "" {
		return nil, why
	}
	act, q, why := outputQuantize(n)
	if why != "" {
		return nil, why
	}
	if yType := q.Input(2).ConstantTensor().DType; yType != x.zpType {
		return nil, fmt.Sprintf("input quantized to %s, output to %s; ORT's quantized kernels want one type", x.zpType, yType)
	}
	grp := &qdqGroup{op: n, act: act, q: q,
		inputs: []*graph.Value{x.q, x.scale, x.zp, w.q, w.scale, w.zp, q.Input(1), q.Input(2)}}
	grp.detail = fmt.Sprintf("%s -> QLinear%s", n.OpType, n.OpType)
	if n.OpType == "Conv" && n.Input(2) != nil {
		b, why := dequantized(n.Input(2), "input 2 (the bias)")
		if why != "" {
			return nil, why
		}
		if why := b.int32Bias(x, w); why != "" {
			return nil, why
		}
		grp.inputs = append(grp.inputs, b.q)
		grp.detail += ", int32 bias"
	}
	if act != nil {
		grp.detail += fmt.Sprintf(", %s absorbed by the output range", act.OpType)
	}
	return grp, ""
}

// dqInput is what a DequantizeLinear reads: the quantized tensor, its
// constant scale and zero point, and the constant data where the quantized
// tensor is constant too (a weight or a bias).
type dqInput struct {
	q, scale, zp *graph.Value
	axis         int64
	scales       []float32
	zps          []int64
	zpType       graph.DataType
	data         *graph.Tensor
}

func dequantized(v *graph.Value, what string) (*dqInput, string) {
	dq := v.Producer()
	if !isOp(dq, "DequantizeLinear") {
		return nil, what + " is not dequantized (float)"
	}
	if dq.Input(2) == nil {
		return nil, fmt.Sprintf("%s: %s has no zero point", what, dq)
	}
	st, sv := floatConst(dq.Input(1))
	zt := dq.Input(2).ConstantTensor()
	if st == nil || zt == nil {
		return nil, fmt.Sprintf("%s: %s has a scale or zero point that is not constant", what, dq)
	}
	zps, ok := integers(zt)
	if !ok || (zt.DType != graph.Uint8 && zt.DType != graph.Int8 && zt.DType != graph.Int32) {
		return nil, fmt.Sprintf("%s: %s has a %s zero point; only int8, uint8 and int32 have quantized operators", what, dq, zt.DType)
	}
	if len(zps) != len(sv) {
		return nil, fmt.Sprintf("%s: %s has %d scales and %d zero points", what, dq, len(sv), len(zps))
	}
	return &dqInput{q: dq.Input(0), scale: dq.Input(1), zp: dq.Input(2), axis: dq.AttrInt("axis", 1),
		scales: sv, zps: zps, zpType: zt.DType, data: dq.Input(0).ConstantTensor()}, ""
}

// integers decodes an int8, uint8 or int32 tensor.
func integers(t *graph.Tensor) ([]int64, bool) {
	b, err := t.Bytes()
	if err != nil {
		return nil, false
	}
	var out []int64
	switch t.DType {
	case graph.Int8:
		for _, x := range b {
			out = append(out, int64(int8(x)))
		}
	case graph.Uint8:
		for _, x := range b {
			out = append(out, int64(x))
		}
	case graph.Int32:
		if len(b)%4 != 0 {
			return nil, false
		}
		for i := 0; i < len(b); i += 4 {
			out = append(out, int64(int32(binary.LittleEndian.Uint32(b[i:]))))
		}
	default:
		return nil, false
	}
	return out, true
}

// perTensor: the quantized operators take one scale and zero point for an
// activation, of type int8 or uint8.
func (d *dqInput) perTensor(what string) string {
	if len(d.scales) != 1 {
		return fmt.Sprintf("%s is quantized per channel (%d scales); quantized operators take one activation scale", what, len(d.scales))
	}
	if d.zpType != graph.Uint8 && d.zpType != graph.Int8 {
		return fmt.Sprintf("%s is quantized to %s, not int8 or uint8", what, d.zpType)
	}
	return ""
}

// symmetricWeight: a constant int8 weight with zero points 0, one scale or
// one per output channel on channelAxis.
func (d *dqInput) symmetricWeight(channelAxis int64) string {
	if d.data == nil || d.data.DType != graph.Int8 {
		return "the weight is not a constant int8 tensor"
	}
	if slices.ContainsFunc(d.zps, func(z int64) bool { return z != 0 }) {
		return "the weight's zero points are not all 0"
	}
	if len(d.scales) == 1 {
		return ""
	}
	rank := int64(len(d.data.Dims))
	axis := d.axis
	if axis < 0 {
		axis += rank
	}
	if axis != channelAxis || d.data.Dims[axis] != int64(len(d.scales)) {
		return fmt.Sprintf("the weight is quantized per channel on axis %d; the quantized operator wants axis %d", d.axis, channelAxis)
	}
	return ""
}

// int32Bias: the quantized bias QLinearConv adds to its accumulator, with
// scale x_scale*w_scale[c] and zero point 0 (as Apply stores it).
func (d *dqInput) int32Bias(x, w *dqInput) string {
	if d.data == nil || d.data.DType != graph.Int32 || len(d.data.Dims) != 1 {
		return "the bias is not a constant 1-D int32 tensor (float bias: QLinearConv would round it)"
	}
	if slices.ContainsFunc(d.zps, func(z int64) bool { return z != 0 }) {
		return "the bias zero points are not all 0"
	}
	channels := int(d.data.Dims[0])
	if len(d.scales) != 1 && len(d.scales) != channels {
		return fmt.Sprintf("the bias has %d scales for %d channels", len(d.scales), channels)
	}
	for c := range channels {
		bs := d.scales[min(c, len(d.scales)-1)]
		want := float64(x.scales[0]) * float64(w.scales[min(c, len(w.scales)-1)])
		if math.Abs(float64(bs)-want) > 1e-6*want {
			return fmt.Sprintf("bias channel %d has scale %g, not input scale x weight scale %g", c, bs, want)
		}
	}
	return ""
}

// outputQuantize follows n's output to the QuantizeLinear that quantizes
// it: directly, or through a Relu/Clip that the Q's range makes a no-op.
func outputQuantize(n *graph.Node) (act, q *graph.Node, why string) {
	next, why := soleReader(n)
	if why != "" {
		return nil, nil, why
	}
	if isOp(next, "Relu", "Clip") {
		act = next
		if next, why = soleReader(act); why != "" {
			return nil, nil, fmt.Sprintf("after %s: %s", act, why)
		}
	}
	if !isOp(next, "QuantizeLinear") {
		return nil, nil, fmt.Sprintf("output read in float by %s", next)
	}
	q = next
	if q.Input(2) == nil {
		return nil, nil, fmt.Sprintf("%s has no zero point", q)
	}
	st, sv := floatConst(q.Input(1))
	zt := q.Input(2).ConstantTensor()
	if st == nil || zt == nil || len(sv) != 1 {
		return nil, nil, fmt.Sprintf("%s: scale or zero point not a constant scalar", q)
	}
	zps, ok := integers(zt)
	if !ok || len(zps) != 1 || (zt.DType != graph.Uint8 && zt.DType != graph.Int8) {
		return nil, nil, fmt.Sprintf("%s quantizes to %s, not int8 or uint8", q, zt.DType)
	}
	if act != nil {
		if why := absorbable(act, sv[0], zps[0], zt.DType); why != "" {
			return nil, nil, why
		}
	}
	return act, q, ""
}

// soleReader returns the one node that reads n's single output, or why
// the output is read elsewhere too.
func soleReader(n *graph.Node) (*graph.Node, string) {
	out := n.Output(0)
	if len(n.Outputs()) != 1 || out == nil {
		return nil, fmt.Sprintf("%s has more than one output", n)
	}
	if out.IsReturned() {
		return nil, fmt.Sprintf("output %q is a graph output, kept float", out.Name)
	}
	uses := out.Uses()
	if len(uses) != 1 {
		return nil, fmt.Sprintf("output %q has %d readers", out.Name, len(uses))
	}
	if uses[0].Index != 0 || uses[0].Node.Graph() != n.Graph() {
		return nil, fmt.Sprintf("output %q is read by %s as input %d", out.Name, uses[0].Node, uses[0].Index)
	}
	return uses[0].Node, ""
}

// absorbable says why act (Relu or Clip) between the op and its output Q
// is not a no-op after quantization: Q(clip(y, lo, hi)) == Q(y) for every y
// exactly when q(lo) <= qmin and q(hi) >= qmax, with q computed as ORT's
// QuantizeLinear does (float32 division, round half to even).
func absorbable(act *graph.Node, scale float32, zp int64, dt graph.DataType) string {
	lo, hi := float32(0), float32(math.Inf(1))
	if act.OpType == "Clip" {
		lo, hi = float32(math.Inf(-1)), float32(math.Inf(1))
		for i, bound := range []*float32{&lo, &hi} {
			v := act.Input(i + 1)
			if v == nil {
				continue
			}
			_, f := floatConst(v)
			if len(f) != 1 {
				return fmt.Sprintf("%s: bound %q is not a constant float scalar", act, v.Name)
			}
			*bound = f[0]
		}
		if a := act.Attr("min"); a != nil {
			lo = a.Float
		}
		if a := act.Attr("max"); a != nil {
			hi = a.Float
		}
	}
	qmin, qmax := 0.0, 255.0
	if dt == graph.Int8 {
		qmin, qmax = -128, 127
	}
	q := func(x float32) float64 { return math.RoundToEven(float64(x/scale)) + float64(zp) }
	if !math.IsInf(float64(lo), -1) && q(lo) > qmin {
		return fmt.Sprintf("%s clips at %g, above the output range's low end (zero point %d): not a no-op after quantization", act, lo, zp)
	}
	if !math.IsInf(float64(hi), 1) && q(hi) < qmax {
		return fmt.Sprintf("%s clips at %g, inside the output range: not a no-op after quantization", act, hi)
	}
	return ""
}

// rewriteQDQGroup replaces the group by its quantized operator, which
// takes over the Q's output, and removes what became unused.
func rewriteQDQGroup(g *graph.Graph, grp *qdqGroup) error {
	n, q := grp.op, grp.q
	out := q.Output(0)
	if err := q.SetOutput(0, nil); err != nil {
		return err
	}
	qn, err := g.InsertNodeBefore(q, "QLinear"+n.OpType, grp.inputs, []*graph.Value{out})
	if err != nil {
		return err
	}
	qn.Name, qn.DocString, qn.Attrs = n.Name, n.DocString, n.Attrs
	var freed []*graph.Value
	doomed := []*graph.Node{q, n}
	if grp.act != nil {
		doomed = append(doomed, grp.act)
	}
	for _, d := range doomed {
		freed = append(freed, d.Inputs()...)
	}
	if err := g.RemoveNodes(doomed); err != nil {
		return err
	}
	return dropDead(g, freed)
}

// dropDead removes the values of vs nothing reads any more, when they are
// initializers or computed by a DequantizeLinear or Constant node, and
// then whatever those nodes read that became unused in turn.
func dropDead(g *graph.Graph, vs []*graph.Value) error {
	seen := map[*graph.Value]bool{}
	var inits []*graph.Value
	for len(vs) > 0 {
		v := vs[0]
		vs = vs[1:]
		if v == nil || seen[v] || v.Graph() != g || len(v.Uses()) > 0 || v.IsReturned() {
			continue
		}
		seen[v] = true
		if pr := v.Producer(); pr != nil {
			if !isOp(pr, "DequantizeLinear", "Constant") || len(pr.Outputs()) != 1 {
				continue
			}
			ins := slices.Clone(pr.Inputs())
			if err := g.RemoveNode(pr); err != nil {
				return err
			}
			vs = append(vs, ins...)
		} else if v.Const != nil && slices.Contains(g.Initializers, v) && !slices.Contains(g.Inputs, v) {
			inits = append(inits, v)
		}
	}
	return g.RemoveInitializers(inits)
}
