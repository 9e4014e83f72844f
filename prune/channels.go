package prune

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/shapes"
)

// Channels removes output channels of Conv (group 1) and Gemm layers with
// constant float32 weights: the fraction ratio of each layer's channels
// (opts.PerLayer overrides it by node name; floor(ratio*M), keeping at least
// one) with the lowest L1 norm, and the matching input channels of
// everything that reads them, so that the model really gets smaller.
//
// The channels of a layer's output are followed through the ops that keep
// them one to one (BatchNormalization, elementwise activations, pools,
// Resize, depthwise Conv, Add/Sub/Mul/Div with a constant broadcast over the
// channel axis) to the layers that consume them (Conv weight axis 1, Gemm
// rows, Flatten then Gemm with a static spatial size). Where two computed
// values meet in an elementwise op (a residual Add, a squeeze-excite Mul),
// their channels are coupled: the layers producing them form one group,
// scored together (each layer's L1 norms divided by their mean, summed) and
// pruned with the same indices. A group whose channels reach anything else
// (Concat, Reshape, a graph output, an unknown op, a grouped Conv) is left
// alone and reported with the reason. Each group is applied all or nothing
// and checked with shape inference; a group that makes it contradict
// itself is undone.
//
// opts.Exclude leaves groups containing a named layer alone; opts.MinElements,
// when positive, leaves alone groups whose layers have fewer weight elements
// in all (zero means no minimum: a small layer's channels also shrink the
// layers that read them).
func Channels(m *graph.Model, ratio float64, opts Options) (*schema.PruneReport, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("prune channels: the model has no graph")
	}
	if ratio < 0 || ratio >= 1 {
		return nil, fmt.Errorf("prune channels: ratio %g is not in [0, 1)", ratio)
	}
	for name, r := range opts.PerLayer {
		if r < 0 || r >= 1 {
			return nil, fmt.Errorf("prune channels: ratio %g for %q is not in [0, 1)", r, name)
		}
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("prune channels: the model is invalid: %w", err)
	}
	rep := &schema.PruneReport{Method: Method{Kind: "channels", Ratio: ratio}.String(), ParamsBefore: totalParams(m)}
	inf, err := shapes.Infer(m)
	if err != nil {
		return nil, fmt.Errorf("prune channels: %w", err)
	}
	a := analyze(m.Graph, inf.Types)
	conflicts := len(inf.Conflicts)

	excluded := map[string]bool{}
	for _, e := range opts.Exclude {
		excluded[e] = true
	}
	var pruned []*graph.Node // layers pruned, for schema.PruneReport.Sparsity
	var replaced []replacement
	// Choose every group's channels from the weights as loaded, before any
	// slicing changes them, so that the order of groups does not matter.
	var plans []channelPlan
	for _, grp := range a.groups() {
		p, err := planGroup(grp, ratio, opts, excluded)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		grp, layers, removed := p.grp, p.layers, p.removed
		if removed > 0 {
			reps, err := a.slice(m, grp, &conflicts)
			if err != nil {
				return nil, err
			}
			if grp.reason != "" {
				removed = 0
			}
			replaced = append(replaced, reps...)
		}
		for i, s := range grp.sources {
			l := &layers[i]
			if grp.reason != "" {
				l.Skipped = grp.reason
			}
			l.Removed = removed
			if removed > 0 {
				l.After = zeros(s.node.Input(1).ConstantTensor())
				pruned = append(pruned, s.node)
			}
		}
		rep.Layers = append(rep.Layers, layers...)
	}
	for _, n := range a.ineligible {
		rep.Layers = append(rep.Layers, n)
	}
	if err := cleanup(m.Graph, replaced); err != nil {
		return nil, err
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("prune channels: the pruned model fails Verify (a bug): %w", err)
	}
	rep.ParamsAfter = totalParams(m)
	var z, n float64
	for _, nd := range pruned {
		t := nd.Input(1).ConstantTensor()
		c, _ := t.NumElements()
		z += zeros(t) * float64(c)
		n += float64(c)
	}
	if n > 0 {
		rep.Sparsity = z / n
	}
	return rep, nil
}

// channelPlan is what Channels decided for one channel group: its layers'
// report rows and how many channels it removes.
type channelPlan struct {
	grp     *group
	layers  []schema.PruneLayer
	removed int64
}

// planGroup decides a group's channels from its weights as loaded: the
// ratio (the smallest of its layers' per-layer ratios), exclusions, the
// minimum size, and which channels to keep.
func planGroup(grp *group, ratio float64, opts Options, excluded map[string]bool) (channelPlan, error) {
	layers := make([]schema.PruneLayer, len(grp.sources))
	r := 1.0
	var elems int64
	for i, s := range grp.sources {
		w := s.node.Input(1).ConstantTensor()
		n, _ := w.NumElements()
		elems += n
		lr := ratio
		if v, ok := opts.PerLayer[s.node.Name]; ok {
			lr = v
		}
		r = min(r, lr)
		layers[i] = schema.PruneLayer{Node: s.node.Name, Op: s.node.OpType, Weight: s.node.Input(1).Name,
			Params: n, Ratio: lr, Before: zeros(w), After: zeros(w)}
		if excluded[s.node.Name] || excluded[s.node.Input(1).Name] {
			grp.skip(fmt.Sprintf("excluded (%s)", s.node.Name))
		}
	}
	if grp.reason == "" && opts.MinElements > 0 && elems < opts.MinElements {
		grp.skip(fmt.Sprintf("%d weight elements, fewer than %d", elems, opts.MinElements))
	}
	if grp.reason == "" && r == 0 && len(opts.PerLayer) > 0 {
		grp.skip("ratio 0: kept whole by the per-layer ratios")
	}
	removed := int64(0)
	if grp.reason == "" {
		removed = removedChannels(grp.channels, r, opts.ChannelStep())
		if removed == 0 && int64(math.Floor(r*float64(grp.channels)+1e-9)) > 0 {
			grp.skip(fmt.Sprintf("%d channels: keeping a multiple of %d leaves none to remove", grp.channels, opts.ChannelStep()))
		}
	}
	if removed > 0 && opts.keep != nil {
		// Reconstruct prunes one group at a time, with channels it chose.
		keep, ok := opts.keep[grp.sources[0].node.Name]
		switch {
		case !ok:
			grp.skip("not in this step")
			removed = 0
		case int64(len(keep)) != grp.channels-removed:
			return channelPlan{}, fmt.Errorf("prune channels: %d channels to keep for %s, want %d", len(keep), grp.sources[0].node, grp.channels-removed)
		default:
			grp.keep = keep
		}
	} else if removed > 0 {
		keep, err := keepChannels(grp, removed)
		if err != nil {
			grp.skip("not pruned: " + err.Error())
			removed = 0
		}
		grp.keep = keep
	}
	return channelPlan{grp, layers, removed}, nil
}

// slice prunes grp's channels from the graph and checks shape inference
// still agrees (no more conflicts than *conflicts, which it updates); when
// it does not, the slicing is undone and grp says why it was not pruned.
// The error is one undoing failed with.
func (a *analysis) slice(m *graph.Model, grp *group, conflicts *int) ([]replacement, error) {
	undo, reps, err := a.apply(m.Graph, grp)
	if err == nil {
		after, ierr := shapes.Infer(m)
		switch {
		case ierr != nil:
			err = ierr
		case len(after.Conflicts) > *conflicts:
			err = fmt.Errorf("shape inference disagrees after slicing: %s", after.Conflicts[len(after.Conflicts)-1])
		default:
			*conflicts = len(after.Conflicts)
		}
	}
	if err != nil {
		if uerr := undo.run(); uerr != nil {
			return nil, fmt.Errorf("%w (after: %v)", uerr, err)
		}
		grp.skip("not pruned: " + err.Error())
		return nil, nil
	}
	return reps, nil
}

// source is a layer whose output channels may be removed.
type source struct {
	node *graph.Node
	gemm bool
}

// action is one change that removing channels of a group implies.
type action struct {
	kind  actionKind
	node  *graph.Node
	input int   // the constant input to slice
	axis  int   // its axis
	block int64 // Flatten then Gemm: elements per channel along axis
	rank  int   // binary ops: the rank of the channel-carrying operand
}

type actionKind uint8

const (
	actSliceInput actionKind = iota // slice node input `input` along axis (in blocks)
	actDepthwise                    // slice weight axis 0, bias, set group
	actBroadcast                    // slice a constant operand of a binary op if it spans the channels
)

// group is a set of coupled channels: the layers producing them, the
// values carrying them and what reads them.
type group struct {
	parent   *group
	channels int64
	sources  []*source
	actions  []action
	values   []*graph.Value         // carry the channels on axis 1
	flat     map[*graph.Value]int64 // Flatten outputs: elements per channel
	reason   string
	order    int
	keep     []int // channels kept, ascending
}

func (g *group) root() *group {
	for g.parent != nil {
		if g.parent.parent != nil {
			g.parent = g.parent.parent
		}
		g = g.parent
	}
	return g
}

func (g *group) skip(reason string) {
	g = g.root()
	if g.reason == "" {
		g.reason = reason
	}
}

// analysis maps the values of the main graph to the channel groups they
// carry.
type analysis struct {
	all        []*group
	of         map[*graph.Value]*group
	flat       map[*graph.Value]*group
	types      *graph.ValueTable[*graph.Type]
	ineligible []schema.PruneLayer
}

func (a *analysis) union(x, y *group) *group {
	x, y = x.root(), y.root()
	if x == y {
		return x
	}
	if y.order < x.order {
		x, y = y, x
	}
	y.parent = x
	if x.channels != y.channels {
		x.skip(fmt.Sprintf("coupled channels disagree in number (%d, %d)", x.channels, y.channels))
	}
	if x.reason == "" && y.reason != "" {
		x.reason = y.reason
	}
	x.sources = append(x.sources, y.sources...)
	x.actions = append(x.actions, y.actions...)
	x.values = append(x.values, y.values...)
	for v, b := range y.flat {
		x.flat[v] = b
	}
	return x
}

// groups returns the root groups with at least one source, in graph order.
func (a *analysis) groups() []*group {
	var out []*group
	for _, g := range a.all {
		if g.parent == nil && len(g.sources) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func (a *analysis) rank(v *graph.Value) int {
	if t := a.types.Get(v); t != nil && t.Kind == graph.KindTensor && t.Shape != nil {
		return len(t.Shape)
	}
	return -1
}

func (a *analysis) carry(v *graph.Value, g *group) {
	if v == nil {
		return
	}
	g = g.root()
	a.of[v] = g
	g.values = append(g.values, v)
}

// float32Const returns v's constant data when it is float32.
func float32Const(v *graph.Value) *graph.Tensor {
	if v == nil {
		return nil
	}
	t := v.ConstantTensor()
	if t == nil || t.DType != graph.Float {
		return nil
	}
	return t
}

// keepsChannels lists the ops whose first output carries the channels of
// their first input one to one.
var keepsChannels = map[string]bool{
	"Relu": true, "Clip": true, "LeakyRelu": true, "Sigmoid": true, "HardSigmoid": true,
	"HardSwish": true, "Tanh": true, "Elu": true, "Selu": true, "Softplus": true, "Identity": true,
	"MaxPool": true, "AveragePool": true, "GlobalAveragePool": true, "GlobalMaxPool": true,
	"Resize": true, "Upsample": true, "Dropout": true, "Neg": true, "Abs": true, "Sqrt": true,
	"Exp": true, "Erf": true, "Mish": true, "Gelu": true,
}

var binaryOps = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true}

// analyze walks the main graph in order, creating a group for each
// prunable layer and following its channels.
func analyze(g *graph.Graph, types *graph.ValueTable[*graph.Type]) *analysis {
	a := &analysis{of: map[*graph.Value]*group{}, flat: map[*graph.Value]*group{}, types: types}
	newGroup := func(c int64) *group {
		grp := &group{channels: c, flat: map[*graph.Value]int64{}, order: len(a.all)}
		a.all = append(a.all, grp)
		return grp
	}
	for _, n := range g.Nodes {
		a.node(n, newGroup)
	}
	// Whatever reads a carried value from elsewhere (a subgraph) or
	// returns it is not followed.
	for v, grp := range a.of {
		if v.IsReturned() {
			grp.skip(fmt.Sprintf("its channels reach the graph output %q", v.Name))
		}
		for _, u := range v.Uses() {
			if u.Node.Graph() != g {
				grp.skip(fmt.Sprintf("its channels are read in a subgraph (%s)", u.Node))
			}
		}
	}
	for v, grp := range a.flat {
		if v.IsReturned() {
			grp.skip(fmt.Sprintf("its channels reach the graph output %q", v.Name))
		}
	}
	return a
}

func (a *analysis) node(n *graph.Node, newGroup func(int64) *group) {
	ins := n.Inputs()
	// carried: which inputs carry channels (plain or flattened).
	carried := false
	for _, v := range ins {
		if v != nil && (a.of[v] != nil || a.flat[v] != nil) {
			carried = true
		}
	}
	stop := func(reason string) {
		for _, v := range ins {
			if v == nil {
				continue
			}
			if grp := a.of[v]; grp != nil {
				grp.skip(reason)
			}
			if grp := a.flat[v]; grp != nil {
				grp.skip(reason)
			}
		}
	}
	for i, v := range ins {
		if v != nil && a.flat[v] != nil && !(n.OpType == "Gemm" && n.Domain == "" && i == 0) {
			stop(fmt.Sprintf("flattened channels reach %s", n))
		}
	}
	if n.Domain != "" && carried {
		stop(fmt.Sprintf("its channels reach %s", n))
		return
	}
	in0 := n.Input(0)
	g0 := a.of[in0]
	switch {
	case n.Domain != "":
		return
	case n.OpType == "Conv":
		a.conv(n, g0, newGroup)
	case n.OpType == "Gemm":
		a.gemm(n, newGroup)
	case n.OpType == "BatchNormalization":
		a.batchNorm(n, g0, carried, stop)
	case keepsChannels[n.OpType]:
		a.keeps(n, g0, stop)
	case binaryOps[n.OpType] || n.OpType == "PRelu":
		a.binary(n, stop)
	case n.OpType == "Flatten":
		a.flatten(n, g0, stop)
	default:
		if carried {
			stop(fmt.Sprintf("its channels reach %s", n))
		}
	}
}

// batchNorm carries a BatchNormalization's channels, its parameters
// sliced with them.
func (a *analysis) batchNorm(n *graph.Node, g0 *group, carried bool, stop func(string)) {
	if g0 == nil {
		if carried {
			stop(fmt.Sprintf("its channels are a parameter of %s", n))
		}
		return
	}
	for i := 1; i <= 4; i++ {
		if t := float32Const(n.Input(i)); t == nil || len(t.Dims) != 1 || t.Dims[0] != g0.root().channels {
			stop(fmt.Sprintf("%s has a non-constant or odd parameter", n))
			return
		}
		g0.root().actions = append(g0.root().actions, action{kind: actSliceInput, node: n, input: i, axis: 0, block: 1})
	}
	a.carryFirst(n, g0, stop, "%s returns training statistics")
}

// carryFirst carries g0 through n's first output, or stops with why (a
// format of n) when another of n's outputs is in use: the channels would
// reach it unsliced.
func (a *analysis) carryFirst(n *graph.Node, g0 *group, stop func(string), why string) {
	if outputsUsed(n, 1) {
		stop(fmt.Sprintf(why, n))
		return
	}
	a.carry(n.Output(0), g0)
}

// keeps carries the channels through an op that keeps them (its other
// inputs constant parameters).
func (a *analysis) keeps(n *graph.Node, g0 *group, stop func(string)) {
	if g0 == nil {
		stop(fmt.Sprintf("its channels reach %s other than as data", n))
		return
	}
	ins := n.Inputs()
	for i := 1; i < len(ins); i++ {
		if ins[i] != nil && (a.of[ins[i]] != nil || !ins[i].IsConstant() && n.OpType != "Resize" && n.OpType != "Upsample") {
			stop(fmt.Sprintf("%s has a computed parameter", n))
			return
		}
	}
	if (n.OpType == "Resize" || n.OpType == "Upsample") && !resizeKeepsChannels(n) {
		stop(fmt.Sprintf("%s may resize the channel axis", n))
		return
	}
	a.carryFirst(n, g0, stop, "%s has a second output in use")
}

// flatten records a Flatten from the channel axis: the channels become
// blocks of the flattened axis.
func (a *analysis) flatten(n *graph.Node, g0 *group, stop func(string)) {
	if g0 == nil {
		return
	}
	in0 := n.Input(0)
	r := a.rank(in0)
	t := a.types.Get(in0)
	if n.AttrInt("axis", 1) != 1 || r < 2 {
		stop(fmt.Sprintf("%s does not flatten from the channel axis", n))
		return
	}
	block := int64(1)
	for _, d := range t.Shape[2:] {
		if d.Kind != graph.DimStatic {
			stop(fmt.Sprintf("%s flattens a spatial size that is not static", n))
			return
		}
		block *= d.Value
	}
	root := g0.root()
	root.flat[n.Output(0)] = block
	a.flat[n.Output(0)] = root
}

func outputsUsed(n *graph.Node, from int) bool {
	for i := from; i < len(n.Outputs()); i++ {
		if o := n.Output(i); o != nil && (len(o.Uses()) > 0 || o.IsReturned()) {
			return true
		}
	}
	return false
}

// resizeKeepsChannels reports whether a Resize/Upsample scales the channel
// axis by 1 and gives no sizes.
func resizeKeepsChannels(n *graph.Node) bool {
	var scales *graph.Value
	switch {
	case n.OpType == "Upsample" && len(n.Inputs()) >= 2:
		scales = n.Input(1)
	case n.OpType == "Upsample":
		s := n.Attr("scales")
		return s != nil && len(s.Floats) > 1 && s.Floats[1] == 1
	case len(n.Inputs()) >= 4 && n.Input(3) != nil:
		return false // sizes name the channel count
	case len(n.Inputs()) >= 3:
		scales = n.Input(2)
	}
	t := float32Const(scales)
	if t == nil {
		return false
	}
	f, err := t.Float32s()
	return err == nil && len(f) > 1 && f[1] == 1
}

func (a *analysis) conv(n *graph.Node, g0 *group, newGroup func(int64) *group) {
	w := float32Const(n.Input(1))
	bias := n.Input(2)
	okBias := bias == nil || float32Const(bias) != nil
	for i, v := range n.Inputs() {
		if i > 0 && v != nil && a.of[v] != nil {
			a.of[v].skip(fmt.Sprintf("its channels are a parameter of %s", n))
		}
	}
	grp := n.AttrInt("group", 1)
	switch {
	case w == nil || len(w.Dims) < 3 || !okBias:
		if g0 != nil {
			g0.skip(fmt.Sprintf("%s has a computed or non-float32 weight", n))
		}
		a.ineligible = append(a.ineligible, schema.PruneLayer{Node: n.Name, Op: n.OpType, Weight: n.Input(1).Name,
			Skipped: "weight or bias is not a constant float32 tensor"})
	case grp == 1:
		if g0 != nil {
			if w.Dims[1] != g0.root().channels {
				g0.skip(fmt.Sprintf("%s reads %d channels, not %d", n, w.Dims[1], g0.root().channels))
			}
			root := g0.root()
			root.actions = append(root.actions, action{kind: actSliceInput, node: n, input: 1, axis: 1, block: 1})
		}
		out := newGroup(w.Dims[0])
		out.sources = append(out.sources, &source{node: n})
		a.carry(n.Output(0), out)
	case grp == w.Dims[0] && w.Dims[1] == 1:
		// Depthwise: each output channel reads its own input channel.
		if g0 == nil {
			return
		}
		root := g0.root()
		if root.channels != grp {
			root.skip(fmt.Sprintf("depthwise %s has %d groups for %d channels", n, grp, root.channels))
		}
		root.actions = append(root.actions, action{kind: actDepthwise, node: n})
		a.carry(n.Output(0), root)
	default:
		if g0 != nil {
			g0.skip(fmt.Sprintf("grouped %s (group %d)", n, grp))
		}
		a.ineligible = append(a.ineligible, schema.PruneLayer{Node: n.Name, Op: n.OpType, Weight: n.Input(1).Name,
			Skipped: fmt.Sprintf("grouped conv (group %d)", grp)})
	}
}

func (a *analysis) gemm(n *graph.Node, newGroup func(int64) *group) {
	in0 := n.Input(0)
	w := float32Const(n.Input(1))
	transA, transB := n.AttrInt("transA", 0), n.AttrInt("transB", 0)
	for i, v := range n.Inputs() {
		if i > 0 && v != nil && a.of[v] != nil {
			a.of[v].skip(fmt.Sprintf("its channels are a parameter of %s", n))
		}
	}
	g0, flat := a.of[in0], a.flat[in0]
	if w == nil || len(w.Dims) != 2 || transA != 0 {
		if g0 != nil {
			g0.skip(fmt.Sprintf("%s has a computed weight or transA", n))
		}
		if flat != nil {
			flat.skip(fmt.Sprintf("%s has a computed weight or transA", n))
		}
		a.ineligible = append(a.ineligible, schema.PruneLayer{Node: n.Name, Op: n.OpType, Weight: n.Input(1).Name,
			Skipped: "weight is not a constant float32 matrix, or transA"})
		return
	}
	kAxis, mAxis := 0, 1
	if transB != 0 {
		kAxis, mAxis = 1, 0
	}
	switch {
	case flat != nil:
		root := flat.root()
		block := root.flat[in0]
		if w.Dims[kAxis] != block*root.channels {
			root.skip(fmt.Sprintf("%s reads %d features, not %d×%d", n, w.Dims[kAxis], root.channels, block))
		}
		root.actions = append(root.actions, action{kind: actSliceInput, node: n, input: 1, axis: kAxis, block: block})
	case g0 != nil:
		root := g0.root()
		if a.rank(in0) != 2 || w.Dims[kAxis] != root.channels {
			root.skip(fmt.Sprintf("%s reads %d features, not %d", n, w.Dims[kAxis], root.channels))
		}
		root.actions = append(root.actions, action{kind: actSliceInput, node: n, input: 1, axis: kAxis, block: 1})
	}
	out := newGroup(w.Dims[mAxis])
	out.sources = append(out.sources, &source{node: n, gemm: true})
	if c := n.Input(2); c != nil {
		t := float32Const(c)
		ok := t != nil && (len(t.Dims) == 0 || len(t.Dims) <= 2 && t.Dims[len(t.Dims)-1] == 1 ||
			len(t.Dims) == 1 && t.Dims[0] == w.Dims[mAxis] || len(t.Dims) == 2 && t.Dims[0] == 1 && t.Dims[1] == w.Dims[mAxis])
		if !ok {
			out.skip(fmt.Sprintf("%s has a bias that is not per output", n))
		}
	}
	a.carry(n.Output(0), out)
}

// binary follows channels through Add/Sub/Mul/Div/PRelu.
func (a *analysis) binary(n *graph.Node, stop func(string)) {
	x, y := n.Input(0), n.Input(1)
	gx, gy := a.of[x], a.of[y]
	if gx == nil && gy == nil {
		return
	}
	if len(n.Inputs()) != 2 {
		stop(fmt.Sprintf("%s has an odd number of inputs", n))
		return
	}
	if gx != nil && gy != nil {
		if a.rank(x) < 2 || a.rank(x) != a.rank(y) {
			stop(fmt.Sprintf("%s couples channels of unknown or different ranks", n))
			return
		}
		grp := a.union(gx, gy)
		a.carry(n.Output(0), grp)
		return
	}
	carrier, other, idx := x, y, 1
	if gx == nil {
		carrier, other, idx = y, x, 0
	}
	grp := a.of[carrier].root()
	t := float32Const(other)
	if t == nil {
		stop(fmt.Sprintf("its channels meet a computed value at %s", n))
		return
	}
	r, k := a.rank(carrier), len(t.Dims)
	if n.OpType == "PRelu" && idx == 0 {
		stop(fmt.Sprintf("its channels are the slope of %s", n))
		return
	}
	switch {
	case numElements(t) == 1 && k <= max(r, 0):
	case r < 2 || k > r:
		stop(fmt.Sprintf("%s broadcasts a constant over channels of unknown rank", n))
		return
	default:
		ax := 1 - (r - k)
		if ax >= 0 && t.Dims[ax] != 1 {
			if t.Dims[ax] != grp.channels {
				stop(fmt.Sprintf("%s broadcasts a constant of shape %v over %d channels", n, t.Dims, grp.channels))
				return
			}
			grp.actions = append(grp.actions, action{kind: actSliceInput, node: n, input: idx, axis: ax, block: 1})
		}
	}
	a.carry(n.Output(0), grp)
}

func numElements(t *graph.Tensor) int64 {
	n, err := t.NumElements()
	if err != nil {
		return -1
	}
	return n
}

// zeros is the fraction of zero elements of a float32 tensor.
func zeros(t *graph.Tensor) float64 {
	f, err := t.Float32s()
	if err != nil || len(f) == 0 {
		return 0
	}
	return fraction(countZeros(f), int64(len(f)))
}

// keepChannels scores a group's channels and returns the indices to keep,
// ascending.
func keepChannels(grp *group, removed int64) ([]int, error) {
	c := int(grp.channels)
	score := make([]float64, c)
	for _, s := range grp.sources {
		w := s.node.Input(1).ConstantTensor()
		f, err := w.Float32s()
		if err != nil {
			return nil, err
		}
		axis := 0
		if s.gemm && s.node.AttrInt("transB", 0) == 0 {
			axis = 1
		}
		l1 := make([]float64, c)
		outer, inner := strides(w.Dims, axis)
		if w.Dims[axis] != int64(c) {
			return nil, fmt.Errorf("%s has %d output channels, not %d", s.node, w.Dims[axis], c)
		}
		for o := 0; o < outer; o++ {
			for ch := 0; ch < c; ch++ {
				base := (o*c + ch) * inner
				for _, v := range f[base : base+inner] {
					l1[ch] += math.Abs(float64(v))
				}
			}
		}
		mean := 0.0
		for _, v := range l1 {
			mean += v
		}
		mean /= float64(c)
		for ch := range l1 {
			if mean > 0 {
				score[ch] += l1[ch] / mean
			}
		}
	}
	idx := make([]int, c)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return score[idx[i]] > score[idx[j]] })
	keep := idx[:c-int(removed)]
	slices.Sort(keep)
	return keep, nil
}

// strides splits dims around axis: the product of the dims before it and
// after it.
func strides(dims []int64, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for i, d := range dims {
		switch {
		case i < axis:
			outer *= int(d)
		case i > axis:
			inner *= int(d)
		}
	}
	return
}

// removedChannels is floor(ratio*c), keeping at least one channel and,
// for layers of m channels or more, a multiple of m (Options.ChannelMultiple).
func removedChannels(c int64, ratio float64, m int64) int64 {
	removed := min(int64(math.Floor(ratio*float64(c)+1e-9)), c-1)
	if m > 1 && c >= m && removed > 0 {
		kept := (c - removed + m - 1) / m * m
		removed = max(c-kept, 0)
	}
	return removed
}
