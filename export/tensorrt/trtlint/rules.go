// Package trtlint holds TensorRT's explicit-quantization rules over a Q/DQ
// model (symmetric INT8, zero points 0, per-channel scales only on weights
// along the output-channel axis, Q/DQ placements its fusions recognise)
// and the operators and types its ONNX parser cannot take. The TensorRT
// target runs it on the Q/DQ model it builds; optc lint --target tensorrt
// runs it on any model.
package trtlint

// TensorRT's rules, and where they come from:
//   - explicit quantization (TensorRT developer guide, "Explicit
//     Quantization" and "Q/DQ Layer-Placement Recommendations"): INT8 (or
//     FP8) Q/DQ only, symmetric (zero point 0), constant positive scales,
//     per-channel scales only for weights along the output-channel axis;
//     quantize the inputs of weighted layers, not their outputs, and put
//     Q/DQ on the residual input of an elementwise Add so it fuses into
//     the convolution;
//   - ONNX: QuantizeLinear/DequantizeLinear take an axis (per-channel)
//     from opset 13 on;
//   - operators TensorRT's ONNX parser rejects (onnx-tensorrt
//     docs/operators.md: the integer-quantized ops, sequences, strings),
//     other domains (only plugins), and non-tensor values.

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/lint"
)

// The rules TensorRT checks.
const (
	RuleUnsupportedOp       = "unsupported-op"
	RuleUnsupportedType     = "unsupported-type"
	RuleQDQType             = "qdq-type"
	RuleQDQZeroPoint        = "qdq-zero-point"
	RuleQDQScale            = "qdq-scale"
	RuleQDQPerChannelAct    = "qdq-per-channel-activation"
	RuleQDQAxis             = "qdq-axis"
	RuleQDQOpset            = "qdq-opset"
	RuleQDQPairMismatch     = "qdq-pair-mismatch"
	RuleWeightedFloatInput  = "weighted-op-float-input"
	RuleQBeforeActivation   = "q-before-activation"
	RuleResidualUnquantized = "residual-add-unquantized"
)

var (
	weightedOps = []string{"Conv", "ConvTranspose", "Gemm", "MatMul"}
	// unsupportedOps are default-domain operators TensorRT's ONNX parser
	// does not import: integer-arithmetic quantization (TensorRT quantizes
	// through Q/DQ only), sequences and strings.
	unsupportedOps = []string{
		"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
		"ConcatFromSequence", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
		"SequenceInsert", "SequenceLength", "SplitToSequence",
		"StringNormalizer", "TfIdfVectorizer",
	}
	// pluginDomains hold custom layers TensorRT resolves from its plugin
	// registry by op name.
	pluginDomains = []string{"trt.plugins"}
	// fusedActivations are ops TensorRT fuses into the conv or GEMM before
	// them (as it does a residual Add), so a Q between them breaks the
	// fusion.
	fusedActivations = []string{"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
		"Elu", "Selu", "Softplus", "PRelu", "BatchNormalization"}
)

// TensorRT returns what stands between m and a TensorRT engine that runs
// it as quantized, sorted (errors first, then by rule, node, message).
// The placement rules for weighted ops apply only to models that hold
// Q/DQ nodes: a float model is not expected to have them.
func Check(m *graph.Model) []lint.Finding {
	l := &trtLinter{opset: m.OpsetVersion("")}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if isOp(n, "QuantizeLinear", "DequantizeLinear") {
				l.quantized = true
			}
		}
	})
	m.Graph.Walk(l.graph)
	lint.Sort(l.fs)
	return l.fs
}

type trtLinter struct {
	opset     int64
	quantized bool
	fs        []lint.Finding
}

func (l *trtLinter) add(rule, severity string, n *graph.Node, format string, args ...any) {
	id := ""
	if n != nil {
		id = nodeID(n)
	}
	l.fs = append(l.fs, lint.Finding{Rule: rule, Severity: severity, Node: id, Message: fmt.Sprintf(format, args...)})
}

func (l *trtLinter) graph(g *graph.Graph) {
	for _, v := range g.Values() {
		l.valueType(v)
	}
	for _, n := range g.Nodes {
		switch {
		case n.Domain != "" && n.Domain != "ai.onnx":
			if !slices.Contains(pluginDomains, n.Domain) {
				l.add(RuleUnsupportedOp, lint.Error, n, "%s.%s is not an ONNX operator TensorRT imports; rewrite it with standard ONNX ops (run the model's exporter without runtime-specific fusions) or provide a TensorRT plugin named %q", n.Domain, n.OpType, n.OpType)
			}
		case isOp(n, unsupportedOps...):
			l.add(RuleUnsupportedOp, lint.Error, n, "TensorRT's ONNX parser does not import %s; export the model without it (quantize with QuantizeLinear/DequantizeLinear, keep sequences and strings outside the engine)", n.OpType)
		case isOp(n, "QuantizeLinear", "DequantizeLinear"):
			l.qdq(n)
		}
		if !l.quantized {
			continue
		}
		switch {
		case isOp(n, weightedOps...):
			l.weighted(n)
		case isOp(n, "Add"):
			l.residual(n)
		}
	}
}

// valueType: TensorRT binds and computes tensors only.
func (l *trtLinter) valueType(v *graph.Value) {
	t := v.Type
	if t == nil {
		return
	}
	what := ""
	switch {
	case t.Kind == graph.KindSequence, t.Kind == graph.KindMap, t.Kind == graph.KindOptional:
		what = t.String()
	case t.Kind == graph.KindTensor && t.Elem == graph.String:
		what = "string tensor"
	default:
		return
	}
	var n *graph.Node
	if p := v.Producer(); p != nil {
		n = p
	}
	l.add(RuleUnsupportedType, lint.Error, n, "value %q is a %s; TensorRT computes numeric tensors only, so keep it outside the engine (pre- or post-processing)", v.Name, what)
}

// qdqType returns the integer or float8 type n quantizes to, false when
// the model does not say.
func qdqType(n *graph.Node) (graph.DataType, bool) {
	if zp := n.Input(2); zp != nil {
		if t := zp.ConstantTensor(); t != nil {
			return t.DType, true
		}
		if zp.Type != nil && zp.Type.Kind == graph.KindTensor && zp.Type.Elem != graph.Undefined {
			return zp.Type.Elem, true
		}
		return 0, false
	}
	if n.OpType == "QuantizeLinear" {
		if dt := n.AttrInt("output_dtype", 0); dt != 0 {
			return graph.DataType(dt), true
		}
		return graph.Uint8, true // ONNX's default without a zero point
	}
	x := n.Input(0)
	if x == nil {
		return 0, false
	}
	if t := x.ConstantTensor(); t != nil {
		return t.DType, true
	}
	if p := x.Producer(); isOp(p, "QuantizeLinear") {
		return qdqType(p)
	}
	if x.Type != nil && x.Type.Kind == graph.KindTensor && x.Type.Elem != graph.Undefined {
		return x.Type.Elem, true
	}
	return 0, false
}

// weightData returns the constant a weight Q/DQ chain starts from: v
// itself, or the input of the QuantizeLinear computing v (QAT exports
// quantize float weights in the graph).
func weightData(v *graph.Value) *graph.Tensor {
	if v == nil {
		return nil
	}
	if t := v.ConstantTensor(); t != nil {
		return t
	}
	if p := v.Producer(); isOp(p, "QuantizeLinear") && p.Input(0) != nil {
		return p.Input(0).ConstantTensor()
	}
	return nil
}

// scaleCount returns how many scales n has (more than one: per-channel).
func scaleCount(n *graph.Node) int64 {
	s := n.Input(1)
	if s == nil || s.ConstantTensor() == nil {
		return 1
	}
	c, err := s.ConstantTensor().NumElements()
	if err != nil {
		return 1
	}
	return c
}

func (l *trtLinter) qdq(n *graph.Node) {
	data := n.Input(0)
	if data == nil {
		return // a malformed node: the ONNX checker's business, not TensorRT's
	}
	isWeight := weightData(data) != nil
	if n.OpType == "QuantizeLinear" {
		isWeight = data != nil && data.ConstantTensor() != nil
	}
	if dt, ok := qdqType(n); ok && dt != graph.Int8 && dt != graph.Float8E4M3FN && !(dt == graph.Int4 && isWeight && n.OpType == "DequantizeLinear") {
		l.add(RuleQDQType, lint.Error, n, "%s to %s: TensorRT takes int8 (or float8e4m3fn; int4 for weight-only DequantizeLinear) Q/DQ only; quantize for TensorRT (optc quantize --target tensorrt: int8, zero point 0, float bias)", n.OpType, dt)
	}
	if zp := n.Input(2); zp != nil {
		if t := zp.ConstantTensor(); t == nil {
			l.add(RuleQDQZeroPoint, lint.Error, n, "zero point %q is not a constant; TensorRT needs a constant zero point of 0, so store it as an initializer", zp.Name)
		} else if zero, err := allZero(t); err != nil {
			l.add(RuleQDQZeroPoint, lint.Error, n, "zero point %q cannot be read: %v", zp.Name, err)
		} else if !zero {
			l.add(RuleQDQZeroPoint, lint.Error, n, "zero point %q is not 0; TensorRT quantizes symmetrically, so recompute the scale from max(|min|, |max|)/127 with zero point 0", zp.Name)
		}
	}
	l.scale(n)
	if n.OpType == "DequantizeLinear" {
		l.pair(n)
	} else if len(n.Outputs()) > 0 && n.Output(0) != nil {
		l.activationAfterQ(n)
	}
	if scaleCount(n) <= 1 {
		return
	}
	if l.opset < 13 {
		l.add(RuleQDQOpset, lint.Error, n, "per-channel %s (%d scales) needs the axis attribute of opset 13, but the model imports opset %d; upgrade the model to opset 13 or use one scale", n.OpType, scaleCount(n), l.opset)
	}
	if !isWeight {
		l.add(RuleQDQPerChannelAct, lint.Error, n, "per-channel scales (%d) on %q, which is not a constant weight; TensorRT takes per-channel scales on weights only, so use one scale for this activation", scaleCount(n), data.Name)
	}
}

func (l *trtLinter) scale(n *graph.Node) {
	s := n.Input(1)
	if s == nil || s.ConstantTensor() == nil {
		name := ""
		if s != nil {
			name = s.Name
		}
		l.add(RuleQDQScale, lint.Error, n, "scale %q is not a constant; TensorRT needs constant scales, so fold it into an initializer", name)
		return
	}
	vals, ok := constFloats(s)
	if !ok {
		return // float16/bfloat16 scales: their values are not checked here
	}
	bad := 0
	first := float32(0)
	for _, v := range vals {
		if !finiteScale(v) {
			if bad == 0 {
				first = v
			}
			bad++
		}
	}
	if bad > 0 {
		l.add(RuleQDQScale, lint.Error, n, "scale %q has %s not finite and > 0 (first %v); a scale must be positive, so give zero-range channels a scale like 1 instead of 0", s.Name, plural(bad, "value"), first)
	}
}

// pair: a DequantizeLinear must undo its QuantizeLinear with the same
// parameters.
func (l *trtLinter) pair(dq *graph.Node) {
	q := dq.Input(0).Producer()
	if !isOp(q, "QuantizeLinear") {
		return
	}
	if !sameConstant(q.Input(1), dq.Input(1)) || !sameConstant(q.Input(2), dq.Input(2)) {
		l.add(RuleQDQPairMismatch, lint.Error, dq, "dequantizes the output of %q with another scale or zero point than it was quantized with; TensorRT treats the pair as one quantization step, so give both the same scale and zero point", nodeID(q))
	}
}

// activationAfterQ: a QuantizeLinear reading a conv's (or GEMM's) output
// that goes on, raw or dequantized, to the activation or
// BatchNormalization TensorRT would fuse into the conv; or whose
// dequantized copy is the input of an Add that the conv should absorb
// (the Add's other input is not a conv output it could fuse into
// instead, which would make this one the residual, quantized as it
// should be).
func (l *trtLinter) activationAfterQ(q *graph.Node) {
	out := q.Input(0)
	w := out.Producer()
	if !isOp(w, weightedOps...) {
		return
	}
	// Of several such readers, the one named first (uses are unordered).
	var next *graph.Node
	consider := func(r *graph.Node, fromDQ *graph.Value) {
		switch {
		case isOp(r, "Add"):
			if fromDQ == nil || fusibleOther(r, fromDQ) {
				return
			}
		case !isOp(r, fusedActivations...):
			return
		}
		if next == nil || nodeID(r) < nodeID(next) {
			next = r
		}
	}
	for _, u := range out.Uses() {
		if u.Node != q {
			consider(u.Node, nil)
		}
	}
	for _, u := range q.Output(0).Uses() {
		if isOp(u.Node, "DequantizeLinear") && u.Node.Output(0) != nil {
			for _, v := range u.Node.Output(0).Uses() {
				consider(v.Node, u.Node.Output(0))
			}
		}
	}
	if next == nil {
		return
	}
	fix := fmt.Sprintf("quantize after the %s instead (at the next weighted op's input)", next.OpType)
	if next.OpType == "Add" {
		fix = "put the Q/DQ on the Add's other (residual) input instead"
	}
	l.add(RuleQBeforeActivation, lint.Warning, q, "quantizes the output of %s %q before its %s %q, which blocks TensorRT's fusion of the two; %s", w.OpType, nodeID(w), next.OpType, nodeID(next), fix)
}

// fusibleOther reports whether the Add's input other than v is a conv (or
// GEMM) output read by the Add alone: the conv TensorRT fuses the Add into.
func fusibleOther(add *graph.Node, v *graph.Value) bool {
	for _, in := range add.Inputs() {
		if in == nil || in == v {
			continue
		}
		return isOp(in.Producer(), weightedOps...) && len(in.Uses()) == 1 && !in.IsReturned()
	}
	return false
}

// sameConstant reports whether a and b hold the same data (both absent
// counts as the same).
func sameConstant(a, b *graph.Value) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	ta, tb := a.ConstantTensor(), b.ConstantTensor()
	if ta == nil || tb == nil || ta.DType != tb.DType || !slices.Equal(ta.Dims, tb.Dims) {
		return false
	}
	ba, err1 := ta.Bytes()
	bb, err2 := tb.Bytes()
	return err1 == nil && err2 == nil && bytes.Equal(ba, bb)
}

// weightAxis is the output-channel axis of a weighted op's weight of the
// given rank: Conv [K, C, ...] 0, ConvTranspose [C, K/group, ...] 1, Gemm
// [K, N] 1 (0 with transB), MatMul [..., K, N] the last.
// metaKeptFloat is quantize.MetaKeptFloat (lint imports only graph).
const metaKeptFloat = "optc.kept_float"

func weightAxis(n *graph.Node, rank int) int {
	switch n.OpType {
	case "ConvTranspose":
		return 1
	case "Gemm":
		if n.AttrInt("transB", 0) != 0 {
			return 0
		}
		return 1
	case "MatMul":
		return rank - 1
	}
	return 0
}

func (l *trtLinter) weighted(n *graph.Node) {
	if n.Meta(metaKeptFloat) != "" {
		return // kept float on purpose by optc (the quantizer's report says why)
	}
	for i, role := range []string{"data", "weight"} {
		v := n.Input(i)
		if v == nil {
			continue
		}
		if !isOp(v.Producer(), "DequantizeLinear") {
			l.add(RuleWeightedFloatInput, lint.Warning, n, "%s input %d %q has no DequantizeLinear, so TensorRT runs this %s in float/fp16, not INT8; quantize both its data and weight inputs (or keep it float on purpose)", role, i, v.Name, n.OpType)
		}
	}
	dq := n.Input(1)
	if dq == nil || !isOp(dq.Producer(), "DequantizeLinear") || scaleCount(dq.Producer()) <= 1 {
		return
	}
	d := dq.Producer()
	w := weightData(d.Input(0))
	if w == nil {
		return
	}
	rank := len(w.Dims)
	axis := int(d.AttrInt("axis", 1))
	if axis < 0 {
		axis += rank
	}
	if want := weightAxis(n, rank); axis != want {
		l.add(RuleQDQAxis, lint.Error, d, "per-channel weight scales of %s %q run along axis %d; TensorRT takes them along the output-channel axis %d of the weight, so requantize the weight along axis %d", n.OpType, nodeID(n), axis, want, want)
	}
}

// residual: an Add fed by a quantized conv (or GEMM) whose other input has
// no Q/DQ cannot be fused into that conv. Only a conv output that the Add
// alone reads counts: TensorRT cannot fuse an addition into a conv whose
// output other layers read too, wherever the Q/DQ goes.
func (l *trtLinter) residual(n *graph.Node) {
	a, b := n.Input(0), n.Input(1)
	if a == nil || b == nil || a.IsConstant() || b.IsConstant() {
		return
	}
	dequantized := func(v *graph.Value) bool { return v != nil && isOp(v.Producer(), "DequantizeLinear") }
	fromQuantized := func(v *graph.Value) bool {
		p := v.Producer()
		return isOp(p, weightedOps...) && dequantized(p.Input(0)) && dequantized(p.Input(1)) &&
			len(v.Uses()) == 1 && !v.IsReturned()
	}
	if dequantized(a) || dequantized(b) {
		return
	}
	conv, other := -1, -1
	switch {
	case fromQuantized(a):
		conv, other = 0, 1
	case fromQuantized(b):
		conv, other = 1, 0
	default:
		return
	}
	l.add(RuleResidualUnquantized, lint.Warning, n, "adds %q to the output of quantized %q without Q/DQ on input %d %q, so TensorRT cannot fuse the addition into the convolution; put QuantizeLinear/DequantizeLinear on input %d", n.Input(other).Name, nodeID(n.Input(conv).Producer()), other, n.Input(other).Name, other)
}

// nodeID names n in a finding: its name, or for an unnamed node its op
// and first output, which ONNX makes unique.
func nodeID(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	out := ""
	if len(n.Outputs()) > 0 && n.Output(0) != nil {
		out = n.Output(0).Name
	}
	return n.OpType + " -> " + out
}

func isOp(n *graph.Node, ops ...string) bool {
	return n != nil && (n.Domain == "" || n.Domain == "ai.onnx") && slices.Contains(ops, n.OpType)
}

// constFloats returns v's values when it is a constant float32 tensor.
func constFloats(v *graph.Value) ([]float32, bool) {
	if v == nil {
		return nil, false
	}
	t := v.ConstantTensor()
	if t == nil || t.DType != graph.Float {
		return nil, false
	}
	f, err := t.Float32s()
	return f, err == nil
}

// allZero reports whether every byte of t's data is zero (the value 0 of
// every integer and float8 type).
func allZero(t *graph.Tensor) (bool, error) {
	b, err := t.Bytes()
	if err != nil {
		return false, err
	}
	for _, x := range b {
		if x != 0 {
			return false, nil
		}
	}
	return true, nil
}

func finiteScale(f float32) bool {
	return f > 0 && !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f))
}

func plural(n int, s string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, s)
	}
	return fmt.Sprintf("%d %ss", n, s)
}
