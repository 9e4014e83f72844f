package ptq

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// biasLayer is one quantized weighted layer bias correction measures: its
// float and INT8 weights summed over the kernel's positions, per output
// and input channel, and how its input is quantized.
type biasLayer struct {
	name  string
	input string // the float activation its input Q reads
	conv  bool   // channels on axis 1 (else the last axis)
	// float and int8 are [out][in] sums of the weight over the kernel;
	// inOf maps an output channel's j-th input to the input channel
	// (groups).
	float, int8 [][]float64
	inOf        func(out, j int) int
	scale       float64
	zp, lo, hi  float64 // the input's zero point and integer range
}

// biasCorrection is empirical bias correction (Nagel et al. 2019, section
// 4.2, from data rather than BatchNorm statistics): for each quantized
// layer, the mean error its INT8 form adds to each output channel, which
// for a linear layer is Wq·E[Q(x)] − W·E[x]: its weight's rounding and
// its input's rounding and clipping, read through the mean of each input
// channel. One run of the float model over the calibration data gives
// every E[x] and E[Q(x)]; each layer's error is its own, so correcting
// them all at once does not count an error twice (as it would measuring
// each layer's output in the INT8 model, where the errors of the layers
// before it arrive too). Borders of padded convolutions are not modelled.
// It returns the shifts that cancel the errors (quantize.Options.BiasShift).
func biasCorrection(opts Options, float graph.Serialized, ranges map[string][2]float64) (map[string][]float32, *schema.BiasReport, error) {
	fm, q, err := floatAndQuantized(float, ranges, opts.Quant)
	if err != nil {
		return nil, nil, err
	}
	floatNodes := map[string]*graph.Node{}
	for _, n := range fm.Graph.Nodes {
		if n.Name != "" {
			floatNodes[n.Name] = n
		}
	}
	var layers []*biasLayer
	for _, n := range q.Graph.Nodes {
		if fn := floatNodes[n.Name]; fn != nil && isOp(n, "Conv", "Gemm", "MatMul") {
			if l, ok := newBiasLayer(n, fn); ok && fm.Graph.Value(l.input) != nil {
				layers = append(layers, l)
			}
		}
	}
	rep := &schema.BiasReport{}
	shifts := map[string][]float32{}
	if len(layers) == 0 {
		return shifts, rep, nil
	}
	acc, err := inputMeans(opts, fm, layers)
	if err != nil {
		return nil, nil, err
	}
	var total float64
	var count int
	for _, l := range layers {
		s := acc[l.key()]
		if s == nil || s.n == 0 {
			continue
		}
		d := make([]float32, len(l.float))
		ok := true
		for c := range l.float {
			var e float64
			for j := range l.float[c] {
				k := l.inOf(c, j)
				if k >= len(s.x) {
					ok = false
					break
				}
				e += l.int8[c][j]*s.qx[k]/s.n - l.float[c][j]*s.x[k]/s.n
			}
			d[c] = float32(-e)
			total += math.Abs(e)
			count++
		}
		if ok {
			shifts[l.name] = d
		}
	}
	rep.Layers = len(shifts)
	if count > 0 {
		rep.MeanShift = total / float64(count)
	}
	return shifts, rep, nil
}

// biasKey is one quantized input as a layer reads it: the value, its
// channel axis (a conv's is 1, else the last) and its Q.
type biasKey struct {
	input     string
	conv      bool
	scale, zp float64
}

func (l *biasLayer) key() biasKey { return biasKey{l.input, l.conv, l.scale, l.zp} }

// channelSums are the sums of x and Q(x) per channel over n positions.
type channelSums struct {
	x, qx []float64
	n     float64
}

// inputMeans runs the float model once over the calibration data and
// sums, per layer input and Q, each channel's x and Q(x): once for every
// layer reading the same value with the same Q.
func inputMeans(opts Options, fm *graph.Model, layers []*biasLayer) (map[biasKey]*channelSums, error) {
	acc := map[biasKey]*channelSums{}
	byInput := map[string][]biasKey{}
	lohi := map[biasKey][2]float64{}
	var names []string
	for _, l := range layers {
		k := l.key()
		lohi[k] = [2]float64{l.lo, l.hi}
		if acc[k] == nil {
			acc[k] = &channelSums{}
			if byInput[l.input] == nil {
				names = append(names, l.input)
			}
			byInput[l.input] = append(byInput[l.input], k)
		}
	}
	err := streamValues(opts, []*graph.Model{fm}, names, func(name string, vals []*graph.Tensor) error {
		x, err := vals[0].Float32s()
		if err != nil {
			return fmt.Errorf("bias correction: %s: %w", name, err)
		}
		for _, k := range byInput[name] {
			if err := acc[k].add(name, k, lohi[k], x, vals[0].Dims); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bias correction: %w", err)
	}
	return acc, nil
}

// add sums one batch of value name (x, of dims d) as k reads it, Q(x)
// clipped to r.
func (s *channelSums) add(name string, k biasKey, r [2]float64, x []float32, d []int64) error {
	c, inner := 0, 1
	switch {
	case k.conv && len(d) >= 2:
		c = int(d[1])
		for _, e := range d[2:] {
			inner *= int(e)
		}
	case len(d) >= 1:
		c = int(d[len(d)-1])
	}
	if c == 0 {
		return fmt.Errorf("bias correction: %s has shape %v", name, d)
	}
	if s.x == nil {
		s.x, s.qx = make([]float64, c), make([]float64, c)
	}
	if len(s.x) != c {
		return fmt.Errorf("bias correction: %s has %d channels, then %d", name, len(s.x), c)
	}
	for i, v := range x {
		ch := (i / inner) % c
		s.x[ch] += float64(v)
		qv := math.Round(float64(v)/k.scale) + k.zp
		s.qx[ch] += (math.Min(math.Max(qv, r[0]), r[1]) - k.zp) * k.scale
	}
	s.n += float64(len(x) / c)
	return nil
}

// floatAndQuantized parses the float model and quantizes a copy of it: the
// techniques that measure INT8 layers read each layer in both.
func floatAndQuantized(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, *graph.Model, error) {
	fm, err := float.Parse()
	if err != nil {
		return nil, nil, err
	}
	q, _, _, err := quantizeWith(float, ranges, opts)
	return fm, q, err
}

// newBiasLayer reads a quantized layer n of the INT8 model (weight and
// input each through a DequantizeLinear, the input's from a
// QuantizeLinear of a float value) and fn, the same layer in the float
// model.
func newBiasLayer(n, fn *graph.Node) (*biasLayer, bool) {
	wdq, xdq := n.Input(1).Producer(), n.Input(0).Producer()
	if !isOp(wdq, "DequantizeLinear") || !isOp(xdq, "DequantizeLinear") {
		return nil, false
	}
	xq := xdq.Input(0).Producer()
	if !isOp(xq, "QuantizeLinear") || xq.Input(1) == nil || xq.Input(2) == nil {
		return nil, false
	}
	scale, zp, lo, hi, ok := activationQuant(xq)
	if !ok {
		return nil, false
	}
	wq, dims, ok := dequantized(wdq)
	if !ok {
		return nil, false
	}
	wt := fn.Input(1).ConstantTensor()
	if wt == nil || wt.DType != graph.Float {
		return nil, false
	}
	w, err := wt.Float32s()
	if err != nil || len(w) != len(wq) {
		return nil, false
	}
	l := &biasLayer{name: n.Name, input: xq.Input(0).Name, scale: scale, zp: zp, lo: lo, hi: hi}
	switch {
	case isOp(n, "Conv") && len(dims) >= 3:
		l.conv = true
		out, per := int(dims[0]), int(dims[1])
		kernel := 1
		for _, e := range dims[2:] {
			kernel *= int(e)
		}
		groups := int(n.AttrInt("group", 1))
		perGroup := out / max(groups, 1)
		l.float, l.int8 = sumKernel(w, out, per, kernel), sumKernel(wq, out, per, kernel)
		l.inOf = func(c, j int) int { return c/perGroup*per + j }
	case len(dims) == 2:
		k, nOut := int(dims[0]), int(dims[1])
		trans := isOp(n, "Gemm") && n.AttrInt("transB", 0) != 0
		if trans {
			nOut, k = k, nOut
		}
		if isOp(n, "Gemm") && n.AttrInt("transA", 0) != 0 {
			return nil, false
		}
		l.float, l.int8 = make([][]float64, nOut), make([][]float64, nOut)
		for c := range nOut {
			l.float[c], l.int8[c] = make([]float64, k), make([]float64, k)
			for j := range k {
				at := j*nOut + c
				if trans {
					at = c*k + j
				}
				l.float[c][j], l.int8[c][j] = float64(w[at]), float64(wq[at])
			}
		}
		l.inOf = func(_, j int) int { return j }
	default:
		return nil, false
	}
	return l, true
}

// sumKernel sums a conv weight [out, in, kernel...] over the kernel.
func sumKernel(w []float32, out, in, kernel int) [][]float64 {
	s := make([][]float64, out)
	for c := range out {
		s[c] = make([]float64, in)
		for j := range in {
			for i := range kernel {
				s[c][j] += float64(w[(c*in+j)*kernel+i])
			}
		}
	}
	return s
}

// activationQuant reads a per-tensor QuantizeLinear's scale, zero point
// and integer range.
func activationQuant(q *graph.Node) (scale, zp, lo, hi float64, ok bool) {
	st, zt := q.Input(1).ConstantTensor(), q.Input(2).ConstantTensor()
	if st == nil || zt == nil {
		return 0, 0, 0, 0, false
	}
	s, err := st.Float32s()
	if err != nil || len(s) != 1 {
		return 0, 0, 0, 0, false
	}
	zb, err := zt.Bytes()
	if err != nil || len(zb) != 1 {
		return 0, 0, 0, 0, false
	}
	switch zt.DType {
	case graph.Uint8:
		return float64(s[0]), float64(zb[0]), 0, 255, true
	case graph.Int8:
		return float64(s[0]), float64(int8(zb[0])), -128, 127, true
	}
	return 0, 0, 0, 0, false
}

// dequantized is a constant int8 weight's DequantizeLinear computed:
// (w - zp) * scale, per channel along the node's axis.
func dequantized(dq *graph.Node) ([]float32, []int64, bool) {
	wt, st := dq.Input(0).ConstantTensor(), dq.Input(1).ConstantTensor()
	if wt == nil || st == nil || wt.DType != graph.Int8 {
		return nil, nil, false
	}
	raw, err := wt.Bytes()
	if err != nil {
		return nil, nil, false
	}
	scales, err := st.Float32s()
	if err != nil || len(scales) == 0 {
		return nil, nil, false
	}
	zps := make([]int8, len(scales))
	if z := dq.Input(2); z != nil {
		zt := z.ConstantTensor()
		if zt == nil {
			return nil, nil, false
		}
		zb, err := zt.Bytes()
		if err != nil || len(zb) != len(scales) {
			return nil, nil, false
		}
		for i, b := range zb {
			zps[i] = int8(b)
		}
	}
	dims := wt.Dims
	axis := int(dq.AttrInt("axis", 1))
	if axis < 0 {
		axis += len(dims)
	}
	inner, channels := 1, 1
	if len(scales) > 1 {
		if axis >= len(dims) || int(dims[axis]) != len(scales) {
			return nil, nil, false
		}
		channels = len(scales)
		for _, e := range dims[axis+1:] {
			inner *= int(e)
		}
	}
	out := make([]float32, len(raw))
	for i, b := range raw {
		c := (i / inner) % channels
		out[i] = float32(int(int8(b))-int(zps[c])) * scales[c]
	}
	return out, dims, true
}

func isOp(n *graph.Node, ops ...string) bool {
	if n == nil || (n.Domain != "" && n.Domain != "ai.onnx") {
		return false
	}
	for _, o := range ops {
		if n.OpType == o {
			return true
		}
	}
	return false
}
