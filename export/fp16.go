package export

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"optc/graph"
	"optc/kernels"
	"optc/shapes"
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
// float16 at the model's opset, and nodes reading a constant beyond
// ±65504 stay float32 (docs/tensorrt.md has the rules). Graph inputs and
// outputs keep their names and stay float32: Casts convert at the
// borders, one per value and direction, named after the value with a
// _fp16 or _fp32 suffix. Declared types follow. Models with subgraphs
// (If, Loop, Scan) are refused, as are bad patterns, before anything
// changes: the bodies read outer values whose type would change.
func ToFloat16(m *graph.Model, opts FP16Options) (*FP16Report, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("float16: the model has no graph")
	}
	keep, err := compileAnchored(opts.KeepFloat32)
	if err != nil {
		return nil, err
	}
	g := m.Graph
	for _, n := range g.Nodes {
		if len(n.Subgraphs()) > 0 {
			return nil, fmt.Errorf("float16: node %s holds subgraphs; converting If/Loop/Scan bodies is not supported", n)
		}
	}
	inferred, err := shapes.Infer(m)
	if err != nil {
		return nil, fmt.Errorf("float16: %w", err)
	}
	c := &fp16Converter{
		g:     g,
		opset: m.OpsetVersion(""),
		types: inferred.Types,
		keep:  keep,
		pats:  opts.KeepFloat32,
		block: blockReasons(opts.Block),
		state: map[*graph.Node]nodeState{},
		home:  map[*graph.Value]graph.DataType{},
		twins: map[twinKey]*graph.Value{},
		rep:   &FP16Report{},
	}
	for _, n := range g.Nodes {
		c.decide(n)
	}
	if err := c.convertConstants(); err != nil {
		return nil, err
	}
	if err := c.convertOutputs(); err != nil {
		return nil, err
	}
	if err := c.insertCasts(); err != nil {
		return nil, err
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("float16: the converted model is invalid: %w", err)
	}
	return c.rep, nil
}

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

// twinKey names the Cast of value v to type dt.
type twinKey struct {
	v  *graph.Value
	dt graph.DataType
}

type fp16Converter struct {
	g     *graph.Graph
	opset int64
	types map[*graph.Value]*graph.Type // inferred, before any change
	keep  []*regexp.Regexp
	pats  []string // keep's source patterns, for the report
	block map[string]string
	state map[*graph.Node]nodeState
	// home is the element type each originally float32 value has after
	// the conversion (Float16 or Float).
	home  map[*graph.Value]graph.DataType
	twins map[twinKey]*graph.Value
	rep   *FP16Report
	// nodeNames are the node names in use, so that a Cast named after its
	// output does not take the name of the node that produced it before.
	nodeNames map[string]bool
}

// elem is v's element type as inferred before the conversion (Undefined
// when unknown).
func (c *fp16Converter) elem(v *graph.Value) graph.DataType {
	if t := c.types[v]; t != nil && (t.Kind == graph.KindTensor || t.Kind == graph.KindSparseTensor) {
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
	}
	if why := c.keepReason(n); why != "" {
		c.state[n] = stateKept
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

// keepReason says why n must stay float32, or "" when it may convert.
func (c *fp16Converter) keepReason(n *graph.Node) string {
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
func (c *fp16Converter) convertConstants() error {
	consts := slices.Clone(c.g.Initializers)
	for _, n := range c.g.Nodes {
		if c.state[n] == stateConstant {
			consts = append(consts, n.Output(0))
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
// float16 or take any type, and is no graph output.
func (c *fp16Converter) onlyHalfReaders(v *graph.Value) bool {
	if c.g.IsOutput(v) {
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

// convertOutputs gives the float16 outputs of converted nodes their type;
// a graph output keeps its name and float32 type behind a Cast from a new
// float16 value.
func (c *fp16Converter) convertOutputs() error {
	for _, n := range slices.Clone(c.g.Nodes) {
		if c.state[n] != stateConverted {
			continue
		}
		for i, v := range n.Outputs() {
			if v == nil || c.home[v] != graph.Float16 {
				continue
			}
			if !c.g.IsOutput(v) {
				c.retype(v, graph.Float16)
				continue
			}
			half, err := c.newTwin(v, graph.Float16, v.Name+"_fp16")
			if err != nil {
				return err
			}
			if err := n.SetOutput(i, half); err != nil {
				return fmt.Errorf("float16: node %s: %w", n, err)
			}
			next := c.nodeAfter(n)
			if err := c.addCast(half, v, graph.Float, next); err != nil {
				return err
			}
			c.home[half], c.home[v] = graph.Float16, graph.Float
			c.twins[twinKey{v, graph.Float16}] = half
			c.twins[twinKey{half, graph.Float}] = v
		}
	}
	return nil
}

// nodeAfter returns the node following n in g, or nil when n is last.
func (c *fp16Converter) nodeAfter(n *graph.Node) *graph.Node {
	i := slices.Index(c.g.Nodes, n)
	if i+1 < len(c.g.Nodes) {
		return c.g.Nodes[i+1]
	}
	return nil
}

// insertCasts makes every node input read the type it wants, through
// one Cast per value and type, placed before its first reader.
func (c *fp16Converter) insertCasts() error {
	for _, n := range slices.Clone(c.g.Nodes) {
		for i, v := range n.Inputs() {
			dt := c.want(n, i)
			if dt == graph.Undefined || c.typeOf(v) == dt {
				continue
			}
			tw, ok := c.twins[twinKey{v, dt}]
			if !ok {
				var err error
				if tw, err = c.newTwin(v, dt, v.Name+suffix(dt)); err != nil {
					return err
				}
				if err := c.addCast(v, tw, dt, n); err != nil {
					return err
				}
				c.twins[twinKey{v, dt}] = tw
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

// newTwin creates a value named after prefix holding v's tensor as dt,
// declared with v's inferred shape.
func (c *fp16Converter) newTwin(v *graph.Value, dt graph.DataType, prefix string) (*graph.Value, error) {
	tw, err := c.g.NewValue(c.g.UniqueName(prefix))
	if err != nil {
		return nil, fmt.Errorf("float16: %w", err)
	}
	var shape graph.Shape
	if t := c.types[v]; t != nil && t.Shape != nil {
		shape = slices.Clone(t.Shape)
	}
	tw.Type = graph.TensorType(dt, shape)
	c.g.ValueInfo = append(c.g.ValueInfo, tw)
	c.home[tw] = dt
	return tw, nil
}

// freeNodeName is name, or name with a suffix when a node has it already,
// and marks it used: ONNX Runtime refuses two nodes of one name.
func (c *fp16Converter) freeNodeName(name string) string {
	if c.nodeNames == nil {
		c.nodeNames = map[string]bool{}
		for _, n := range c.g.Nodes {
			c.nodeNames[n.Name] = true
		}
	}
	free := name
	for i := 1; c.nodeNames[free]; i++ {
		free = name + "_cast" + strconv.Itoa(i)
	}
	c.nodeNames[free] = true
	return free
}

// addCast inserts Cast(from) -> to before anchor (at the end when nil),
// named after its output.
func (c *fp16Converter) addCast(from, to *graph.Value, dt graph.DataType, anchor *graph.Node) error {
	var n *graph.Node
	var err error
	if anchor == nil {
		n, err = c.g.AddNode("Cast", []*graph.Value{from}, []*graph.Value{to})
	} else {
		n, err = c.g.InsertNodeBefore(anchor, "Cast", []*graph.Value{from}, []*graph.Value{to})
	}
	if err != nil {
		return fmt.Errorf("float16: cast of %q: %w", from.Name, err)
	}
	n.Name = c.freeNodeName(to.Name)
	n.SetAttr(&graph.Attr{Name: "to", Type: graph.AttrInt, Int: int64(dt)})
	c.rep.Casts++
	return nil
}
