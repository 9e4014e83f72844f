package quantize

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// Integer chains for ORT's CPU provider: the Scheme choices that keep an
// activation in integers from one integer kernel to the next instead of
// converting it to float and back at every op ORT has no integer kernel
// for (docs/int8-cpu.md measures what each conversion costs).

// chainRanges adjusts q.ranges before Apply plans anything: the input of
// each HardSigmoid that can run in integers gets a range whose scale makes
// the rewrite exact (IntegerHardSigmoid), and the output of each op in
// ShareScaleOps takes its input's range, in node order so that a
// Reshape -> Transpose -> Reshape shuffle shares one range.
func (q *quantizer) chainRanges(nodes []*graph.Node, excluded func(*graph.Node) string) {
	q.intHardSigmoid = map[*graph.Node]bool{}
	if q.scheme.IntegerHardSigmoid && !q.scheme.symmetric() {
		for _, n := range nodes {
			if !isOp(n, "HardSigmoid") || excluded(n) != "" || n.Input(0) == nil || n.Output(0) == nil {
				continue
			}
			x := n.Input(0)
			r, ok := q.ranges[x.Name]
			if !ok || x.Producer() == nil {
				continue
			}
			alpha, beta := float64(n.AttrFloat("alpha", 0.2)), float64(n.AttrFloat("beta", 0.5))
			if adj, ok := hardSigmoidRange(r, alpha, beta); ok {
				q.ranges[x.Name] = adj
				q.intHardSigmoid[n] = true
			}
		}
	}
	for _, n := range nodes {
		if !isOp(n, q.scheme.ShareScaleOps...) || n.Input(0) == nil || len(n.Outputs()) != 1 || n.Output(0) == nil {
			continue
		}
		if r, ok := q.ranges[n.Input(0).Name]; ok {
			q.ranges[n.Output(0).Name] = r
		}
	}
}

// maxHardSigmoidWidening bounds how much coarser the input's grid may get
// for an integer HardSigmoid (its range must reach -beta/alpha, and its
// scale be 1/(alpha*k)); beyond it the HardSigmoid stays float.
const maxHardSigmoidWidening = 2

// hardSigmoidRange returns a range covering r whose uint8 scale s is
// 1/(alpha*k) with k and beta*k integers and whose zero point z is at
// least beta*k, so that HardSigmoid's alpha*x+beta on the grid is the grid
// itself with scale alpha*s and zero point z-beta*k (see
// IntegerHardSigmoid).
func hardSigmoidRange(r [2]float64, alpha, beta float64) ([2]float64, bool) {
	if alpha <= 0 || beta < 0 || beta > 1 {
		return r, false
	}
	lo, hi := math.Min(r[0], math.Min(0, -beta/alpha)), math.Max(r[1], 0)
	s0 := (hi - lo) / 255
	span := math.Max(r[1], 0) - math.Min(r[0], 0)
	if s0 <= 0 || span <= 0 {
		return r, false
	}
	for k := math.Floor(1 / (alpha * s0)); k >= 1; k-- {
		bk := beta * k
		if math.Abs(bk-math.Round(bk)) > 1e-9 {
			continue
		}
		s := 1 / (alpha * k)
		if 255*s > maxHardSigmoidWidening*span {
			return r, false
		}
		z := math.Ceil(-lo/s - 1e-9)
		if z < math.Round(bk) || z > 255 || (255-z)*s < hi {
			continue
		}
		return [2]float64{-z * s, (255 - z) * s}, true
	}
	return r, false
}

// quantizeOutput (QuantizeOutputs) quantizes the tensor n's quantized
// output is, when it is not already, and makes every reader in n's graph
// read its DequantizeLinear, so that only the QuantizeLinear reads n's
// result and ORT can fuse n into its integer kernel. A returned tensor is
// left alone (the graph's output must stay float and keep its name), and
// so is a tensor that a node Apply skipped reads (kept float by the
// accuracy fallback, the placement or a pattern, or without a range):
// such a node is left as it was, reading the float result.
func (q *quantizer) quantizeOutput(n *graph.Node, skipped map[*graph.Node]bool) error {
	out := OutputActivation(n)
	if out == nil || out.IsReturned() || q.g.IsOutput(out) {
		return nil
	}
	if _, ok := q.ranges[out.Name]; !ok {
		return nil
	}
	var first *graph.Node
	at := len(q.g.Nodes)
	for _, u := range out.Uses() {
		if u.Node.Graph() != q.g {
			continue
		}
		if skipped[u.Node] {
			return nil
		}
		if i := slices.Index(q.g.Nodes, u.Node); i >= 0 && i < at {
			first, at = u.Node, i
		}
	}
	if first == nil {
		return nil
	}
	dq, _, err := q.activation(out, first)
	if err != nil {
		return err
	}
	qn := dq.Producer().Input(0).Producer()
	for _, u := range slices.Clone(out.Uses()) {
		switch {
		case u.Node == qn || u.Node.Graph() != q.g:
		case isOp(u.Node, "Shape", "Size"):
			// Only the shape is read: the uint8 tensor has it too, and a
			// DequantizeLinear read by a Shape is one ORT must run (a
			// dynamic-batch Reshape's shape arithmetic).
			u.Node.SetInput(u.Index, qn.Output(0))
		default:
			u.Node.SetInput(u.Index, dq)
		}
	}
	return nil
}

// integerHardSigmoid (IntegerHardSigmoid) rewrites HardSigmoid(DQ(xq))
// into DQ(Clip(xq, zg, zg+k); alpha*s, zg) with zg = z-beta*k, where s and
// z are xq's scale and zero point and k = 1/(alpha*s): the same values up
// to float rounding, computed on the uint8 tensor. The result keeps the
// HardSigmoid's output value (name and readers) and counts as its
// quantized form, so that a quantized reader (the Mul of a HardSwish or a
// squeeze-excite) reads it without another Q/DQ and ORT fuses that reader
// into QLinearMul. A HardSigmoid whose input did not get a Q/DQ, or whose
// stored scale does not give an integer k, stays float.
func (q *quantizer) integerHardSigmoid(n *graph.Node) error {
	dq := n.Input(0).Producer()
	if !isOp(dq, "DequantizeLinear") {
		return nil
	}
	xq, sv, zv := dq.Input(0), dq.Input(1), dq.Input(2)
	if qn := xq.Producer(); !isOp(qn, "QuantizeLinear") || q.dq[actKey{qn.Input(0), q.g}] != dq.Output(0) {
		return nil // not a Q/DQ pair Apply made
	}
	if sv.Const == nil || zv.Const == nil || zv.Const.DType != graph.Uint8 {
		return nil
	}
	sb, err := sv.Const.Bytes()
	if err != nil {
		return err
	}
	zb, err := zv.Const.Bytes()
	if err != nil {
		return err
	}
	s := float64(math.Float32frombits(binary.LittleEndian.Uint32(sb)))
	z := int(zb[0])
	alpha, beta := float64(n.AttrFloat("alpha", 0.2)), float64(n.AttrFloat("beta", 0.5))
	kf := 1 / (alpha * s)
	k := math.Round(kf)
	zg := z - int(math.Round(beta*k))
	if k < 1 || math.Abs(kf-k) > 1e-3 || zg < 0 {
		return nil
	}
	hiC := min(zg+int(k), 255)
	what := n.String()
	out := n.Output(0)
	if err := n.SetOutput(0, nil); err != nil {
		return err
	}
	lo, err := q.init(out.Name+"_clip_min", graph.Uint8, nil, []byte{byte(zg)})
	if err != nil {
		return err
	}
	hi, err := q.init(out.Name+"_clip_max", graph.Uint8, nil, []byte{byte(hiC)})
	if err != nil {
		return err
	}
	gq, err := q.g.NewValue(q.g.UniqueName(out.Name + "_quantized"))
	if err != nil {
		return err
	}
	clip, err := q.g.InsertNodeBefore(n, "Clip", []*graph.Value{xq, lo, hi}, []*graph.Value{gq})
	if err != nil {
		return err
	}
	clip.Name = n.Name
	gs := float32(alpha * s)
	gsv, err := q.init(out.Name+"_scale", graph.Float, nil, f32bytes([]float32{gs}))
	if err != nil {
		return err
	}
	gzv, err := q.init(out.Name+"_zero_point", graph.Uint8, nil, []byte{byte(zg)})
	if err != nil {
		return err
	}
	gdq, err := q.g.InsertNodeBefore(n, "DequantizeLinear", []*graph.Value{gq, gsv, gzv}, []*graph.Value{out})
	if err != nil {
		return err
	}
	gdq.Name = q.g.UniqueName(out.Name + "_dequantized")
	if err := q.g.RemoveNode(n); err != nil {
		return err
	}
	// A squeeze-excite gate's conv output had no other reader: its
	// DequantizeLinear is dead now, and ORT would still run it.
	if x := dq.Output(0); len(x.Uses()) == 0 && !q.g.IsOutput(x) {
		if err := q.g.RemoveNode(dq); err != nil {
			return err
		}
		delete(q.dq, actKey{xq.Producer().Input(0), q.g})
		delete(q.quantizes, x)
	}
	q.dq[actKey{out, q.g}] = out
	q.quantizes[out] = out
	q.scaleOf[out] = gs
	q.rep.Quantized = append(q.rep.Quantized, Entry{Node: what, Op: "HardSigmoid",
		Detail: "integer: Clip of the uint8 input, read with scale alpha*s (QLinearMul reads it)"})
	return nil
}
