// Package quantize prepares a float model for post-training INT8: it
// inserts QuantizeLinear/DequantizeLinear (QDQ) pairs for a deployment
// target, from activation ranges calibrated elsewhere (a plain map from
// value name to [min, max]), and stores the weights already quantized.
//
// Targets:
//
//   - ort (ONNX Runtime's CPU provider): activations uint8 asymmetric,
//     weights int8 symmetric (per-channel by default), Conv/Gemm biases
//     int32 with scale input_scale*weight_scale. Q/DQ sits on the
//     activation inputs of the quantized ops, so that each op's output is
//     quantized where the next quantized op reads it (after a Relu/Clip the
//     op feeds alone). ORT's QDQ transformer turns DQ -> op -> Q groups into
//     integer kernels.
//   - tensorrt (explicit quantization): activations and weights int8
//     symmetric, every zero point 0, Q/DQ only on the inputs of weighted ops
//     (both inputs of a MatMul of two activations) and on the residual
//     input of an Add that a Conv absorbs; biases stay float.
//
// Each target's choices are one Scheme value (scheme.go) that Apply
// follows.
//
// Only the main graph is quantized, and only ranges that were measured are
// used: a node whose tensors have no range is skipped and reported.
package quantize

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/optc-dev/optc/graph"
)

// Target is the runtime the quantized model is meant for.
type Target string

// The targets.
const (
	TargetORT      Target = "ort"
	TargetTensorRT Target = "tensorrt"
)

// Options configure Apply.
type Options struct {
	Target Target // default ort
	// ReduceRange keeps weights within ±63 (7 bits). nil decides
	// automatically for ort: true on x86 without AVX-512 VNNI or
	// AVX-VNNI, false elsewhere; tensorrt never reduces.
	ReduceRange *bool
	// Exclude lists regular expressions; a node whose name or op type
	// matches one stays float.
	Exclude []string
	// KeepFirstLast keeps the first and the last weighted op float.
	KeepFirstLast bool
	// KeepFloat lists nodes that stay float by their index in
	// m.Graph.Nodes before Apply: exact, and it works for unnamed nodes
	// (the latency-aware placement keeps whole regions float this way).
	KeepFloat []int
	// PerChannel quantizes weights per output channel; nil means true.
	// false uses one scale per weight tensor.
	PerChannel *bool
	// Format is FormatQDQ (default) or FormatQOperator (ort only):
	// the QDQ groups rewritten into QLinearConv/QLinearMatMul.
	Format Format
	// SignedActivations quantizes activations as symmetric int8 (s8s8)
	// instead of the scheme's uint8 (u8s8): ORT runs both, at a speed
	// that depends on the CPU, so the placement search times it.
	SignedActivations bool
	// ORTContrib lets ApplyDynamic write ORT's fused com.microsoft
	// DynamicQuantizeMatMul instead of standard ONNX (a model for ONNX
	// Runtime alone).
	ORTContrib bool
	// BiasShift adds, per node name, one value per output channel to the
	// bias of that weighted node when it is quantized (bias correction:
	// the mean error its INT8 form adds, measured by the caller). A node
	// kept float keeps its bias.
	BiasShift map[string][]float32
	// Rounded gives, per node name, that weighted node's weight already
	// rounded onto the grid of its own scales (adaptive rounding: GPTQ's
	// error feedback), in the weight's layout: Apply computes the scales
	// from the float weight as always (WeightQMax) and stores these values'
	// codes instead of rounding the float weight to nearest.
	Rounded map[string][]float32
}

// Report says what Apply did.
type Report struct {
	Target            Target  `json:"target"`
	ReduceRange       bool    `json:"reduce_range"`
	ReduceRangeReason string  `json:"reduce_range_reason"`
	PerChannel        bool    `json:"per_channel"`
	Quantized         []Entry `json:"quantized"`
	Skipped           []Entry `json:"skipped"`
	// QDQPairs counts the activation QuantizeLinear -> DequantizeLinear
	// pairs inserted; Weights the weight tensors stored as int8, Biases
	// those stored as int32.
	QDQPairs int `json:"qdq_pairs"`
	Weights  int `json:"weights"`
	Biases   int `json:"biases"`
	// BiasShifted counts the layers whose bias Options.BiasShift changed;
	// BiasNotShifted those it could not, with the reason.
	BiasShifted    int     `json:"bias_shifted,omitempty"`
	BiasNotShifted []Entry `json:"bias_not_shifted,omitempty"`
	// Format is the format written; QOperator what the QOperator rewrite
	// made and left (FormatQOperator only).
	Format    Format           `json:"format"`
	QOperator *QOperatorReport `json:"qoperator,omitempty"`
	// Dynamic: weights int8, activations quantized at run time
	// (ApplyDynamic); no Q/DQ pairs, no calibration.
	Dynamic bool `json:"dynamic,omitempty"`
	// SignedActivations: activations symmetric int8 (s8s8), not uint8.
	SignedActivations bool `json:"signed_activations,omitempty"`
}

// Entry is one node of the report.
type Entry struct {
	Node   string `json:"node"` // name and op, as graph.Node.String gives them
	Op     string `json:"op"`
	Detail string `json:"detail"` // how it was quantized, or why not
}

var (
	weightedOps = []string{"Conv", "ConvTranspose", "Gemm", "MatMul"}
	// passThroughOps are quantized at their inputs for ort, so that
	// INT8 runs across them: ORT has integer kernels for each (QLinearAdd,
	// QLinearSigmoid, QLinearLeakyRelu, ...) or moves them into the int8
	// domain (Reshape, Transpose, Slice, Resize: where the scales on both
	// sides match, see Scheme.ShareScaleOps).
	passThroughOps = []string{"Add", "Mul", "Concat", "MaxPool", "AveragePool", "GlobalAveragePool",
		"Resize", "Reshape", "Transpose", "Flatten", "Slice", "Sigmoid", "LeakyRelu"}
)

// plan is what Apply decided for one quantized node.
type plan struct {
	n        *graph.Node
	acts     []int // indices of the activation inputs to quantize
	weighted bool
	axis     int  // weight's channel axis, -1 for per-tensor
	bias     bool // store the bias (input 2) as int32
	detail   string
}

// Apply quantizes m in place for opts.Target, using ranges (value name ->
// [min, max]) for the activations. The model must import the default
// opset at version 13 or later (per-channel QuantizeLinear/
// DequantizeLinear); older models are refused, not upgraded.
func Apply(m *graph.Model, ranges map[string][2]float64, opts Options) (*Report, error) {
	sc, excl, err := checkApply(m, &opts)
	if err != nil {
		return nil, err
	}
	a := &application{opts: opts, sc: sc, excl: excl, skipped: map[*graph.Node]bool{}, keepFloat: map[*graph.Node]bool{}}
	// Nodes of If branches and Loop/Scan bodies are quantized like the
	// main graph's; each Q/DQ goes into the graph of the node it feeds.
	m.Graph.Walk(func(sg *graph.Graph) {
		a.graphs = append(a.graphs, sg)
		a.nodes = append(a.nodes, sg.Nodes...)
	})
	for _, n := range a.nodes {
		if isOp(n, "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger") {
			return nil, fmt.Errorf("quantize: the model is already quantized (node %s)", n)
		}
	}
	for name, r := range ranges {
		if math.IsNaN(r[0]) || math.IsNaN(r[1]) || math.IsInf(r[0], 0) || math.IsInf(r[1], 0) || r[0] > r[1] {
			return nil, fmt.Errorf("quantize: range of %q is not a finite [min, max]: %v", name, r)
		}
	}
	rep := &Report{Target: opts.Target, PerChannel: opts.PerChannel == nil || *opts.PerChannel, Format: opts.Format,
		SignedActivations: sc.symmetric()}
	rep.ReduceRange, rep.ReduceRangeReason = reduceRange(sc, opts)
	a.rep = rep
	a.q = &quantizer{g: m.Graph, ranges: maps.Clone(ranges), scheme: sc, rep: rep, rounded: opts.Rounded,
		qmax: 127, dq: map[actKey]*graph.Value{}, wq: map[weightKey]*graph.Value{}, scaleOf: map[*graph.Value]float32{}, quantizes: map[*graph.Value]*graph.Value{}}
	if rep.ReduceRange {
		a.q.qmax = 63
	}
	for _, i := range opts.KeepFloat {
		if i < 0 || i >= len(m.Graph.Nodes) {
			return nil, fmt.Errorf("quantize: KeepFloat index %d is outside the graph's %d nodes", i, len(m.Graph.Nodes))
		}
		a.keepFloat[m.Graph.Nodes[i]] = true
	}
	// Ranges the integer chains need (chains.go), before any is read.
	a.q.chainRanges(a.nodes, a.excluded)
	// Weighted ops first: which have constant weights, which stay float;
	// then the ops without weights.
	a.chosen = map[*graph.Node]*plan{}
	a.planWeighted()
	a.planOthers()
	if err := a.rewrite(); err != nil {
		return rep, err
	}
	if opts.Format == FormatQOperator {
		if rep.QOperator, err = ToQOperator(m); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checkApply resolves the target's scheme and the format, and refuses
// what Apply cannot quantize: an unknown format or one the target does not
// take, an opset below 13, an exclude pattern that does not compile.
func checkApply(m *graph.Model, opts *Options) (Scheme, []*regexp.Regexp, error) {
	sc, err := SchemeFor(opts.Target)
	if err != nil {
		return sc, nil, err
	}
	opts.Target = sc.Target
	if opts.Format == "" {
		opts.Format = FormatQDQ
	}
	if opts.SignedActivations {
		// Symmetric int8 activations; the exact HardSigmoid rewrite
		// (chains.go) is for uint8 and stays off.
		sc.ActivationType = graph.Int8
	}
	switch {
	case opts.Format != FormatQDQ && opts.Format != FormatQOperator:
		return sc, nil, fmt.Errorf("quantize: unknown format %q (want %q or %q)", opts.Format, FormatQDQ, FormatQOperator)
	case opts.Format == FormatQOperator && !sc.QOperator:
		return sc, nil, fmt.Errorf("quantize: format %q is for target %q; %s takes QDQ", FormatQOperator, TargetORT, opts.Target)
	}
	if v := m.OpsetVersion(""); v < 13 {
		return sc, nil, fmt.Errorf("quantize: the model imports default-domain opset %d; per-channel QuantizeLinear/DequantizeLinear needs opset >= 13, and upgrading a model's opset is not done here (convert it first and check the result against the original)", v)
	}
	excl := make([]*regexp.Regexp, len(opts.Exclude))
	for i, s := range opts.Exclude {
		re, err := regexp.Compile(s)
		if err != nil {
			return sc, nil, fmt.Errorf("quantize: exclude pattern %q: %w", s, err)
		}
		excl[i] = re
	}
	return sc, excl, nil
}

// application is one Apply: the nodes it reads, what it chose for each,
// and what it skipped.
type application struct {
	opts      Options
	sc        Scheme
	excl      []*regexp.Regexp
	q         *quantizer
	rep       *Report
	graphs    []*graph.Graph
	nodes     []*graph.Node // every graph's, main graph first
	skipped   map[*graph.Node]bool
	keepFloat map[*graph.Node]bool
	chosen    map[*graph.Node]*plan
}

// skip leaves n float and reports why.
func (a *application) skip(n *graph.Node, why string) {
	a.skipped[n] = true
	a.rep.Skipped = append(a.rep.Skipped, Entry{Node: n.String(), Op: n.OpType, Detail: why})
}

// excluded says why n is kept float on purpose (the placement, a
// pattern), or "".
func (a *application) excluded(n *graph.Node) string {
	if a.keepFloat[n] {
		return "kept float by the placement"
	}
	for i, re := range a.excl {
		if (n.Name != "" && re.MatchString(n.Name)) || re.MatchString(n.OpType) {
			return "excluded by pattern " + strconv.Quote(a.opts.Exclude[i])
		}
	}
	return ""
}

// planWeighted plans the weighted ops whose weights are constant, but
// those kept float (KeepFirstLast, the placement, a pattern) or whose
// activations have no range; it shifts the biases bias correction asked
// for.
func (a *application) planWeighted() {
	var weighted []*plan
	for _, n := range a.nodes {
		if !isOp(n, weightedOps...) {
			continue
		}
		p, why := a.q.weightedPlan(n, a.rep.PerChannel)
		if why != "" && a.sc.ActivationMatMul && isOp(n, "MatMul") {
			p, why = a.q.activationMatMulPlan(n)
		}
		if why != "" {
			a.skip(n, why)
			continue
		}
		weighted = append(weighted, p)
	}
	keep := map[*graph.Node]string{}
	if a.opts.KeepFirstLast && len(weighted) > 0 {
		keep[weighted[len(weighted)-1].n] = "kept float: last weighted op (KeepFirstLast)"
		keep[weighted[0].n] = "kept float: first weighted op (KeepFirstLast)"
	}
	for _, p := range weighted {
		if why := cmp.Or(keep[p.n], a.excluded(p.n)); why != "" {
			// Float on purpose (accuracy fallback, placement, a pattern):
			// the node says so, and lint does not ask to quantize it.
			p.n.SetMeta(MetaKeptFloat, why)
			a.skip(p.n, why)
			continue
		}
		if why := a.q.needRanges(p.n, p.acts, true); why != "" {
			a.skip(p.n, why)
			continue
		}
		if d, ok := a.opts.BiasShift[p.n.Name]; ok && p.n.Name != "" {
			changed, why := shiftBias(p.n.Graph(), p.n, d)
			if !changed {
				a.rep.BiasNotShifted = append(a.rep.BiasNotShifted, Entry{Node: p.n.String(), Op: p.n.OpType, Detail: why})
			} else {
				a.rep.BiasShifted++
				// A bias the node did not have must be planned (int32).
				if np, why := a.q.weightedPlan(p.n, a.rep.PerChannel); why == "" {
					p = np
				}
			}
		}
		a.chosen[p.n] = p
	}
}

// planOthers plans the ops without weights the scheme quantizes: the
// pass-through ops, and residual Adds where the scheme takes them.
func (a *application) planOthers() {
	for _, n := range a.nodes {
		if a.chosen[n] != nil || isOp(n, weightedOps...) {
			continue
		}
		var p *plan
		var why string
		switch {
		case isOp(n, a.sc.PassThroughOps...):
			p, why = a.q.passThroughPlan(n)
		case a.sc.ResidualAdds && isOp(n, "Add"):
			p, why = a.q.residualPlan(n, a.chosen)
		default:
			continue
		}
		if p == nil && why == "" {
			continue // not a pattern this target quantizes
		}
		if why == "" {
			why = a.excluded(n)
		}
		if why == "" {
			why = a.q.needRanges(n, p.acts, a.q.outputRanges())
		}
		if why != "" {
			a.skip(n, why)
			continue
		}
		a.chosen[n] = p
	}
}

// rewrite inserts the Q/DQ of every plan, in node order, so that each
// lands before its first reader, and drops what the rewrites left dead.
func (a *application) rewrite() error {
	q := a.q
	for _, n := range a.nodes {
		q.g = n.Graph()
		if q.intHardSigmoid[n] {
			if err := q.integerHardSigmoid(n); err != nil {
				return fmt.Errorf("quantize %s: %w", n, err)
			}
			continue
		}
		p := a.chosen[n]
		if p == nil {
			continue
		}
		if err := q.rewrite(p); err != nil {
			return fmt.Errorf("quantize %s: %w", n, err)
		}
		if a.sc.QuantizeOutputs {
			if err := q.quantizeOutput(n, a.skipped); err != nil {
				return fmt.Errorf("quantize %s: %w", n, err)
			}
		}
		a.rep.Quantized = append(a.rep.Quantized, Entry{Node: n.String(), Op: n.OpType, Detail: p.detail})
	}
	for _, sg := range a.graphs {
		if err := dropDead(sg, q.old); err != nil {
			return err
		}
	}
	return nil
}

// MetaKeptFloat is the node metadata key that marks a weighted node kept
// float on purpose; its value is the reason.
const MetaKeptFloat = "optc.kept_float"

type weightKey struct {
	v    *graph.Value
	axis int
	g    *graph.Graph // where its DequantizeLinear is: visible there and below
}

// actKey is an activation quantized in one graph (a subgraph has its own
// Q/DQ of an outer value: another branch cannot see it).
type actKey struct {
	v *graph.Value
	g *graph.Graph
}

type quantizer struct {
	g      *graph.Graph
	ranges map[string][2]float64
	scheme Scheme
	rep    *Report
	qmax   float64
	dq     map[actKey]*graph.Value // activation -> its DequantizeLinear output
	// quantizes maps a DequantizeLinear output in dq back to its
	// activation.
	quantizes map[*graph.Value]*graph.Value
	// scaleOf is the scale of a DequantizeLinear output in dq whose scale
	// is not its range's (an integer HardSigmoid's).
	scaleOf map[*graph.Value]float32
	// intHardSigmoid are the HardSigmoid nodes to run in integers when
	// their input is quantized (chains.go).
	intHardSigmoid map[*graph.Node]bool
	wq             map[weightKey]*graph.Value // float weight -> its DequantizeLinear output
	scales         map[*graph.Value][]float32 // weight DQ output -> its scales
	old            []*graph.Value             // float constants possibly left unused
	rounded        map[string][]float32       // Options.Rounded
}

func isOp(n *graph.Node, ops ...string) bool {
	return n != nil && (n.Domain == "" || n.Domain == "ai.onnx") && slices.Contains(ops, n.OpType)
}

// floatConst returns v's data when it is a constant float32 tensor.
func floatConst(v *graph.Value) (*graph.Tensor, []float32) {
	t := floatTensor(v)
	if t == nil {
		return nil, nil
	}
	f, err := t.Float32s()
	if err != nil {
		return nil, nil
	}
	return t, f
}

// floatTensor returns v's tensor when it is a constant float32 tensor,
// without reading its data (weights can be gigabytes).
func floatTensor(v *graph.Value) *graph.Tensor {
	if v == nil {
		return nil
	}
	if t := v.ConstantTensor(); t != nil && t.DType == graph.Float {
		return t
	}
	return nil
}

// weightedPlan checks a Conv/ConvTranspose/Gemm/MatMul: constant float
// weight, the channel axis, and whether its bias can be stored as int32.
func (q *quantizer) weightedPlan(n *graph.Node, perChannel bool) (*plan, string) {
	wt := floatTensor(n.Input(1))
	if wt == nil {
		return nil, "input 1 (the weight) is not a constant float32 tensor"
	}
	if n.Input(0) == nil || n.Input(0).IsConstant() {
		return nil, "input 0 is not an activation"
	}
	p := &plan{n: n, acts: []int{0}, weighted: true, axis: -1}
	rank := len(wt.Dims)
	switch n.OpType {
	case "Conv":
		if rank < 3 {
			return nil, fmt.Sprintf("weight has rank %d", rank)
		}
		p.axis = 0
	case "ConvTranspose":
		if rank < 3 {
			return nil, fmt.Sprintf("weight has rank %d", rank)
		}
		if n.AttrInt("group", 1) == 1 {
			p.axis = 1 // [C_in, C_out/group, ...]
		}
	case "Gemm":
		if rank != 2 {
			return nil, fmt.Sprintf("weight has rank %d", rank)
		}
		p.axis = 1
		if n.AttrInt("transB", 0) != 0 {
			p.axis = 0
		}
	case "MatMul":
		if rank != 2 {
			return nil, fmt.Sprintf("MatMul weight has rank %d; only 2-D [K, N] weights are quantized", rank)
		}
		p.axis = 1
	}
	if !perChannel {
		p.axis = -1
	}
	p.detail = "weight int8 per-tensor"
	if p.axis >= 0 {
		p.detail = fmt.Sprintf("weight int8 per-channel (axis %d)", p.axis)
	}
	if q.scheme.Int32Bias && n.Input(2) != nil {
		bt := floatTensor(n.Input(2))
		channels := int64(1)
		if p.axis >= 0 {
			channels = wt.Dims[p.axis]
		}
		switch {
		case n.OpType != "Conv" && n.OpType != "Gemm":
		case bt == nil || len(bt.Dims) != 1:
		case n.OpType == "Gemm" && (n.AttrFloat("alpha", 1) != 1 || n.AttrFloat("beta", 1) != 1):
		case p.axis >= 0 && bt.Dims[0] != channels:
		case n.OpType == "Gemm" && bt.Dims[0] != wt.Dims[1-n.AttrInt("transB", 0)]:
		default:
			p.bias = true
		}
	}
	return p, ""
}

// activationMatMulPlan: a MatMul of two float activations (attention's
// Q·Kᵀ and A·V) quantized at both inputs, one scale each, for a scheme
// whose runtime runs it in INT8 that way.
func (q *quantizer) activationMatMulPlan(n *graph.Node) (*plan, string) {
	a, b := n.Input(0), n.Input(1)
	if a == nil || b == nil || a.IsConstant() || b.IsConstant() {
		return nil, "input 1 (the weight) is not a constant float32 tensor"
	}
	for i, v := range []*graph.Value{a, b} {
		if v.Type != nil && v.Type.Elem != graph.Undefined && v.Type.Elem != graph.Float {
			return nil, fmt.Sprintf("input %d %q is %s, not float32", i, v.Name, v.Type.Elem)
		}
	}
	return &plan{n: n, acts: []int{0, 1}, axis: -1, detail: "both activation inputs int8 per-tensor"}, ""
}

// passThroughPlan: ort quantizes every float activation input of an
// Add/Mul/Concat/pooling/shape op (for Reshape and Resize only the data).
func (q *quantizer) passThroughPlan(n *graph.Node) (*plan, string) {
	if len(n.Outputs()) != 1 || n.Output(0) == nil {
		return nil, "more than one output"
	}
	if t := n.Input(0); t != nil && t.Type != nil && t.Type.Elem != graph.Undefined && !t.Type.Elem.IsFloat() {
		return nil, "" // shape arithmetic on int64 tensors: not an activation
	}
	p := &plan{n: n, detail: "inputs and output quantized (uint8)"}
	switch n.OpType {
	case "Add", "Mul", "Concat":
		for i, in := range n.Inputs() {
			if in == nil {
				continue
			}
			if in.IsConstant() {
				return nil, fmt.Sprintf("input %d %q is a constant", i, in.Name)
			}
			p.acts = append(p.acts, i)
		}
	default:
		if n.Input(0) == nil || n.Input(0).IsConstant() {
			return nil, "input 0 is not an activation"
		}
		p.acts = []int{0}
	}
	return p, ""
}

// residualPlan: for tensorrt, an Add one of whose inputs TensorRT can fuse
// it into (the output of a quantized Conv that the Add alone reads) gets
// Q/DQ on its other input, the residual, so that the addition runs inside
// the conv. When both inputs are such conv outputs the second is fused and
// the first quantized. Other Adds are left alone (nil, ""): a conv whose
// output has other readers cannot absorb the Add, and Q/DQ on either input
// would only add rounding (or, on a conv output, block the conv's own
// fusions).
func (q *quantizer) residualPlan(n *graph.Node, chosen map[*graph.Node]*plan) (*plan, string) {
	if len(n.Inputs()) != 2 || n.Input(0) == nil || n.Input(1) == nil || n.Input(0) == n.Input(1) {
		return nil, ""
	}
	fusible := func(v *graph.Value) bool {
		pr := v.Producer()
		return isOp(pr, "Conv") && chosen[pr] != nil && len(v.Uses()) == 1 && !v.IsReturned()
	}
	var other int
	switch {
	case fusible(n.Input(1)):
		other = 0
	case fusible(n.Input(0)):
		other = 1
	default:
		return nil, ""
	}
	if n.Input(other).IsConstant() {
		return nil, ""
	}
	return &plan{n: n, acts: []int{other}, detail: fmt.Sprintf("residual input %d quantized (int8)", other)}, ""
}

// needRanges returns why n cannot be quantized for lack of a range: of an
// activation input, and with output set (ort) of the tensor its
// quantized output will be, after a Relu/Clip it feeds alone.
func (q *quantizer) needRanges(n *graph.Node, acts []int, output bool) string {
	for _, i := range acts {
		if _, ok := q.ranges[n.Input(i).Name]; !ok {
			return fmt.Sprintf("no range for input %d %q", i, n.Input(i).Name)
		}
	}
	if !output {
		return ""
	}
	out := OutputActivation(n)
	if _, ok := q.ranges[out.Name]; !ok {
		return fmt.Sprintf("no range for output %q", out.Name)
	}
	return ""
}

// OutputActivation returns the tensor n's quantized output is: the output
// of a Relu or Clip that alone reads n's output, else n's output itself.
// ORT's integer kernels absorb a Relu or Clip into their output's range;
// any other activation (a HardSigmoid, Sigmoid, LeakyRelu the
// optc.fused_activation note pairs with a Conv) reads the quantized
// output, or the Conv could not run as QLinearConv.
func OutputActivation(n *graph.Node) *graph.Value {
	out := n.Output(0)
	uses := out.Uses()
	if len(uses) != 1 || out.IsReturned() || uses[0].Index != 0 {
		return out
	}
	a := uses[0].Node
	if a.Graph() != n.Graph() || len(a.Outputs()) != 1 || a.Output(0) == nil {
		return out
	}
	if isOp(a, "Relu", "Clip") {
		return a.Output(0)
	}
	return out
}

func (q *quantizer) rewrite(p *plan) error {
	n := p.n
	var inScale float32
	for _, i := range p.acts {
		dq, scale, err := q.activation(n.Input(i), n)
		if err != nil {
			return err
		}
		inScale = scale
		n.SetInput(i, dq)
	}
	if !p.weighted {
		return nil
	}
	w := n.Input(1)
	dq, scales, err := q.weight(w, p.axis, n)
	if err != nil {
		return err
	}
	n.SetInput(1, dq)
	if p.bias {
		ok, err := q.bias(n, inScale, scales, p.axis >= 0)
		if err != nil {
			return err
		}
		if ok {
			p.detail += ", bias int32"
		} else {
			p.detail += ", bias float (int32 would overflow)"
		}
	} else if n.Input(2) != nil {
		p.detail += ", bias float"
	}
	if q.outputRanges() {
		if out := OutputActivation(n); out != n.Output(0) {
			p.detail += fmt.Sprintf(", output quantized after %s", out.Producer().OpType)
		}
	}
	return nil
}

// outputRanges reports whether a quantized op's output is quantized too
// (where the next quantized op reads it, after a Relu/Clip it feeds
// alone), so that its range is needed: the schemes that run INT8 across
// ops do.
func (q *quantizer) outputRanges() bool { return len(q.scheme.PassThroughOps) > 0 }

// activation returns v quantized and dequantized (one pair per value),
// inserting the pair before reader when it is new.
func (q *quantizer) activation(v *graph.Value, reader *graph.Node) (*graph.Value, float32, error) {
	if orig, ok := q.quantizes[v]; ok {
		v = orig // reader already reads the pair (QuantizeOutputs)
	}
	scale, zp := q.scheme.activationParams(q.ranges[v.Name])
	if dq := q.dq[actKey{v, q.g}]; dq != nil {
		if s, ok := q.scaleOf[dq]; ok {
			scale = s
		}
		return dq, scale, nil
	}
	zpType, zpData := q.scheme.zeroPoint(zp)
	sv, err := q.init(v.Name+"_scale", graph.Float, nil, f32bytes([]float32{scale}))
	if err != nil {
		return nil, 0, err
	}
	zv, err := q.init(v.Name+"_zero_point", zpType, nil, zpData)
	if err != nil {
		return nil, 0, err
	}
	qv, err := q.g.NewValue(q.g.UniqueName(v.Name + "_quantized"))
	if err != nil {
		return nil, 0, err
	}
	dqv, err := q.g.NewValue(q.g.UniqueName(v.Name + "_dequantized"))
	if err != nil {
		return nil, 0, err
	}
	qn, err := q.g.InsertNodeBefore(reader, "QuantizeLinear", []*graph.Value{v, sv, zv}, []*graph.Value{qv})
	if err != nil {
		return nil, 0, err
	}
	qn.Name = qv.Name
	dn, err := q.g.InsertNodeBefore(reader, "DequantizeLinear", []*graph.Value{qv, sv, zv}, []*graph.Value{dqv})
	if err != nil {
		return nil, 0, err
	}
	dn.Name = dqv.Name
	q.dq[actKey{v, q.g}] = dqv
	q.quantizes[dqv] = v
	q.rep.QDQPairs++
	return dqv, scale, nil
}

// weight stores w as int8 (symmetric, zero point 0) with a
// DequantizeLinear before reader; the pair is shared by every op that
// reads w with the same axis.
func (q *quantizer) weight(w *graph.Value, axis int, reader *graph.Node) (*graph.Value, []float32, error) {
	if dq := q.wq[weightKey{w, axis, q.g}]; dq != nil {
		return dq, q.scales[dq], nil
	}
	t := floatTensor(w)
	raw, err := t.Bytes()
	if err != nil {
		return nil, nil, err
	}
	var rounded []float32
	if r, ok := q.rounded[reader.Name]; ok && reader.Name != "" && 4*len(r) == len(raw) {
		rounded = r
	}
	scales, data := quantizeWeights(raw, t.Dims, axis, q.qmax, rounded)
	qv, err := q.init(w.Name+"_int8", graph.Int8, t.Dims, data)
	if err != nil {
		return nil, nil, err
	}
	var dims []int64
	if axis >= 0 {
		dims = []int64{int64(len(scales))}
	}
	sv, err := q.init(w.Name+"_scale", graph.Float, dims, f32bytes(scales))
	if err != nil {
		return nil, nil, err
	}
	zv, err := q.init(w.Name+"_zero_point", graph.Int8, dims, make([]byte, len(scales)))
	if err != nil {
		return nil, nil, err
	}
	dqv, err := q.g.NewValue(q.g.UniqueName(w.Name + "_dequantized"))
	if err != nil {
		return nil, nil, err
	}
	dn, err := q.g.InsertNodeBefore(reader, "DequantizeLinear", []*graph.Value{qv, sv, zv}, []*graph.Value{dqv})
	if err != nil {
		return nil, nil, err
	}
	dn.Name = dqv.Name
	if axis >= 0 {
		dn.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: int64(axis)})
	}
	if q.scales == nil {
		q.scales = map[*graph.Value][]float32{}
	}
	q.wq[weightKey{w, axis, q.g}], q.scales[dqv] = dqv, scales
	q.old = append(q.old, w)
	q.rep.Weights++
	return dqv, scales, nil
}

// WeightQMax is the largest weight code Apply uses with opts: 63 with
// reduce-range (7-bit weights), else 127.
func WeightQMax(opts Options) (float64, error) {
	sc, err := SchemeFor(opts.Target)
	if err != nil {
		return 0, err
	}
	if on, _ := reduceRange(sc, opts); on {
		return 63, nil
	}
	return 127, nil
}

// reduceRange decides whether weights keep to 7 bits (opts.ReduceRange,
// else the scheme's rule) and says why.
func reduceRange(sc Scheme, opts Options) (bool, string) {
	switch {
	case !sc.AutoReduceRange && (opts.ReduceRange == nil || !*opts.ReduceRange):
		return false, string(sc.Target) + ": full int8 range ([-127, 127] weights)"
	case opts.ReduceRange != nil && *opts.ReduceRange:
		return true, "asked for: weights kept within ±63"
	case opts.ReduceRange != nil:
		return false, "asked for: full-range int8 weights"
	}
	return autoReduceRange()
}

// quantizeWeights returns per-channel (axis >= 0) or per-tensor scales
// max|w|/qmax and the weights round(w/scale) clamped to ±qmax; with
// rounded, those values (already on the grid) are stored instead of w.
func quantizeWeights(raw []byte, dims []int64, axis int, qmax float64, rounded []float32) ([]float32, []byte) {
	n := len(raw) / 4
	// The float32s are read where they lie (a mapped file for big models),
	// not copied.
	val := func(i int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))) }
	channels, inner := 1, n
	if axis >= 0 {
		channels = int(dims[axis])
		inner = 1
		for _, d := range dims[axis+1:] {
			inner *= int(d)
		}
	}
	amax := make([]float64, channels)
	chanOf := func(i int) int { return (i / inner) % channels }
	for i := range n {
		c := chanOf(i)
		amax[c] = math.Max(amax[c], math.Abs(val(i)))
	}
	scales := make([]float32, channels)
	for c, a := range amax {
		scales[c] = float32(a / qmax)
		if a == 0 {
			scales[c] = 1
		}
	}
	if rounded != nil {
		val = func(i int) float64 { return float64(rounded[i]) }
	}
	qs := make([]byte, n)
	for i := range n {
		r := math.RoundToEven(val(i) / float64(scales[chanOf(i)]))
		qs[i] = byte(int8(math.Max(-qmax, math.Min(qmax, r))))
	}
	return scales, qs
}

// bias stores n's bias as int32 with scale inScale*weightScale[c] and zero
// point 0. It leaves the bias float (false) when a value would not fit.
func (q *quantizer) bias(n *graph.Node, inScale float32, wScales []float32, perChannel bool) (bool, error) {
	b := n.Input(2)
	t, vals := floatConst(b)
	scales := make([]float32, len(vals))
	data := make([]byte, 4*len(vals))
	for i, x := range vals {
		ws := wScales[0]
		if perChannel {
			ws = wScales[i]
		}
		scales[i] = float32(float64(inScale) * float64(ws))
		r := math.RoundToEven(float64(x) / float64(scales[i]))
		if r > math.MaxInt32 || r < math.MinInt32 {
			return false, nil
		}
		binary.LittleEndian.PutUint32(data[4*i:], uint32(int32(r)))
	}
	dims := []int64(nil)
	if perChannel {
		dims = []int64{t.Dims[0]}
	} else {
		scales = scales[:1]
	}
	qv, err := q.init(b.Name+"_int32", graph.Int32, t.Dims, data)
	if err != nil {
		return false, err
	}
	sv, err := q.init(b.Name+"_scale", graph.Float, dims, f32bytes(scales))
	if err != nil {
		return false, err
	}
	zv, err := q.init(b.Name+"_zero_point", graph.Int32, dims, make([]byte, 4*len(scales)))
	if err != nil {
		return false, err
	}
	dqv, err := q.g.NewValue(q.g.UniqueName(b.Name + "_dequantized"))
	if err != nil {
		return false, err
	}
	dn, err := q.g.InsertNodeBefore(n, "DequantizeLinear", []*graph.Value{qv, sv, zv}, []*graph.Value{dqv})
	if err != nil {
		return false, err
	}
	dn.Name = dqv.Name
	if perChannel {
		dn.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: 0})
	}
	n.SetInput(2, dqv)
	q.old = append(q.old, b)
	q.rep.Biases++
	return true, nil
}

func (q *quantizer) init(prefix string, dt graph.DataType, dims []int64, data []byte) (*graph.Value, error) {
	return addInitializer(q.g, prefix, dt, dims, data)
}

// addInitializer adds data to g as an initializer named after prefix: the
// one way static (quantizer.init) and dynamic quantization (dynamic.init)
// write their scales, zero points and quantized weights.
func addInitializer(g *graph.Graph, prefix string, dt graph.DataType, dims []int64, data []byte) (*graph.Value, error) {
	t, err := graph.NewTensor(g.UniqueName(prefix), dt, dims, data)
	if err != nil {
		return nil, err
	}
	return g.AddInitializer(t)
}

func f32bytes(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
