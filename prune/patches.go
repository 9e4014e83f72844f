package prune

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// patcher turns a weight op's input activation into the vectors its
// weight is multiplied with: im2col patches of a Conv (one per output
// position, channel-major then kernel position, the layout of W[M, C, kh,
// kw] flattened to M rows), rows of a Gemm or MatMul input. Each vector
// ends with a 1, so that a Gram matrix of them also holds the feature sums
// (the mean) and the count, which a refit of the bias needs.
type patcher struct {
	conv   bool
	dim    int // features per vector, without the trailing 1
	c, kh  int
	kw, sh int
	sw, dh int
	dw, pt int
	pl, pb int
	pr     int
	// maxPos bounds the conv output positions taken per sample (evenly
	// spaced, the offset moving from sample to sample), so that a large
	// feature map does not dominate the cost; statistics stay unbiased.
	maxPos int
}

// maxPatchesPerSample is patcher.maxPos for convs.
const maxPatchesPerSample = 64

// newPatcher reads how n (Conv of group 1 with a 4-D weight, Gemm without
// transA, or MatMul with a 2-D weight) reads its input.
func newPatcher(n *graph.Node, w []int64) (*patcher, error) {
	switch weightOp(n) {
	case "Conv":
		if n.Domain != "" || len(w) != 4 || n.AttrInt("group", 1) != 1 {
			return nil, fmt.Errorf("%s: only 2-D convs of group 1 are reconstructed", n)
		}
		if ap := n.AttrString("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "VALID" {
			return nil, fmt.Errorf("%s: auto_pad %s is not reconstructed", n, ap)
		}
		p := &patcher{conv: true, c: int(w[1]), kh: int(w[2]), kw: int(w[3]), sh: 1, sw: 1, dh: 1, dw: 1, maxPos: maxPatchesPerSample}
		if a := n.Attr("strides"); a != nil && len(a.Ints) == 2 {
			p.sh, p.sw = int(a.Ints[0]), int(a.Ints[1])
		}
		if a := n.Attr("dilations"); a != nil && len(a.Ints) == 2 {
			p.dh, p.dw = int(a.Ints[0]), int(a.Ints[1])
		}
		if a := n.Attr("pads"); a != nil && len(a.Ints) == 4 {
			p.pt, p.pl, p.pb, p.pr = int(a.Ints[0]), int(a.Ints[1]), int(a.Ints[2]), int(a.Ints[3])
		}
		p.dim = p.c * p.kh * p.kw
		return p, nil
	case "Gemm":
		if n.AttrInt("transA", 0) != 0 || len(w) != 2 {
			return nil, fmt.Errorf("%s: Gemm with transA is not reconstructed", n)
		}
		k := w[0]
		if n.AttrInt("transB", 0) != 0 {
			k = w[1]
		}
		return &patcher{dim: int(k)}, nil
	case "MatMul":
		if len(w) != 2 {
			return nil, fmt.Errorf("%s: MatMul with a %d-D weight is not reconstructed", n, len(w))
		}
		return &patcher{dim: int(w[0])}, nil
	}
	return nil, fmt.Errorf("%s is not a weight op", n)
}

// vectors returns the vectors of input x (float32 data of dims) with a 1
// appended to each: r rows of dim+1, row-major. sample numbers the first
// sample of the batch (it moves the conv positions taken).
func (p *patcher) vectors(x []float32, dims []int64, sample int64) ([]float64, int, error) {
	d := p.dim + 1
	if !p.conv {
		if len(dims) == 0 || dims[len(dims)-1] != int64(p.dim) {
			return nil, 0, fmt.Errorf("input of shape %v, want [..., %d]", dims, p.dim)
		}
		r := len(x) / p.dim
		out := make([]float64, r*d)
		for i := 0; i < r; i++ {
			row := out[i*d : i*d+d]
			for j, v := range x[i*p.dim : (i+1)*p.dim] {
				row[j] = float64(v)
			}
			row[p.dim] = 1
		}
		return out, r, nil
	}
	if len(dims) != 4 || dims[1] != int64(p.c) {
		return nil, 0, fmt.Errorf("input of shape %v, want [N, %d, H, W]", dims, p.c)
	}
	n, h, w := int(dims[0]), int(dims[2]), int(dims[3])
	ho := (h+p.pt+p.pb-p.dh*(p.kh-1)-1)/p.sh + 1
	wo := (w+p.pl+p.pr-p.dw*(p.kw-1)-1)/p.sw + 1
	if ho <= 0 || wo <= 0 {
		return nil, 0, fmt.Errorf("input of shape %v leaves no output positions", dims)
	}
	positions := ho * wo
	take := min(positions, p.maxPos)
	out := make([]float64, n*take*d)
	r := 0
	for s := 0; s < n; s++ {
		xs := x[s*p.c*h*w : (s+1)*p.c*h*w]
		off := int((sample + int64(s)) % int64(max(positions/take, 1)))
		for k := 0; k < take; k++ {
			pos := (k*positions/take + off) % positions
			oy, ox := pos/wo, pos%wo
			row := out[r*d : r*d+d]
			j := 0
			for c := 0; c < p.c; c++ {
				plane := xs[c*h*w : (c+1)*h*w]
				for i := 0; i < p.kh; i++ {
					y := oy*p.sh - p.pt + i*p.dh
					for jj := 0; jj < p.kw; jj++ {
						xx := ox*p.sw - p.pl + jj*p.dw
						if y >= 0 && y < h && xx >= 0 && xx < w {
							row[j] = float64(plane[y*w+xx])
						}
						j++
					}
				}
			}
			row[p.dim] = 1
			r++
		}
	}
	return out, r, nil
}
