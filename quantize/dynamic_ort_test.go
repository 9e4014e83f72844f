package quantize

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// What ORT 1.24.1's CPU MatMulInteger computes, probed with one-node
// models at levels disable and all against the exact integer result:
// uint8 activations with a zero point times int8 or uint8 weights with no
// zero point, one for the tensor, or one per column. ApplyDynamic writes
// the first (int8, none); the others are recorded so that a change of
// scheme knows what it can rely on.
func TestORTMatMulIntegerForms(t *testing.T) {
	ortenv.Require(t)
	const m, k, n = 3, 5, 4
	a := []byte{0, 17, 255, 128, 3, 200, 1, 99, 254, 60, 7, 140, 33, 250, 81}
	aZP := byte(128)
	bS8 := []int8{-63, 12, 0, 63, 5, -7, 44, -1, 63, -63, 2, 9, -30, 30, 1, -2, 60, -60, 13, 8}
	for _, c := range []struct {
		name   string
		signed bool
		zp     []byte // nil: none; one: per tensor; n: per column
	}{
		{"int8 weights, no zero point (ApplyDynamic's)", true, nil},
		{"int8 weights, per-tensor zero point", true, []byte{0xfe}},
		{"int8 weights, per-column zero points", true, []byte{0, 1, 0xff, 3}},
		{"uint8 weights, per-column zero points", false, []byte{128, 127, 130, 120}},
	} {
		for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
			t.Run(fmt.Sprintf("%s level %s", c.name, level), func(t *testing.T) {
				b := testgraph.New(t, "probe", 13)
				x := b.TypedValue("a", graph.Uint8, m, k)
				b.Graph.Inputs = append(b.Graph.Inputs, x)
				wt, bval := graph.Int8, make([]byte, len(bS8))
				for i, v := range bS8 {
					bval[i] = byte(v)
					if !c.signed {
						bval[i] = byte(int(v) + 128)
					}
				}
				if !c.signed {
					wt = graph.Uint8
				}
				ins := []*graph.Value{x, b.Init("b", wt, []int64{k, n}, bval), b.Init("a_zp", graph.Uint8, nil, []byte{aZP})}
				if c.zp != nil {
					var dims []int64
					if len(c.zp) > 1 {
						dims = []int64{int64(len(c.zp))}
					}
					ins = append(ins, b.Init("b_zp", wt, dims, c.zp))
				}
				y := b.Node("mm", "MatMulInteger", ins...).Output(0)
				b.Output(y, m, n)
				y.Type = graph.TensorType(graph.Int32, graph.StaticShape(m, n))
				model := testgraph.Marshal(t, b.Model)
				ins2, outs := ort.Interface(b.Model)
				s, err := ort.NewSession(ort.Source{Bytes: model, Inputs: ins2, Outputs: outs}, ort.Options{Level: level, IntraOpThreads: 1})
				if err != nil {
					t.Fatalf("ORT refuses it: %v", err)
				}
				defer s.Close()
				in, _ := graph.NewTensor("a", graph.Uint8, []int64{m, k}, a)
				got, err := s.Run([]*graph.Tensor{in})
				if err != nil {
					t.Fatalf("ORT cannot run it: %v", err)
				}
				raw, _ := got[0].Bytes()
				for i := range m {
					for j := range n {
						want := int32(0)
						for l := range k {
							bv := int32(int8(bval[l*n+j]))
							zp := int32(0)
							if c.zp != nil {
								zp = int32(int8(c.zp[min(j, len(c.zp)-1)]))
							}
							if !c.signed {
								bv, zp = int32(bval[l*n+j]), 0
								if c.zp != nil {
									zp = int32(c.zp[min(j, len(c.zp)-1)])
								}
							}
							want += (int32(a[i*k+l]) - int32(aZP)) * (bv - zp)
						}
						if v := int32(binary.LittleEndian.Uint32(raw[4*(i*n+j):])); v != want {
							t.Errorf("Y[%d][%d] = %d, want %d", i, j, v, want)
						}
					}
				}
			})
		}
	}
}

// The extremes of the reduced range are exact: uint8 255 against 7-bit
// weights ±63 summed over 64 products, the case where AVX2's pairwise
// int16 sums would saturate with full-range weights (on the 2-core EPYC
// without VNNI, ±127 weights gave 1,048,544 for 2,072,640 at levels
// disable and all, every pair clamped to 32,767; measured once, not
// asserted: it depends on the CPU).
func TestORTMatMulIntegerReducedRangeExact(t *testing.T) {
	ortenv.Require(t)
	const m, k, n = 2, 64, 16
	for _, level := range []ort.Level{ort.LevelDisable, ort.LevelAll} {
		b := testgraph.New(t, "probe", 13)
		x := b.TypedValue("a", graph.Uint8, m, k)
		b.Graph.Inputs = append(b.Graph.Inputs, x)
		w := make([]byte, k*n)
		for i := range w {
			w[i] = byte(int8(63 - 126*(i%2)))
		}
		y := b.Node("mm", "MatMulInteger", x, b.Init("b", graph.Int8, []int64{k, n}, w), b.Init("a_zp", graph.Uint8, nil, []byte{0})).Output(0)
		b.Output(y, m, n)
		y.Type = graph.TensorType(graph.Int32, graph.StaticShape(m, n))
		ins, outs := ort.Interface(b.Model)
		s, err := ort.NewSession(ort.Source{Bytes: testgraph.Marshal(t, b.Model), Inputs: ins, Outputs: outs}, ort.Options{Level: level, IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		a := make([]byte, m*k)
		for i := range a {
			a[i] = 255
		}
		in, _ := graph.NewTensor("a", graph.Uint8, []int64{m, k}, a)
		got, err := s.Run([]*graph.Tensor{in})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := got[0].Bytes()
		for j := range n {
			want := int32(0)
			for l := range k {
				want += 255 * int32(int8(w[l*n+j]))
			}
			if v := int32(binary.LittleEndian.Uint32(raw[4*j:])); v != want {
				t.Errorf("level %s: Y[0][%d] = %d, want %d", level, j, v, want)
			}
		}
	}
}
