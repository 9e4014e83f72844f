package export

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/kernels"
	"github.com/optc-dev/optc/shapes"
)

// FP16Options tune ToFloat16.
type FP16Options struct {
	// KeepFloat32 lists regular expressions; a node whose name or op type
	// matches one entirely (the pattern is anchored) stays float32.
	KeepFloat32 []string
	// Block lists the op types that stay float32 although their schema
	// admits float16. nil means DefaultFP16Block(); an empty list blocks
	// nothing.
	Block []string
	// Ranges are the observed min and max of float32 values by name,
	// measured on data with the deployment's range (calibrate.MinMax over
	// the values FP16Tensors lists). A value whose magnitude exceeds
	// FP16SafeMax stays float32, and so does every node that reads or
	// writes it: out-of-range values never pass through float16, up to
	// the consumers that bring them back into range (or the graph
	// outputs). Values without a range (nil: all) fall back to the op
	// rules alone.
	Ranges map[string]calibrate.Range
}

// FP16SafeMax is the largest observed magnitude ToFloat16 lets into
// float16: float16's 65504 over 4. Calibration data shows the range it
// holds, not the largest input deployment will see, and the values that
// overflow first grow faster than their inputs: a square (Pow 2, a
// variance, a power spectrum) turns an input twice the calibrated
// amplitude into an output 4 times the calibrated one. The margin of 4
// (2 binades) covers that; precision does not shrink it (float16 keeps 11
// significant bits anywhere in its normal range).
const FP16SafeMax = float16Max / 4

// FP16Tensors returns the values of m that FP16Options.Ranges is read
// for: the float32 graph inputs and the float32 node outputs of the main
// graph and of every If/Loop/Scan body (by inferred type; constants
// aside), in graph order, main graph first. calibrate.Collect measures a
// body's values over every iteration; a branch never taken has no values,
// and its nodes follow the op rules. Scalars (rank 0) are left out: the
// ORT binding cannot return an exposed scalar, and a scalar is a count or
// a bound far more often than a signal.
func FP16Tensors(m *graph.Model) ([]string, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("float16: the model has no graph")
	}
	inferred, err := shapes.Infer(m)
	if err != nil {
		return nil, fmt.Errorf("float16: %w", err)
	}
	var out []string
	seen := map[*graph.Value]bool{}
	add := func(v *graph.Value) {
		if v == nil || v.Name == "" || seen[v] || v.IsConstant() {
			return
		}
		seen[v] = true
		if t := inferred.Types.Get(v); t != nil && t.Kind == graph.KindTensor && t.Elem == graph.Float && (t.Shape == nil || len(t.Shape) > 0) {
			out = append(out, v.Name)
		}
	}
	for _, v := range m.Graph.Inputs {
		add(v)
	}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if n.OpType == "Constant" {
				continue
			}
			for _, v := range n.Outputs() {
				add(v)
			}
		}
	})
	return out, nil
}

// FP16Report says what ToFloat16 did.
type FP16Report struct {
	// Converted counts the nodes that now compute in float16.
	Converted int `json:"converted_nodes"`
	// Kept lists, in graph order, the nodes that read or write float32
	// tensors and stay float32, with the reason.
	Kept []KeptNode `json:"kept_float32"`
	// Casts counts the Cast nodes inserted at float16/float32 borders
	// (graph inputs and outputs included).
	Casts int `json:"casts_inserted"`
	// ConstantsConverted counts the float32 initializers and Constant
	// nodes now stored as float16; ConstantsKept those left float32
	// (read by a float32 node, a graph output or an overridable input).
	ConstantsConverted int `json:"constants_converted"`
	ConstantsKept      int `json:"constants_kept_float32"`
	// FlushedToZero counts nonzero weights that float16 rounds to zero
	// (their magnitude is below 2^-25).
	FlushedToZero int64 `json:"flushed_to_zero"`
	// ConstantBytesBefore and ConstantBytesAfter are the bytes of all
	// float32 constants before and after.
	ConstantBytesBefore int64 `json:"constant_bytes_before"`
	ConstantBytesAfter  int64 `json:"constant_bytes_after"`
	// Ranged counts the values a measured range was given for
	// (FP16Options.Ranges); 0 means the op rules alone decided.
	Ranged int `json:"values_with_range"`
	// OutOfRange lists, in graph order, the values whose measured
	// magnitude exceeds FP16SafeMax: they stay float32, and the nodes
	// reading or writing them are in Kept with the reason.
	OutOfRange []RangedValue `json:"out_of_range_float32,omitempty"`
	// KeptForRange counts the nodes of Kept that stay float32 because
	// they read or write an OutOfRange value.
	KeptForRange int `json:"kept_for_range"`
	// Subgraphs counts the If/Loop/Scan bodies whose nodes were
	// converted.
	Subgraphs int `json:"subgraphs_converted,omitempty"`
}

// RangedValue is a value kept float32 for its measured range.
type RangedValue struct {
	Value string  `json:"value"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

// KeptNode is a node that stays float32, and why.
type KeptNode struct {
	Node   string `json:"node"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
}

// float16Max is the largest finite float16.
const float16Max = 65504

// ToFloat16 rewrites m in place into its float16 variant for TensorRT's
// strongly typed mode: float32 weights (initializers and Constant nodes)
// are stored as float16 and float32 activations are computed in float16,
// except where that overflows or loses meaning: blocked ops (see
// DefaultFP16Block and the options), ops whose schema does not admit
// float16 at the model's opset, nodes reading a constant beyond ±65504,
// and, given measured ranges (FP16Options.Ranges), nodes reading or
// writing a value whose magnitude exceeds FP16SafeMax stay float32
// (docs/tensorrt.md has the rules). Graph inputs and outputs keep their
// names and stay float32: Casts convert at the borders, one per value,
// direction and graph, named after the value with a _fp16 or _fp32
// suffix. Declared types follow.
//
// The nodes inside If/Loop/Scan bodies are converted by the same rules.
// The node holding a body keeps a float32 interface: its float inputs and
// outputs, and its bodies' inputs and outputs, stay float32, with Casts
// inside the body where a converted body node reads a body input or
// writes a body output; a body node reading an outer value reads it as
// the outer graph now types it, through a Cast in the body where it wants
// the other type. A bad pattern is refused before anything changes.
func ToFloat16(m *graph.Model, opts FP16Options) (*FP16Report, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("float16: the model has no graph")
	}
	keep, err := compileAnchored(opts.KeepFloat32)
	if err != nil {
		return nil, err
	}
	g := m.Graph
	inferred, err := shapes.Infer(m)
	if err != nil {
		return nil, fmt.Errorf("float16: %w", err)
	}
	var graphs []*graph.Graph
	g.Walk(func(s *graph.Graph) { graphs = append(graphs, s) })
	c := &fp16Converter{
		opset:  m.OpsetVersion(""),
		types:  inferred.Types,
		keep:   keep,
		pats:   opts.KeepFloat32,
		block:  blockReasons(opts.Block),
		ranges: opts.Ranges,
		state:  map[*graph.Node]nodeState{},
		home:   map[*graph.Value]graph.DataType{},
		twins:  map[twinKey]*graph.Value{},
		rep:    &FP16Report{Subgraphs: len(graphs) - 1},
	}
	c.noteRanges(g)
	for _, s := range graphs {
		for _, n := range s.Nodes {
			c.decide(n)
		}
	}
	if err := c.convertConstants(graphs); err != nil {
		return nil, err
	}
	for _, s := range graphs {
		if err := c.convertOutputs(s); err != nil {
			return nil, err
		}
	}
	for _, s := range graphs {
		if err := c.insertCasts(s); err != nil {
			return nil, err
		}
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("float16: the converted model is invalid: %w", err)
	}
	return c.rep, nil
}

// noteRanges counts the values of g and its bodies that have a range and
// lists, in graph order, those out of float16's safe range.
func (c *fp16Converter) noteRanges(g *graph.Graph) {
	if len(c.ranges) == 0 {
		return
	}
	seen := map[*graph.Value]bool{}
	note := func(v *graph.Value) {
		if v == nil || seen[v] {
			return
		}
		seen[v] = true
		r, ok := c.ranges[v.Name]
		if !ok {
			return
		}
		c.rep.Ranged++
		if magnitude(r) > FP16SafeMax {
			c.rep.OutOfRange = append(c.rep.OutOfRange, RangedValue{Value: v.Name, Min: r.Min, Max: r.Max})
		}
	}
	for _, v := range g.Inputs {
		note(v)
	}
	g.Walk(func(s *graph.Graph) {
		for _, n := range s.Nodes {
			for _, v := range n.Outputs() {
				note(v)
			}
		}
	})
}

// magnitude is the largest |x| of a range.
func magnitude(r calibrate.Range) float64 { return math.Max(math.Abs(r.Min), math.Abs(r.Max)) }

// compileAnchored compiles each pattern to match a whole string.
func compileAnchored(patterns []string) ([]*regexp.Regexp, error) {
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("float16: keep-float32 pattern %q: %w", p, err)
		}
		res[i] = re
	}
	return res, nil
}

// blockReasons maps the blocked op types to the reason reported.
func blockReasons(block []string) map[string]string {
	if block == nil {
		return fp16Block
	}
	m := make(map[string]string, len(block))
	for _, op := range block {
		m[op] = "listed in FP16Options.Block"
		if why, ok := fp16Block[op]; ok {
			m[op] = why
		}
	}
	return m
}

// nodeState is what ToFloat16 does with a node.
type nodeState uint8

const (
	stateUntouched nodeState = iota // no float32 tensor in or out
	stateConverted                  // computes in float16
	stateKept                       // stays float32
	stateNeutral                    // reads any float type (fp16Neutral)
	stateConstant                   // a Constant node, decided with the constants
)

// twinKey names the Cast of value v to type dt made in graph g; g is nil
// for the float16 twin of a returned value, made next to its producer,
// which every graph may read.
type twinKey struct {
	g  *graph.Graph
	v  *graph.Value
	dt graph.DataType
}

type fp16Converter struct {
	opset int64
	types *graph.ValueTable[*graph.Type] // inferred, before any change
	keep  []*regexp.Regexp
	pats  []string // keep's source patterns, for the report
	block map[string]string
	// ranges are the measured ranges by value name (nil: none).
	ranges map[string]calibrate.Range
	state  map[*graph.Node]nodeState
	// home is the element type each originally float32 value has after
	// the conversion (Float16 or Float).
	home  map[*graph.Value]graph.DataType
	twins map[twinKey]*graph.Value
	rep   *FP16Report
	// nodeNames are the node names in use, so that a Cast named after its
	// output does not take the name of the node that produced it before.
	nodeNames map[*graph.Graph]map[string]bool
}

// elem is v's element type as inferred before the conversion (Undefined
// when unknown).
func (c *fp16Converter) elem(v *graph.Value) graph.DataType {
	if t := c.types.Get(v); t != nil && (t.Kind == graph.KindTensor || t.Kind == graph.KindSparseTensor) {
		return t.Elem
	}
	return graph.Undefined
}

// decide sets n's state, and records why a node with float32 tensors
// stays float32.
func (c *fp16Converter) decide(n *graph.Node) {
	touches := false
	for _, v := range slices.Concat(n.Inputs(), n.Outputs()) {
		touches = touches || v != nil && c.elem(v) == graph.Float
	}
	switch {
	case !touches:
		c.state[n] = stateUntouched
		return
	case n.OpType == "Constant" && n.Domain == "" && n.Output(0).ConstantTensor() != nil:
		c.state[n] = stateConstant
		return
	case fp16Neutral[n.OpType] && (n.Domain == "" || n.Domain == "ai.onnx"):
		c.state[n] = stateNeutral
		return
	case len(n.Subgraphs()) > 0:
		c.state[n] = stateKept
		c.rep.Kept = append(c.rep.Kept, KeptNode{Node: n.Name, Op: n.OpType,
			Reason: "holds subgraphs: its float inputs and outputs stay float32, its bodies' nodes are converted inside"})
		return
	}
	if why, ranged := c.keepReason(n); why != "" {
		c.state[n] = stateKept
		if ranged {
			c.rep.KeptForRange++
		}
		c.rep.Kept = append(c.rep.Kept, KeptNode{Node: n.Name, Op: n.OpType, Reason: why})
		return
	}
	c.state[n] = stateConverted
	c.rep.Converted++
	for _, v := range n.Outputs() {
		if v != nil && c.elem(v) == graph.Float {
			c.home[v] = graph.Float16
		}
	}
}

// keepReason says why n must stay float32, or "" when it may convert;
// ranged says the reason is a measured range.
func (c *fp16Converter) keepReason(n *graph.Node) (why string, ranged bool) {
	why = c.ruleReason(n)
	if why != "" {
		return why, false
	}
	why = c.rangeReason(n)
	return why, why != ""
}

// ruleReason says which op rule keeps n float32, or "".
func (c *fp16Converter) ruleReason(n *graph.Node) string {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return fmt.Sprintf("domain %q: optc has no float16 rules for it", n.Domain)
	}
	for i, re := range c.keep {
		if re.MatchString(n.Name) || re.MatchString(n.OpType) {
			return fmt.Sprintf("matches keep-float32 pattern %q", c.pats[i])
		}
	}
	if why, ok := c.block[n.OpType]; ok {
		return "blocked: " + why
	}
	rule, ok := fp16Schema[n.OpType]
	switch {
	case !ok:
		return "optc has no float16 rule for this operator"
	case c.opset < rule.since:
		return fmt.Sprintf("its schema admits float16 from opset %d, the model imports opset %d", rule.since, c.opset)
	}
	for _, v := range slices.Concat(n.Inputs(), n.Outputs()) {
		if v != nil && c.elem(v) == graph.Undefined {
			return fmt.Sprintf("the element type of %q is unknown", v.Name)
		}
	}
	for i, v := range n.Inputs() {
		if v == nil || c.elem(v) != graph.Float || slices.Contains(rule.float32, i) {
			continue
		}
		if t := v.ConstantTensor(); t != nil {
			if x, err := maxAbs(t); err != nil {
				return fmt.Sprintf("constant %q cannot be read: %v", v.Name, err)
			} else if x > float16Max {
				return fmt.Sprintf("constant %q holds |x| = %g, beyond float16's %d", v.Name, x, float16Max)
			}
		}
	}
	return ""
}

// rangeReason says which measured value n reads or writes beyond
// FP16SafeMax, or "".
func (c *fp16Converter) rangeReason(n *graph.Node) string {
	if len(c.ranges) == 0 {
		return ""
	}
	for i, v := range slices.Concat(n.Inputs(), n.Outputs()) {
		if v == nil || c.elem(v) != graph.Float {
			continue
		}
		r, ok := c.ranges[v.Name]
		if !ok || magnitude(r) <= FP16SafeMax {
			continue
		}
		role := "reads"
		if i >= len(n.Inputs()) {
			role = "writes"
		}
		return fmt.Sprintf("%s %q, measured in [%.6g, %.6g], beyond float16's safe %g (65504/4)", role, v.Name, r.Min, r.Max, float64(FP16SafeMax))
	}
	return ""
}

// maxAbs is the largest magnitude in t (NaN and infinities, which float16
// holds as they are, aside).
func maxAbs(t *graph.Tensor) (float64, error) {
	vals, err := t.Float32s()
	if err != nil {
		return 0, err
	}
	m := 0.0
	for _, v := range vals {
		if a := math.Abs(float64(v)); a > m && !math.IsInf(a, 0) {
			m = a
		}
	}
	return m, nil
}

// want is the element type input i of n must have after the conversion,
// or Undefined when any float type will do (or the input is not a float32
// tensor at all).
func (c *fp16Converter) want(n *graph.Node, i int) graph.DataType {
	v := n.Input(i)
	if v == nil || c.elem(v) != graph.Float {
		return graph.Undefined
	}
	switch c.state[n] {
	case stateNeutral:
		return graph.Undefined
	case stateConverted:
		if slices.Contains(fp16Schema[n.OpType].float32, i) {
			return graph.Float
		}
		return graph.Float16
	}
	return graph.Float
}

// convertConstants stores as float16 every float32 constant that only
// float16 inputs read (a Cast would undo nothing for the others: they
// keep their float32 data).
func (c *fp16Converter) convertConstants(graphs []*graph.Graph) error {
	var consts []*graph.Value
	for _, g := range graphs {
		consts = append(consts, g.Initializers...)
		for _, n := range g.Nodes {
			if c.state[n] == stateConstant {
				consts = append(consts, n.Output(0))
			}
		}
	}
	for _, v := range consts {
		t := v.ConstantTensor()
		if t == nil || t.DType != graph.Float {
			continue
		}
		c.rep.ConstantBytesBefore += t.ByteSize()
		if !c.onlyHalfReaders(v) {
			c.rep.ConstantsKept++
			c.rep.ConstantBytesAfter += t.ByteSize()
			continue
		}
		h, flushed, err := toHalf(t)
		if err != nil {
			return fmt.Errorf("float16: constant %q: %w", v.Name, err)
		}
		if v.Const != nil {
			v.Const = h
		} else {
			v.Producer().SetAttr(&graph.Attr{Name: "value", Type: graph.AttrTensor, Tensor: h})
		}
		c.retype(v, graph.Float16)
		c.home[v] = graph.Float16
		c.rep.ConstantsConverted++
		c.rep.FlushedToZero += flushed
		c.rep.ConstantBytesAfter += h.ByteSize()
	}
	return nil
}

// onlyHalfReaders reports whether v is read, only by inputs that want
// float16 or take any type (in its graph or the bodies inside it), and is
// no output of any graph.
func (c *fp16Converter) onlyHalfReaders(v *graph.Value) bool {
	if v.IsReturned() {
		return false
	}
	half := false
	for _, u := range v.Uses() {
		switch c.want(u.Node, u.Index) {
		case graph.Float16:
			half = true
		case graph.Float:
			return false
		}
	}
	return half
}

// castTo is the attribute set of a Cast to one type, for kernels.Eval.
type castTo graph.DataType

func (c castTo) Attr(name string) *graph.Attr {
	if name != "to" {
		return nil
	}
	return &graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(c)}
}

// toHalf rounds t to float16 (to nearest, ties to even, by the Cast
// kernel) and counts the nonzero values that became zero.
func toHalf(t *graph.Tensor) (*graph.Tensor, int64, error) {
	out, err := kernels.Eval("Cast", "", 13, castTo(graph.Float16), []*graph.Tensor{t})
	if err != nil {
		return nil, 0, err
	}
	h := out[0]
	h.Name, h.DocString = t.Name, t.DocString
	before, err := t.Float32s()
	if err != nil {
		return nil, 0, err
	}
	after, err := h.Float32s()
	if err != nil {
		return nil, 0, err
	}
	var flushed int64
	for i, x := range before {
		if x != 0 && after[i] == 0 {
			flushed++
		}
	}
	return h, flushed, nil
}

// retype changes v's declared element type, if it has a declaration.
func (c *fp16Converter) retype(v *graph.Value, dt graph.DataType) {
	if v.Type != nil && v.Type.Kind == graph.KindTensor {
		t := v.Type.Clone()
		t.Elem = dt
		v.Type = t
	}
}

// convertOutputs gives the float16 outputs of g's converted nodes their
// type; a value some graph returns (g's outputs, or a body returning an
// outer value) keeps its name and float32 type behind a Cast from a new
// float16 value.
func (c *fp16Converter) convertOutputs(g *graph.Graph) error {
	for _, n := range slices.Clone(g.Nodes) {
		if c.state[n] != stateConverted {
			continue
		}
		for i, v := range n.Outputs() {
			if v == nil || c.home[v] != graph.Float16 {
				continue
			}
			if !v.IsReturned() {
				c.retype(v, graph.Float16)
				continue
			}
			half, err := c.newTwin(g, v, graph.Float16, v.Name+"_fp16")
			if err != nil {
				return err
			}
			if err := n.SetOutput(i, half); err != nil {
				return fmt.Errorf("float16: node %s: %w", n, err)
			}
			if err := c.addCast(g, half, v, graph.Float, nodeAfter(n)); err != nil {
				return err
			}
			c.home[half], c.home[v] = graph.Float16, graph.Float
			c.twins[twinKey{nil, v, graph.Float16}] = half
			c.twins[twinKey{nil, half, graph.Float}] = v
		}
	}
	return nil
}

// nodeAfter returns the node following n in its graph, or nil when n is
// last.
func nodeAfter(n *graph.Node) *graph.Node {
	nodes := n.Graph().Nodes
	i := slices.Index(nodes, n)
	if i+1 < len(nodes) {
		return nodes[i+1]
	}
	return nil
}

// insertCasts makes every input of g's nodes read the type it wants,
// through one Cast per value and type in g, placed before its first
// reader there (a body reading an outer value casts it inside the body).
func (c *fp16Converter) insertCasts(g *graph.Graph) error {
	for _, n := range slices.Clone(g.Nodes) {
		for i, v := range n.Inputs() {
			dt := c.want(n, i)
			if dt == graph.Undefined || c.typeOf(v) == dt {
				continue
			}
			tw, ok := c.twins[twinKey{nil, v, dt}]
			if !ok {
				tw, ok = c.twins[twinKey{g, v, dt}]
			}
			if !ok {
				var err error
				if tw, err = c.newTwin(g, v, dt, v.Name+suffix(dt)); err != nil {
					return err
				}
				if err := c.addCast(g, v, tw, dt, n); err != nil {
					return err
				}
				c.twins[twinKey{g, v, dt}] = tw
			}
			n.SetInput(i, tw)
		}
	}
	return nil
}

// typeOf is the element type an originally float32 value has now.
func (c *fp16Converter) typeOf(v *graph.Value) graph.DataType {
	if dt, ok := c.home[v]; ok {
		return dt
	}
	return graph.Float
}

func suffix(dt graph.DataType) string {
	if dt == graph.Float16 {
		return "_fp16"
	}
	return "_fp32"
}

// newTwin creates a value of g named after prefix holding v's tensor as
// dt, declared with v's inferred shape.
func (c *fp16Converter) newTwin(g *graph.Graph, v *graph.Value, dt graph.DataType, prefix string) (*graph.Value, error) {
	tw, err := g.NewValue(g.UniqueName(prefix))
	if err != nil {
		return nil, fmt.Errorf("float16: %w", err)
	}
	var shape graph.Shape
	if t := c.types.Get(v); t != nil && t.Shape != nil {
		shape = slices.Clone(t.Shape)
	}
	tw.Type = graph.TensorType(dt, shape)
	g.ValueInfo = append(g.ValueInfo, tw)
	c.home[tw] = dt
	return tw, nil
}

// freeNodeName is name, or name with a suffix when a node of g has it
// already, and marks it used: ONNX Runtime refuses two nodes of one name
// in a graph.
func (c *fp16Converter) freeNodeName(g *graph.Graph, name string) string {
	if c.nodeNames == nil {
		c.nodeNames = map[*graph.Graph]map[string]bool{}
	}
	used := c.nodeNames[g]
	if used == nil {
		used = map[string]bool{}
		for _, n := range g.Nodes {
			used[n.Name] = true
		}
		c.nodeNames[g] = used
	}
	free := name
	for i := 1; used[free]; i++ {
		free = name + "_cast" + strconv.Itoa(i)
	}
	used[free] = true
	return free
}

// addCast inserts Cast(from) -> to into g before anchor (at the end when
// nil), named after its output.
func (c *fp16Converter) addCast(g *graph.Graph, from, to *graph.Value, dt graph.DataType, anchor *graph.Node) error {
	var n *graph.Node
	var err error
	if anchor == nil {
		n, err = g.AddNode("Cast", []*graph.Value{from}, []*graph.Value{to})
	} else {
		n, err = g.InsertNodeBefore(anchor, "Cast", []*graph.Value{from}, []*graph.Value{to})
	}
	if err != nil {
		return fmt.Errorf("float16: graph %q: cast of %q: %w", g.Name, from.Name, err)
	}
	n.Name = c.freeNodeName(g, to.Name)
	n.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(dt)})
	c.rep.Casts++
	return nil
}
