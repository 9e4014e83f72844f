// Package weightonly quantizes the constant weights of MatMul and Gemm
// layers to 4 or 3 bits, blockwise along the reduction axis, and writes
// each layer as ONNX Runtime's com.microsoft MatMulNBits, so that ORT runs
// it with its own low-bit kernels (activations stay float). Rounding is
// round-to-nearest (RTN), or GPTQ: second-order error compensation from
// the Gram of the layer's inputs on calibration data (collected in ORT by
// prune.Data, layer after layer on the model quantized so far).
//
// ORT 1.24.1's CPU MatMulNBits has kernels for 2, 4 and 8 bits, not 3, so
// int3 weights are 3-bit codes (8 levels) stored in the 4-bit container:
// the accuracy of 3 bits, the file size and speed of 4.
package weightonly

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/prune"
)

// Type is a weight format: int4 or int3.
type Type string

// Weight formats.
const (
	Int4 Type = "int4"
	Int3 Type = "int3"
)

// Types is the one list of weight formats (flags, config, completion).
var Types = []Type{Int4, Int3}

func (t Type) bits() int {
	if t == Int3 {
		return 3
	}
	return 4
}

// Rounding is how weights become codes.
type Rounding string

// Rounding methods.
const (
	RTN  Rounding = "rtn"
	GPTQ Rounding = "gptq"
)

// Roundings is the one list of rounding methods.
var Roundings = []Rounding{RTN, GPTQ}

// BlockSizes are the block sizes offered (ORT accepts any power of two
// from 16; these are the ones its quantizer and kernels are tuned for).
var BlockSizes = []int{32, 64, 128}

// BlockSizeNames is BlockSizes as strings (completion, messages).
func BlockSizeNames() []string {
	s := make([]string, len(BlockSizes))
	for i, b := range BlockSizes {
		s[i] = strconv.Itoa(b)
	}
	return s
}

// DefaultBlockSize is Options.BlockSize's default.
const DefaultBlockSize = 32

// DefaultMinElements is Options.MinElements's default: smaller weights
// stay float (their share of the file is small, and a tiny layer gains
// nothing from a low-bit kernel).
const DefaultMinElements = 1024

// Options says what Quantize does.
type Options struct {
	Type      Type
	BlockSize int // 0: DefaultBlockSize
	// Symmetric leaves zero points out (codes centred on 8); the default
	// stores a zero point per block, which fits skewed blocks better.
	Symmetric bool
	Rounding  Rounding // "" is RTN
	// Data is the calibration data GPTQ runs the model on; RTN needs none.
	Data *prune.Data
	// Exclude lists regular expressions, as quantize.Options.Exclude (the
	// same --exclude flag): a layer whose node name or op type matches one
	// stays float.
	Exclude     []string
	MinElements int64 // 0: DefaultMinElements
}

// Layer is what happened to one weight layer.
type Layer struct {
	Node     string `json:"node"`
	Op       string `json:"op"`
	K        int    `json:"k"`
	N        int    `json:"n"`
	Rounding string `json:"rounding,omitempty"`
	Skipped  string `json:"skipped,omitempty"`
	// WeightError is ‖W−Ŵ‖/‖W‖ (Frobenius).
	WeightError float64 `json:"weight_error,omitempty"`
	// OutputError is the relative output error on the calibration data,
	// tr(ΔW·H·ΔWᵀ)/tr(W·H·Wᵀ) with H the input Gram (GPTQ only).
	OutputError float64 `json:"output_error,omitempty"`
}

// Report lists the layers and the bytes of weights before and after.
type Report struct {
	Type        Type    `json:"type"`
	BlockSize   int     `json:"block_size"`
	Symmetric   bool    `json:"symmetric"`
	Rounding    string  `json:"rounding"`
	Layers      []Layer `json:"layers"`
	Quantized   int     `json:"quantized"`
	BytesBefore int64   `json:"bytes_before"` // float weights of the quantized layers
	BytesAfter  int64   `json:"bytes_after"`  // their codes, scales and zero points
}

// Validate checks o and fills in defaults.
func (o *Options) Validate() error {
	if !slices.Contains(Types, o.Type) {
		return fmt.Errorf("unknown weight type %q (want %s)", o.Type, choice.Or(Types))
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if !slices.Contains(BlockSizes, o.BlockSize) {
		return fmt.Errorf("block size %d is not offered (want %s)", o.BlockSize, choice.Or(BlockSizeNames()))
	}
	if o.Rounding == "" {
		o.Rounding = RTN
	}
	if !slices.Contains(Roundings, o.Rounding) {
		return fmt.Errorf("unknown weight rounding %q (want %s)", o.Rounding, choice.Or(Roundings))
	}
	if o.Rounding == GPTQ && (o.Data == nil || o.Data.Spec == "") {
		return fmt.Errorf("weight rounding gptq needs calibration data")
	}
	if o.MinElements == 0 {
		o.MinElements = DefaultMinElements
	}
	for _, s := range o.Exclude {
		if _, err := regexp.Compile(s); err != nil {
			return fmt.Errorf("exclude pattern %q: %w", s, err)
		}
	}
	return nil
}

// excluded returns the pattern of o.Exclude that n matches, or "".
func (o *Options) excluded(n *graph.Node) string {
	for _, s := range o.Exclude {
		re := regexp.MustCompile(s) // checked by Validate
		if (n.Name != "" && re.MatchString(n.Name)) || re.MatchString(n.OpType) {
			return s
		}
	}
	return ""
}

// target is one weight to quantize, read as W[K, N] of Y = X·W (+ bias)
// by one or more MatMul nodes (layers cloned from one module share their
// weights once duplicates are merged), or by one Gemm.
type target struct {
	node   *graph.Node   // the first reader
	nodes  []*graph.Node // all readers, in graph order
	weight *graph.Value
	transB bool         // Gemm with transB: the stored weight is Wᵀ
	bias   *graph.Value // Gemm's C, when a vector of N
	k, n   int
	skip   string
}

// Quantize rewrites m's eligible MatMul and Gemm layers as MatMulNBits.
// With GPTQ, the layers reading one activation are quantized together
// after a calibration run of the model as quantized so far.
func Quantize(m *graph.Model, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Type: opts.Type, BlockSize: opts.BlockSize, Symmetric: opts.Symmetric, Rounding: string(opts.Rounding)}
	lv := levels{bits: opts.Type.bits(), symmetric: opts.Symmetric}
	ts := findTargets(m, opts)
	// Group by the activation read, in graph order: one calibration run
	// per group.
	var groups [][]*target
	for _, t := range ts {
		if t.skip != "" {
			rep.Layers = append(rep.Layers, t.layer())
			continue
		}
		found := false
		for i, g := range groups {
			if g[0].node.Input(0) == t.node.Input(0) {
				groups[i] = append(g, t)
				found = true
				break
			}
		}
		if !found {
			groups = append(groups, []*target{t})
		}
	}
	for _, g := range groups {
		var hs [][]float64
		if opts.Rounding == GPTQ {
			var err error
			if hs, err = targetGrams(m, g, opts.Data); err != nil {
				return nil, err
			}
		}
		for i, t := range g {
			var h []float64
			if hs != nil {
				h = hs[i]
			}
			l, err := t.quantize(lv, opts.BlockSize, h)
			if err != nil {
				return nil, err
			}
			rep.Layers = append(rep.Layers, l)
			rep.Quantized++
			nb := blocksOf(t.k, opts.BlockSize)
			rep.BytesBefore += int64(4 * t.k * t.n)
			rep.BytesAfter += int64(t.n * nb * (opts.BlockSize/2 + 4))
			if !opts.Symmetric {
				rep.BytesAfter += int64(t.n * ((nb + 1) / 2))
			}
		}
	}
	if rep.Quantized > 0 && m.OpsetVersion(msDomain) == 0 {
		m.Opsets = append(m.Opsets, graph.OpsetImport{Domain: msDomain, Version: 1})
	}
	return rep, nil
}

// targetGrams runs the model as quantized so far over the calibration
// data and returns each target's input Gram: for a weight read by
// several nodes, the sum of theirs (the error GPTQ minimizes is then the
// sum of the readers' output errors).
func targetGrams(m *graph.Model, g []*target, d *prune.Data) ([][]float64, error) {
	var nodes []*graph.Node
	for _, t := range g {
		nodes = append(nodes, t.nodes...)
	}
	all, err := d.InputGrams(m, nodes)
	if err != nil {
		return nil, fmt.Errorf("gptq: calibration for %s: %w", g[0].node, err)
	}
	hs := make([][]float64, len(g))
	i := 0
	for j, t := range g {
		hs[j] = all[i]
		for _, h := range all[i+1 : i+len(t.nodes)] {
			for k := range h {
				hs[j][k] += h[k]
			}
		}
		i += len(t.nodes)
	}
	return hs, nil
}

func (t *target) layer() Layer {
	name := t.node.Name
	if len(t.nodes) > 1 {
		name = fmt.Sprintf("%s (+%d sharing its weight)", name, len(t.nodes)-1)
	}
	return Layer{Node: name, Op: t.node.OpType, K: t.k, N: t.n, Skipped: t.skip}
}

// findTargets lists the weights of the main graph's MatMul and Gemm nodes
// (a constant float32 matrix as second input), with why each that cannot
// be quantized is skipped.
func findTargets(m *graph.Model, opts Options) []*target {
	var ts []*target
	byWeight := map[*graph.Value]*target{}
	for _, n := range m.Graph.Nodes {
		if n.Domain != "" || (n.OpType != "MatMul" && n.OpType != "Gemm") || len(n.Inputs()) < 2 {
			continue
		}
		w := n.Input(1)
		if w == nil || w.Const == nil || len(w.Const.Dims) != 2 || w.Const.DType != graph.Float {
			continue // not a weight layer (an activation times an activation)
		}
		if t := byWeight[w]; t != nil {
			t.nodes = append(t.nodes, n)
			continue
		}
		t := &target{node: n, nodes: []*graph.Node{n}, weight: w, k: int(w.Const.Dims[0]), n: int(w.Const.Dims[1])}
		if n.OpType == "Gemm" && n.AttrInt("transB", 0) != 0 {
			t.transB = true
			t.k, t.n = t.n, t.k
		}
		byWeight[w] = t
		ts = append(ts, t)
	}
	for _, t := range ts {
		w, n := t.weight, t.node
		switch {
		case slices.ContainsFunc(t.nodes, func(n *graph.Node) bool { return opts.excluded(n) != "" }):
			t.skip = "excluded by --exclude"
		case int64(t.k)*int64(t.n) < opts.MinElements:
			t.skip = fmt.Sprintf("%d elements, fewer than %d", t.k*t.n, opts.MinElements)
		case w.IsReturned() || slices.Contains(m.Graph.Inputs, w):
			t.skip = "the weight is also a graph input or output"
		case len(w.Uses()) != len(t.nodes):
			t.skip = fmt.Sprintf("the weight is also read by %s %q", w.Uses()[0].Node.OpType, w.Uses()[0].Node.Name)
			for _, u := range w.Uses() {
				if u.Index != 1 || !slices.Contains(t.nodes, u.Node) {
					t.skip = fmt.Sprintf("the weight is also read by %s %q", u.Node.OpType, u.Node.Name)
					break
				}
			}
		case n.OpType == "Gemm":
			t.skip = t.gemmSkip()
		}
		for _, r := range t.nodes {
			if t.skip == "" && (r.Input(0) == nil || len(r.Outputs()) != 1 || r.OpType != n.OpType || !sameGemm(r, n)) {
				t.skip = fmt.Sprintf("%s %q reads it differently", r.OpType, r.Name)
			}
		}
	}
	return ts
}

// sameGemm reports whether two readers of one weight compute the same
// function of their first input (always, for MatMuls).
func sameGemm(a, b *graph.Node) bool {
	if a.OpType != "Gemm" {
		return true
	}
	return a.AttrInt("transA", 0) == b.AttrInt("transA", 0) && a.AttrInt("transB", 0) == b.AttrInt("transB", 0) &&
		a.AttrFloat("alpha", 1) == b.AttrFloat("alpha", 1) && a.AttrFloat("beta", 1) == b.AttrFloat("beta", 1) &&
		a.Input(2) == b.Input(2)
}

// gemmSkip says why a Gemm cannot be a MatMulNBits (which computes
// A·W + bias, nothing more), or "".
func (t *target) gemmSkip() string {
	n := t.node
	if n.AttrInt("transA", 0) != 0 || n.AttrFloat("alpha", 1) != 1 {
		return "Gemm with transA or alpha"
	}
	if c := n.Input(2); c != nil && len(n.Inputs()) > 2 {
		if n.AttrFloat("beta", 1) != 1 || c.Const == nil || c.Const.DType != graph.Float ||
			len(c.Const.Dims) != 1 || c.Const.Dims[0] != int64(t.n) {
			return "Gemm's C is not a constant vector of N"
		}
		t.bias = c
	}
	return ""
}

// quantize rounds t's weight (GPTQ when h, the K×K input Gram, is given)
// and replaces the node.
func (t *target) quantize(lv levels, blockSize int, h []float64) (Layer, error) {
	l := t.layer()
	vals, err := t.weight.Const.Float32s()
	if err != nil {
		return l, fmt.Errorf("weight %q: %w", t.weight.Name, err)
	}
	// wt[r][j] = W[j][r]: one row per output, the layout of the codes.
	k, n := t.k, t.n
	wt := make([]float64, n*k)
	for j := 0; j < k; j++ {
		for r := 0; r < n; r++ {
			if t.transB {
				wt[r*k+j] = float64(vals[r*k+j])
			} else {
				wt[r*k+j] = float64(vals[j*n+r])
			}
		}
	}
	orig := slices.Clone(wt)
	var q []int
	var ps []blockParams
	if h == nil {
		l.Rounding = string(RTN)
		q, ps = roundRTN(wt, n, k, blockSize, lv)
	} else {
		l.Rounding = string(GPTQ)
		if q, ps, err = roundGPTQ(wt, n, k, blockSize, lv, slices.Clone(h)); err != nil {
			return l, fmt.Errorf("gptq: %s: %w", t.node, err)
		}
	}
	// What the codes read back as, for the error figures.
	nb := blocksOf(k, blockSize)
	deq := make([]float64, n*k)
	for r := 0; r < n; r++ {
		for j := 0; j < k; j++ {
			deq[r*k+j] = ps[r*nb+j/blockSize].value(q[r*k+j])
		}
	}
	l.WeightError = relErr(orig, deq)
	if h != nil {
		l.OutputError = outputErr(orig, deq, h, n, k)
	}
	p := pack(q, ps, k, n, blockSize, lv.symmetric)
	if err := p.replace(t.nodes, t.weight, t.bias); err != nil {
		return l, err
	}
	return l, nil
}

// roundRTN rounds each weight to the nearest code of its block's min/max
// grid.
func roundRTN(wt []float64, n, k, blockSize int, lv levels) ([]int, []blockParams) {
	nb := blocksOf(k, blockSize)
	q := make([]int, n*k)
	ps := make([]blockParams, n*nb)
	for r := 0; r < n; r++ {
		for b := 0; b < nb; b++ {
			j1, j2 := b*blockSize, min((b+1)*blockSize, k)
			p := lv.params(wt[r*k+j1 : r*k+j2])
			ps[r*nb+b] = p
			for j := j1; j < j2; j++ {
				q[r*k+j] = lv.code(wt[r*k+j], p)
			}
		}
	}
	return q, ps
}

func relErr(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		d := a[i] - b[i]
		num += d * d
		den += a[i] * a[i]
	}
	if den == 0 {
		return 0
	}
	return math.Sqrt(num / den)
}

// outputErr is tr(ΔW·H·ΔWᵀ)/tr(W·H·Wᵀ) for rows of n×k matrices.
func outputErr(w, wq, h []float64, n, k int) float64 {
	quad := func(x []float64) float64 {
		var s float64
		for i := 0; i < k; i++ {
			if x[i] == 0 {
				continue
			}
			hi := h[i*k : i*k+k]
			var t float64
			for j, v := range x {
				t += hi[j] * v
			}
			s += x[i] * t
		}
		return s
	}
	var num, den float64
	d := make([]float64, k)
	for r := 0; r < n; r++ {
		for j := 0; j < k; j++ {
			d[j] = w[r*k+j] - wq[r*k+j]
		}
		num += quad(d)
		den += quad(w[r*k : r*k+k])
	}
	if den == 0 {
		return 0
	}
	return num / den
}
