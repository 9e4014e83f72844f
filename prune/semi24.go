package prune

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// SemiStructured prunes to the 2:4 pattern that sparse tensor cores run:
// in every group of 4 consecutive weights along the reduction
// (input-channel) axis the 2 largest |w| stay and the other 2 become zero
// (ties: the lower index stays). The axis is 1 for Conv W[M, C/g, kh, kw],
// 0 for ConvTranspose W[C, M/g, kh, kw], 0 for Gemm B[K, N] (1 when
// transB=1) and for MatMul B[K, N] (the next-to-last axis of a batched B).
// Layers whose reduction size is not a multiple of 4 are skipped and
// reported, as are the layers Magnitude skips (tiny, depthwise, excluded).
// Pruned weights get new tensors; the loaded data is never written.
func SemiStructured(m *graph.Model, opts Options) (*schema.PruneReport, error) {
	rep := &schema.PruneReport{Method: Method{Kind: "2:4"}.String(), ParamsBefore: totalParams(m)}
	var totals sparsityTotals
	for _, w := range findWeights(m) {
		l := w.layer()
		l.Ratio = 0.5
		if l.Skipped = commonSkip(w, opts); l.Skipped != "" {
			rep.Layers = append(rep.Layers, l)
			continue
		}
		axis, skip := reduction24(w)
		if l.Skipped = skip; skip != "" {
			rep.Layers = append(rep.Layers, l)
			continue
		}
		vals, err := w.tensor.Float32s()
		if err != nil {
			return nil, fmt.Errorf("weight %q: %w", w.value.Name, err)
		}
		l.Before = fraction(countZeros(vals), l.Params)
		if apply24(vals, w.tensor.Dims, axis) {
			if err := replaceWeight(w, vals); err != nil {
				return nil, err
			}
		}
		totals.after(&l, vals)
		rep.Layers = append(rep.Layers, l)
	}
	totals.finish(rep, m)
	return rep, nil
}

// Check24 reports, for every Conv, ConvTranspose, Gemm and MatMul with a
// constant float32 weight, whether the weight has at most 2 non-zeros in
// every group of 4 along its reduction axis (see SemiStructured). A layer
// that does has Skipped "" and After (and Before) its sparsity; one that
// does not says why in Skipped: "not 2:4", or that its reduction size is
// not a multiple of 4.
func Check24(m *graph.Model) []schema.PruneLayer {
	var out []schema.PruneLayer
	for _, w := range findWeights(m) {
		if w.tensor.DType != graph.Float {
			continue
		}
		l := w.layer()
		// The weights are read where they lie (Bytes aliases the mapped
		// file), not converted: inspect must not copy a model's weights.
		b, err := w.tensor.Bytes()
		if err == nil && int64(len(b)) != 4*l.Params {
			err = fmt.Errorf("weight %q: %d bytes for %d float32 values", w.value.Name, len(b), l.Params)
		}
		if err != nil {
			l.Skipped = err.Error()
			out = append(out, l)
			continue
		}
		zero := func(i int64) bool { return binary.LittleEndian.Uint32(b[4*i:])&0x7fffffff == 0 }
		var zeros int64
		for i := range l.Params {
			if zero(i) {
				zeros++
			}
		}
		l.Before = fraction(zeros, l.Params)
		l.After = l.Before
		axis, skip := reduction24(w)
		switch {
		case skip != "":
			l.Skipped = skip
		case !is24(zero, w.tensor.Dims, axis):
			l.Skipped = "not 2:4"
		}
		out = append(out, l)
	}
	return out
}

// reduction24 returns the reduction axis of w for 2:4, or why it has none
// that 2:4 applies to.
func reduction24(w *weight) (int, string) {
	axis := -1
	for _, n := range w.nodes {
		a, size, err := reductionAxis(n, w.tensor.Dims)
		if err != "" {
			return 0, err
		}
		if size%4 != 0 {
			return 0, fmt.Sprintf("reduction size %d not a multiple of 4", size)
		}
		if axis >= 0 && a != axis {
			return 0, "shared by layers that reduce over different axes"
		}
		axis = a
	}
	return axis, ""
}

// reductionAxis returns the axis of weight dims that n reduces over, and
// how many weights along it one output reads (the axis size, or its share
// of one group for ConvTranspose).
func reductionAxis(n *graph.Node, dims []int64) (axis int, size int64, skip string) {
	rank := len(dims)
	switch weightOp(n) {
	case "Conv":
		if rank < 3 {
			return 0, 0, fmt.Sprintf("conv weight of rank %d", rank)
		}
		return 1, dims[1], ""
	case "ConvTranspose":
		if rank < 3 {
			return 0, 0, fmt.Sprintf("conv weight of rank %d", rank)
		}
		g := n.AttrInt("group", 1)
		if g < 1 || dims[0]%g != 0 {
			return 0, 0, fmt.Sprintf("group %d does not divide %d input channels", g, dims[0])
		}
		return 0, dims[0] / g, ""
	case "Gemm":
		if rank != 2 {
			return 0, 0, fmt.Sprintf("Gemm weight of rank %d", rank)
		}
		if n.AttrInt("transB", 0) != 0 {
			return 1, dims[1], ""
		}
		return 0, dims[0], ""
	case "MatMul":
		if rank == 0 {
			return 0, 0, "scalar MatMul weight"
		}
		if rank == 1 {
			return 0, dims[0], ""
		}
		return rank - 2, dims[rank-2], ""
	}
	return 0, 0, fmt.Sprintf("%s is not a weight op", n.OpType)
}

// groups4 calls fn with the 4 indices of every group of 4 consecutive
// elements along axis of a tensor of dims (whose size there is a multiple
// of 4), stopping when fn returns false.
func groups4(dims []int64, axis int, fn func(idx [4]int64) bool) {
	outer, inner := int64(1), int64(1)
	for _, d := range dims[:axis] {
		outer *= d
	}
	for _, d := range dims[axis+1:] {
		inner *= d
	}
	r := dims[axis]
	for o := int64(0); o < outer; o++ {
		for r0 := int64(0); r0+4 <= r; r0 += 4 {
			for i := int64(0); i < inner; i++ {
				var idx [4]int64
				for k := range idx {
					idx[k] = (o*r+r0+int64(k))*inner + i
				}
				if !fn(idx) {
					return
				}
			}
		}
	}
}

// apply24 zeroes the 2 smallest |v| of every group of 4 along axis and
// reports whether any element changed.
func apply24(vals []float32, dims []int64, axis int) bool {
	changed := false
	groups4(dims, axis, func(idx [4]int64) bool {
		// Rank the group by |v|, largest first, ties to the lower index;
		// NaN counts as largest.
		var key [4]uint64
		for k, i := range idx {
			key[k] = uint64(math.Float32bits(vals[i])&0x7fffffff)<<2 | uint64(3-k)
		}
		for a := 1; a < 4; a++ {
			for b := a; b > 0 && key[b] > key[b-1]; b-- {
				key[b], key[b-1] = key[b-1], key[b]
			}
		}
		for _, k := range key[2:] {
			if v := &vals[idx[3-k&3]]; *v != 0 {
				*v = 0
				changed = true
			}
		}
		return true
	})
	return changed
}

// is24 reports whether every group of 4 along axis has at most 2
// non-zeros.
func is24(zero func(i int64) bool, dims []int64, axis int) bool {
	ok := true
	groups4(dims, axis, func(idx [4]int64) bool {
		nz := 0
		for _, i := range idx {
			if !zero(i) {
				nz++
			}
		}
		ok = nz <= 2
		return ok
	})
	return ok
}
