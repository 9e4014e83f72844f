package passes

import (
	"testing"

	"github.com/optc-dev/optc/graph"
)

func clSeq(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i%5)*0.25 - 0.5
	}
	return out
}

func TestMatMulAddToGemm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		adims     []int64
		biasDims  []int64
		biasFirst bool
	}{
		{"bias [N]", []int64{3, 4}, []int64{5}, false},
		{"bias [1,N] on the left", []int64{3, 4}, []int64{1, 5}, true},
		{"bias [M,N]", []int64{3, 4}, []int64{3, 5}, false},
		{"bias [M,1]", []int64{3, 4}, []int64{3, 1}, false},
		{"scalar bias, symbolic M", []int64{-1, 4}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCleanupModel(t, 13)
			a := b.input("a", graph.Float, tc.adims...)
			mm := b.node("mm", "MatMul", a, b.f32("b", []int64{4, 5}, clSeq(20)...))
			n := int64(1)
			for _, d := range tc.biasDims {
				n *= d
			}
			bias := b.f32("bias", tc.biasDims, clSeq(int(n))...)
			ins := []*graph.Value{mm.Output(0), bias}
			if tc.biasFirst {
				ins[0], ins[1] = ins[1], ins[0]
			}
			add := b.node("add", "Add", ins...)
			b.output(add.Output(0), graph.Float, tc.adims[0], 5)
			clRewrites(t, b.Model, matmulAddToGemm, Stats{Removed: 1, Rewritten: 1})
			clWantOps(t, b.Graph, map[string]int{"Gemm": 1})
			if add.OpType != "Gemm" || add.Input(0) != a || add.Input(2) != bias {
				t.Fatalf("want Gemm(a, b, bias)")
			}
			clWantOutputs(t, b.Graph, "add_out")
		})
	}
}

func TestMatMulAddToGemmLeavesAlone(t *testing.T) {
	cases := map[string]func(b *cleanupModel){
		"A of rank 3": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, 2, 3, 4), b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{5}, clSeq(5)...)).Output(0), graph.Float, 2, 3, 5)
		},
		"A of unknown rank": func(b *cleanupModel) {
			a := b.input("a", graph.Float, 3, 4)
			a.Type.Shape = nil
			mm := b.node("mm", "MatMul", a, b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{5}, clSeq(5)...)).Output(0), graph.Float, 3, 5)
		},
		"B not constant": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, 3, 4), b.input("bm", graph.Float, 4, 5))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{5}, clSeq(5)...)).Output(0), graph.Float, 3, 5)
		},
		"bias not constant": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, 3, 4), b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.input("bias", graph.Float, 5)).Output(0), graph.Float, 3, 5)
		},
		"bias grows the result": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, 3, 4), b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{2, 3, 5}, clSeq(30)...)).Output(0), graph.Float, 2, 3, 5)
		},
		"bias of M rows with M symbolic": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, -1, 4), b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{3, 5}, clSeq(15)...)).Output(0), graph.Float, 3, 5)
		},
		"matmul read twice": func(b *cleanupModel) {
			mm := b.node("mm", "MatMul", b.input("a", graph.Float, 3, 4), b.f32("b", []int64{4, 5}, clSeq(20)...))
			b.output(b.node("add", "Add", mm.Output(0), b.f32("bias", []int64{5}, clSeq(5)...)).Output(0), graph.Float, 3, 5)
			b.output(mm.Output(0), graph.Float, 3, 5)
		},
		"integer types": func(b *cleanupModel) {
			bt, _ := graph.NewInt64Tensor("b", []int64{4, 5}, make([]int64, 20))
			bv, _ := b.Graph.AddInitializer(bt)
			mm := b.node("mm", "MatMul", b.input("a", graph.Int64, 3, 4), bv)
			b.output(b.node("add", "Add", mm.Output(0), b.i64("bias", 1, 2, 3, 4, 5)).Output(0), graph.Int64, 3, 5)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := newCleanupModel(t, 13)
			build(b)
			clUnchanged(t, b.Model, matmulAddToGemm)
		})
	}
}
