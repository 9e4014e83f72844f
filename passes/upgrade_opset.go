package passes

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/optc-dev/optc/graph"
)

// upgradeOpset is UpgradeOpset as a pass. No -O level runs it: it changes
// how the model is written, not what it computes, only where a later
// stage needs a newer opset (ptq: per-channel Q/DQ needs 13) or when
// named (--passes upgrade-opset). A model already at the target or newer
// is left alone.
var upgradeOpset = &Pass{
	Name:   "upgrade-opset",
	Doc:    "rewrite default-domain nodes from opset 9..12 to 13 (on request: ptq, --passes)",
	Level:  OnRequest,
	Form:   GraphWide,
	Shapes: DeclaredShapes | InferredShapes,
	Run:    runUpgradeOpset,
}

// DefaultUpgradeOpset is the opset upgrade-opset moves a model to.
const DefaultUpgradeOpset = 13

func runUpgradeOpset(c *Context) (Stats, error) {
	target := c.Opset
	if target == 0 {
		target = DefaultUpgradeOpset
	}
	if c.Model.OpsetVersion("") >= target {
		return Stats{}, nil
	}
	n, err := upgradeOpsetIn(c, target)
	return Stats{Rewritten: n}, err
}

// UpgradeOpset rewrites the default-domain nodes of m (main graph and
// subgraphs) from the model's default opset to target, then sets the opset
// import. It supports sources 9..12 and targets up to 13. Only operators
// whose signature and semantics it knows across the range are accepted:
// any other default-domain operator makes it fail, naming the node, before
// anything is changed. changed counts nodes rewritten or added.
//
// It is the upgrade-opset pass of the table (on request); the quantize
// driver calls it because QuantizeLinear/DequantizeLinear with
// per-channel axes need opset 13.
func UpgradeOpset(m *graph.Model, target int64) (changed int, err error) {
	// Outside the driver no pass runs, so the analyses are handed out
	// unchecked.
	return upgradeOpsetIn(&Context{Model: m}, target)
}

// upgradeOpsetIn is UpgradeOpset reading the types c hands out.
func upgradeOpsetIn(c *Context, target int64) (changed int, err error) {
	m := c.Model
	if m == nil || m.Graph == nil {
		return 0, fmt.Errorf("upgrade opset: the model has no graph")
	}
	from := m.OpsetVersion("")
	if from == 0 {
		return 0, fmt.Errorf("upgrade opset: the model imports no default-domain opset")
	}
	if target == from {
		return 0, nil
	}
	if target < from {
		return 0, fmt.Errorf("upgrade opset: target %d is below the model's opset %d (downgrades are not supported)", target, from)
	}
	if from < minUpgradeSource || target > maxUpgradeTarget {
		return 0, fmt.Errorf("upgrade opset: %d -> %d is not supported (sources %d..%d, targets up to %d)",
			from, target, minUpgradeSource, maxUpgradeTarget-1, maxUpgradeTarget)
	}
	// Types are read before any rewrite, at the source opset. When
	// inference fails the declared types are used.
	u := &upgrader{m: m, from: from, to: target, types: c.Shapes(), declared: c.Declared()}
	// Plan every node first, so that a refused node leaves m untouched.
	var plans []func() error
	var refused []string
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if n.Domain != "" && n.Domain != "ai.onnx" {
				continue
			}
			p, err := u.plan(n)
			if err != nil {
				refused = append(refused, err.Error())
				continue
			}
			if p != nil {
				plans = append(plans, p)
			}
		}
	})
	if len(refused) > 0 {
		return 0, fmt.Errorf("upgrade opset %d -> %d: %s", from, target, strings.Join(refused, "; "))
	}
	for _, p := range plans {
		if err := p(); err != nil {
			return u.changed, fmt.Errorf("upgrade opset %d -> %d: %w", from, target, err)
		}
	}
	for i, o := range m.Opsets {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			m.Opsets[i].Version = target
		}
	}
	// Opset 13 needs IR version 7 (10: 5, 11: 6, 12: 7).
	if ir := irForOpset(target); m.IRVersion < ir {
		m.IRVersion = ir
	}
	return u.changed, nil
}

const (
	minUpgradeSource = 9
	maxUpgradeTarget = 13
)

func irForOpset(v int64) int64 {
	switch {
	case v >= 12:
		return 7
	case v == 11:
		return 6
	case v == 10:
		return 5
	}
	return 4
}

// unchangedOps are default-domain operators whose inputs, outputs,
// attributes and inference semantics are the same (or only widened: more
// types, negative axes allowed, new optional attributes whose defaults
// keep the old behaviour) from opset 9 to 13.
var unchangedOps = map[string]bool{
	"Abs": true, "Acos": true, "Add": true, "And": true, "ArgMax": true, "ArgMin": true,
	"Asin": true, "Atan": true, "AveragePool": true, "BatchNormalization": true,
	"Cast": true, "Ceil": true, "Concat": true, "Constant": true, "ConstantOfShape": true,
	"Conv": true, "ConvTranspose": true, "Cos": true, "DepthToSpace": true, "Div": true,
	"Elu": true, "Equal": true, "Erf": true, "Exp": true, "Expand": true, "Flatten": true,
	"Floor": true, "Gather": true, "Gemm": true, "GlobalAveragePool": true,
	"GlobalMaxPool": true, "Greater": true, "HardSigmoid": true, "Identity": true, "If": true,
	"InstanceNormalization": true, "LeakyRelu": true, "Less": true, "Log": true,
	"LRN": true, "MatMul": true, "Max": true, "MaxPool": true, "Mean": true, "Min": true,
	"Mul": true, "Neg": true, "Not": true, "Or": true, "Pow": true, "PRelu": true,
	"Reciprocal": true, "ReduceL1": true, "ReduceL2": true, "ReduceLogSum": true,
	"ReduceLogSumExp": true, "ReduceMax": true, "ReduceMean": true, "ReduceMin": true,
	"ReduceProd": true, "ReduceSumSquare": true, "Relu": true, "Reshape": true,
	"Selu": true, "Shape": true, "Sigmoid": true, "Sign": true, "Sin": true, "Size": true,
	"Softplus": true, "Softsign": true, "SpaceToDepth": true, "Sqrt": true, "Sub": true,
	"Sum": true, "Tan": true, "Tanh": true, "Tile": true, "Transpose": true, "Where": true,
	"Xor": true,
}

// Version at which each rewritten operator's signature changes.
var upgradeSince = map[string]int64{
	"Slice": 10, "Upsample": 10, "Resize": 11,
	"Clip": 11, "Pad": 11,
	"Dropout": 12,
	"Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13, "Split": 13,
	"Softmax": 13, "LogSoftmax": 13, "Hardmax": 13,
}

type upgrader struct {
	m        *graph.Model
	from, to int64
	types    valueShapes
	declared declaredTypes
	changed  int
}

// crosses reports whether the upgrade passes the version v at which an
// operator changed.
func (u *upgrader) crosses(v int64) bool { return u.from < v && u.to >= v }

func (u *upgrader) typeOf(v *graph.Value) *graph.Type {
	if v == nil {
		return nil
	}
	if t := u.types.Get(v); t != nil {
		return t
	}
	if t := u.declared.typ(v); t != nil {
		return t
	}
	if c := v.ConstantTensor(); c != nil {
		return &graph.Type{Kind: graph.KindTensor, Elem: c.DType, Shape: graph.StaticShape(c.Dims...)}
	}
	return nil
}

func (u *upgrader) plan(n *graph.Node) (func() error, error) {
	op := n.OpType
	if v, ok := upgradeSince[op]; ok {
		if op == "Upsample" && u.from >= 10 {
			return nil, errf(n, "Upsample is deprecated from opset 10; not supported")
		}
		if !u.crosses(v) {
			return nil, nil
		}
		switch op {
		case "Slice":
			return u.planSlice(n)
		case "Upsample", "Resize":
			return u.planResize(n)
		case "Clip":
			return u.planClip(n)
		case "Pad":
			return u.planPad(n)
		case "Dropout":
			return u.planDropout(n)
		case "Squeeze", "Unsqueeze", "ReduceSum":
			return u.planAttrToInput(n, "axes", 1, op == "Unsqueeze")
		case "Split":
			return u.planAttrToInput(n, "split", 1, false)
		case "Softmax", "LogSoftmax", "Hardmax":
			return u.planSoftmax(n)
		}
	}
	if unchangedOps[op] {
		return nil, nil
	}
	return nil, errf(n, "operator %s is not known to keep its signature from opset %d to %d; refusing to guess", op, u.from, u.to)
}

// initializer adds t to g as an initializer named after prefix and
// returns it.
func (u *upgrader) initializer(g *graph.Graph, prefix string, t *graph.Tensor) (*graph.Value, error) {
	t.Name = g.UniqueName(prefix)
	return g.AddInitializer(t)
}

// int64sInitializer adds vals to g as a 1-D int64 initializer: an int-list
// attribute that became an input (Slice's starts, Pad's pads, axes).
func (u *upgrader) int64sInitializer(g *graph.Graph, prefix string, vals []int64) (*graph.Value, error) {
	t, err := graph.NewInt64Tensor("", []int64{int64(len(vals))}, vals)
	if err != nil {
		return nil, err
	}
	return u.initializer(g, prefix, t)
}

// scalarInitializer adds a scalar of dt holding f to g: a float attribute
// that became an input (Clip's min and max, Pad's value).
func (u *upgrader) scalarInitializer(g *graph.Graph, prefix string, dt graph.DataType, f float32) (*graph.Value, error) {
	t, err := scalarTensor(dt, f)
	if err != nil {
		return nil, err
	}
	return u.initializer(g, prefix, t)
}

// scalarTensor makes a scalar of dtype holding f.
func scalarTensor(dt graph.DataType, f float32) (*graph.Tensor, error) {
	var b []byte
	switch dt {
	case graph.Float:
		b = binary.LittleEndian.AppendUint32(nil, math.Float32bits(f))
	case graph.Double:
		b = binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(f)))
	default:
		return nil, fmt.Errorf("element type %s not supported", dt)
	}
	return graph.NewTensor("", dt, []int64{}, b)
}

// rewritten ends a rewrite of n: it drops the attributes the new
// signature has no place for (moved to inputs, or meaningless there) and
// counts n changed.
func (u *upgrader) rewritten(n *graph.Node, dropped ...string) error {
	n.Attrs = slices.DeleteFunc(n.Attrs, func(a *graph.Attr) bool { return slices.Contains(dropped, a.Name) })
	u.changed++
	return nil
}

// planSlice: Slice-1 (starts, ends, axes attributes) -> Slice-10 inputs.
func (u *upgrader) planSlice(n *graph.Node) (func() error, error) {
	starts, ends, axes := n.AttrInts("starts"), n.AttrInts("ends"), n.AttrInts("axes")
	if n.Attr("starts") == nil || n.Attr("ends") == nil || len(starts) != len(ends) ||
		(n.Attr("axes") != nil && len(axes) != len(starts)) || len(n.Inputs()) != 1 {
		return nil, errf(n, "Slice-1 with malformed starts/ends/axes")
	}
	return func() error {
		g := n.Graph()
		vals := [][]int64{starts, ends}
		names := []string{"starts", "ends"}
		if n.Attr("axes") != nil {
			vals, names = append(vals, axes), append(names, "axes")
		}
		for i, vs := range vals {
			v, err := u.int64sInitializer(g, n.Name+"_"+names[i], vs)
			if err != nil {
				return err
			}
			n.SetInput(i+1, v)
		}
		return u.rewritten(n, "starts", "ends", "axes")
	}, nil
}

// planClip: Clip-6 (min, max attributes, defaults -/+ float max) -> Clip-11
// optional inputs.
func (u *upgrader) planClip(n *graph.Node) (func() error, error) {
	if len(n.Inputs()) != 1 {
		return nil, errf(n, "Clip-6 with %d inputs", len(n.Inputs()))
	}
	hasMin, hasMax := n.Attr("min") != nil, n.Attr("max") != nil
	if !hasMin && !hasMax {
		return nil, nil
	}
	dt := graph.Float
	if t := u.typeOf(n.Input(0)); t != nil && t.Elem != graph.Undefined {
		dt = t.Elem
	} else {
		return nil, errf(n, "Clip input element type unknown; cannot type min/max")
	}
	if dt != graph.Float && dt != graph.Double {
		return nil, errf(n, "Clip on %s not supported", dt)
	}
	lo, hi := n.AttrFloat("min", 0), n.AttrFloat("max", 0)
	return func() error {
		g := n.Graph()
		if hasMin {
			v, err := u.scalarInitializer(g, n.Name+"_min", dt, lo)
			if err != nil {
				return err
			}
			n.SetInput(1, v)
		}
		if hasMax {
			v, err := u.scalarInitializer(g, n.Name+"_max", dt, hi)
			if err != nil {
				return err
			}
			if !hasMin {
				n.SetInput(1, nil)
			}
			n.SetInput(2, v)
		}
		return u.rewritten(n, "min", "max")
	}, nil
}

// planPad: Pad-2 (pads, value attributes) -> Pad-11 inputs.
func (u *upgrader) planPad(n *graph.Node) (func() error, error) {
	if n.Attr("pads") == nil || len(n.Inputs()) != 1 {
		return nil, errf(n, "Pad-2 without pads attribute")
	}
	pads := n.AttrInts("pads")
	hasValue := n.Attr("value") != nil
	val := n.AttrFloat("value", 0)
	dt := graph.Float
	if t := u.typeOf(n.Input(0)); t != nil && t.Elem != graph.Undefined {
		dt = t.Elem
	} else if hasValue && val != 0 {
		return nil, errf(n, "Pad input element type unknown; cannot type value")
	}
	if hasValue && val != 0 && dt != graph.Float && dt != graph.Double {
		return nil, errf(n, "Pad on %s with a value not supported", dt)
	}
	return func() error {
		g := n.Graph()
		v, err := u.int64sInitializer(g, n.Name+"_pads", pads)
		if err != nil {
			return err
		}
		n.SetInput(1, v)
		if hasValue && val != 0 {
			cv, err := u.scalarInitializer(g, n.Name+"_value", dt, val)
			if err != nil {
				return err
			}
			n.SetInput(2, cv)
		}
		return u.rewritten(n, "pads", "value")
	}, nil
}

// planDropout: Dropout-10 ratio attribute -> Dropout-12 input. In
// inference Dropout is the identity, so the ratio is dropped; a used mask
// output (typed differently across versions) is refused.
func (u *upgrader) planDropout(n *graph.Node) (func() error, error) {
	if m := n.Output(1); m != nil && (len(m.Uses()) > 0 || n.Graph().IsOutput(m)) {
		return nil, errf(n, "Dropout mask output is used; not supported")
	}
	return func() error {
		return u.rewritten(n, "ratio", "is_test")
	}, nil
}

// planAttrToInput moves an int-list attribute to int64 input idx
// (Squeeze/Unsqueeze/ReduceSum axes, Split split at 13).
func (u *upgrader) planAttrToInput(n *graph.Node, attr string, idx int, required bool) (func() error, error) {
	if len(n.Inputs()) > idx {
		return nil, errf(n, "%s already has %d inputs", n.OpType, len(n.Inputs()))
	}
	a := n.Attr(attr)
	if a == nil && required {
		return nil, errf(n, "%s without %s attribute", n.OpType, attr)
	}
	if a == nil {
		return nil, nil
	}
	if a.Type != graph.AttrInts {
		return nil, errf(n, "%s attribute %s is not a list of ints", n.OpType, attr)
	}
	vals := slices.Clone(a.Ints)
	return func() error {
		v, err := u.int64sInitializer(n.Graph(), n.Name+"_"+attr, vals)
		if err != nil {
			return err
		}
		n.SetInput(idx, v)
		return u.rewritten(n, attr)
	}, nil
}

// planSoftmax handles the change of Softmax/LogSoftmax/Hardmax at 13:
// before, the input is coerced to 2-D at axis (default 1) and normalised
// over the flattened tail; from 13 it is normalised over one axis
// (default -1). When axis is the last axis the two agree; otherwise the
// node becomes Flatten(axis) -> op(axis=-1) -> Reshape(Shape(x)).
func (u *upgrader) planSoftmax(n *graph.Node) (func() error, error) {
	axis := n.AttrInt("axis", 1)
	x := n.Input(0)
	rank := -1
	if t := u.typeOf(x); t != nil && t.Shape != nil {
		rank = len(t.Shape)
	}
	if rank >= 0 {
		a := axis
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a >= int64(max(rank, 1)) {
			return nil, errf(n, "%s axis %d out of range for rank %d", n.OpType, axis, rank)
		}
		if a == int64(rank)-1 || rank == 0 {
			return func() error {
				n.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: -1})
				u.changed++
				return nil
			}, nil
		}
	}
	if len(n.Outputs()) != 1 {
		return nil, errf(n, "%s with %d outputs", n.OpType, len(n.Outputs()))
	}
	return func() error {
		g := n.Graph()
		y := n.Output(0)
		base := n.Name
		if base == "" {
			base = strings.ToLower(n.OpType)
		}
		shape, err := g.NewValue(g.UniqueName(base + "_in_shape"))
		if err != nil {
			return err
		}
		flat, err := g.NewValue(g.UniqueName(base + "_flat"))
		if err != nil {
			return err
		}
		out2d, err := g.NewValue(g.UniqueName(base + "_2d"))
		if err != nil {
			return err
		}
		sn, err := g.InsertNodeBefore(n, "Shape", []*graph.Value{x}, []*graph.Value{shape})
		if err != nil {
			return err
		}
		sn.Name = g.UniqueName(base + "_shape")
		fn, err := g.InsertNodeBefore(n, "Flatten", []*graph.Value{x}, []*graph.Value{flat})
		if err != nil {
			return err
		}
		fn.Name = g.UniqueName(base + "_flatten")
		fn.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: axis})
		n.SetInput(0, flat)
		if err := n.SetOutput(0, out2d); err != nil {
			return err
		}
		n.SetAttr(&graph.Attr{Name: "axis", Type: graph.AttrInt, Int: -1})
		// The Reshape goes right after n.
		i := slices.Index(g.Nodes, n)
		rn, err := g.AddNode("Reshape", []*graph.Value{out2d, shape}, []*graph.Value{y})
		if err != nil {
			return err
		}
		rn.Name = g.UniqueName(base + "_reshape")
		g.Nodes = slices.Delete(g.Nodes, len(g.Nodes)-1, len(g.Nodes))
		g.Nodes = slices.Insert(g.Nodes, i+1, rn)
		if t := u.typeOf(x); t != nil && t.Elem != graph.Undefined {
			out2d.Type = &graph.Type{Kind: graph.KindTensor, Elem: t.Elem}
		}
		u.changed += 4
		return nil
	}, nil
}

// planResize handles Upsample-9 and Resize-10 -> Resize-11: inputs (X,
// scales) become (X, roi, scales). Opset 9/10 resizing uses asymmetric
// coordinates; nearest rounds down when upsampling (ONNX Runtime rounds up
// when downsampling), so nearest is accepted only with constant scales
// >= 1.
func (u *upgrader) planResize(n *graph.Node) (func() error, error) {
	if len(n.Inputs()) != 2 || n.Input(1) == nil {
		return nil, errf(n, "%s with %d inputs; want (X, scales)", n.OpType, len(n.Inputs()))
	}
	mode := n.AttrString("mode", "nearest")
	switch mode {
	case "nearest":
		c := n.Input(1).ConstantTensor()
		if c == nil {
			return nil, errf(n, "%s nearest with non-constant scales: rounding differs when downsampling; not supported", n.OpType)
		}
		s, err := c.Float32s()
		if err != nil {
			return nil, errf(n, "%s scales: %v", n.OpType, err)
		}
		for _, f := range s {
			if f < 1 {
				return nil, errf(n, "%s nearest downsampling (scale %g): rounding differs; not supported", n.OpType, f)
			}
		}
	case "linear":
	default:
		return nil, errf(n, "%s mode %q not supported", n.OpType, mode)
	}
	return func() error {
		g := n.Graph()
		roi, err := graph.NewFloat32Tensor("", []int64{0}, nil)
		if err != nil {
			return err
		}
		rv, err := u.initializer(g, n.Name+"_roi", roi)
		if err != nil {
			return err
		}
		scales := n.Input(1)
		n.SetInput(1, rv)
		n.SetInput(2, scales)
		n.SetOpType("Resize")
		n.SetAttr(&graph.Attr{Name: "mode", Type: graph.AttrString, String: []byte(mode)})
		n.SetAttr(&graph.Attr{Name: "coordinate_transformation_mode", Type: graph.AttrString, String: []byte("asymmetric")})
		if mode == "nearest" {
			n.SetAttr(&graph.Attr{Name: "nearest_mode", Type: graph.AttrString, String: []byte("floor")})
		}
		u.changed++
		return nil
	}, nil
}

// UpgradableOps lists the operators UpgradeOpset accepts, sorted.
func UpgradableOps() []string {
	var ops []string
	for op := range unchangedOps {
		ops = append(ops, op)
	}
	for op := range upgradeSince {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}
