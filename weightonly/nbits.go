package weightonly

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// msDomain is ONNX Runtime's contrib operator domain.
const msDomain = "com.microsoft"

// packed is one weight in MatMulNBits' layout (ORT's contrib operator
// spec): the float weight W[K, N] of Y = X·W is stored transposed, one row
// of codes per output n, K cut into blocks of blockSize (the last padded
// with zeros); two 4-bit codes per byte, the lower K index in the low
// nibble. Scales are float32 [N, blocks]; zero points, when present, are
// packed the same way (two per byte, low nibble first, each row padded to
// whole bytes).
type packed struct {
	k, n, blockSize int
	codes           []byte    // N × blocks × blockSize/2
	scales          []float32 // N × blocks
	zps             []byte    // N × ceil(blocks/2), nil when symmetric
}

func blocksOf(k, blockSize int) int { return (k + blockSize - 1) / blockSize }

// pack stores codes q (N rows of K) with their block parameters (N rows of
// blocks).
func pack(q []int, ps []blockParams, k, n, blockSize int, symmetric bool) *packed {
	nb := blocksOf(k, blockSize)
	p := &packed{k: k, n: n, blockSize: blockSize,
		codes:  make([]byte, n*nb*blockSize/2),
		scales: make([]float32, n*nb)}
	if !symmetric {
		p.zps = make([]byte, n*((nb+1)/2))
	}
	for r := 0; r < n; r++ {
		row := p.codes[r*nb*blockSize/2:]
		for j := 0; j < k; j++ {
			row[j/2] |= byte(q[r*k+j]&0xf) << (4 * (j % 2))
		}
		// Padding codes read back as zero: the zero point's code.
		for j := k; j < nb*blockSize; j++ {
			row[j/2] |= byte(ps[r*nb+j/blockSize].zp&0xf) << (4 * (j % 2))
		}
		for b := 0; b < nb; b++ {
			p.scales[r*nb+b] = float32(ps[r*nb+b].scale)
			if p.zps != nil {
				p.zps[r*((nb+1)/2)+b/2] |= byte(ps[r*nb+b].zp&0xf) << (4 * (b % 2))
			}
		}
	}
	return p
}

// replace writes p's initializers once and replaces each of the MatMul
// (or Gemm) nodes reading weight by a MatMulNBits that reads the same
// activation (and bias, for a Gemm) and writes the same output. The new
// initializers are named after the weight; the old weight goes.
func (p *packed) replace(nodes []*graph.Node, weight *graph.Value, bias *graph.Value) error {
	g := nodes[0].Graph()
	nb := blocksOf(p.k, p.blockSize)
	where := nodes[0]
	add := func(suffix string, dt graph.DataType, dims []int64, data []byte) (*graph.Value, error) {
		t, err := graph.NewTensor(g.UniqueName(weight.Name+suffix), dt, dims, data)
		if err != nil {
			return nil, err
		}
		return g.AddInitializer(t)
	}
	b, err := add("_q4", graph.Uint8, []int64{int64(p.n), int64(nb), int64(p.blockSize / 2)}, p.codes)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	st, err := graph.NewFloat32Tensor(g.UniqueName(weight.Name+"_scales"), []int64{int64(p.n), int64(nb)}, p.scales)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s, err := g.AddInitializer(st)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	ins := []*graph.Value{nil, b, s}
	if p.zps != nil {
		z, err := add("_zp", graph.Uint8, []int64{int64(len(p.zps))}, p.zps)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		ins = append(ins, z)
	}
	if bias != nil {
		for len(ins) < 5 {
			ins = append(ins, nil) // zero_points, g_idx: absent
		}
		ins = append(ins, bias)
	}
	for _, n := range nodes {
		ins[0] = n.Input(0)
		out := n.Output(0)
		if err := n.SetOutput(0, nil); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		q, err := g.InsertNodeBefore(n, "MatMulNBits", ins, []*graph.Value{out})
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		q.Name, q.Domain = n.Name, msDomain
		for _, a := range []struct {
			name string
			v    int64
		}{{"K", int64(p.k)}, {"N", int64(p.n)}, {"bits", 4}, {"block_size", int64(p.blockSize)}} {
			q.SetAttr(&graph.Attr{Name: a.name, Type: graph.AttrInt, Int: a.v})
		}
		if err := g.RemoveNode(n); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if len(weight.Uses()) == 0 && !weight.IsReturned() && weight.Const != nil {
		if err := g.RemoveInitializer(weight); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}
