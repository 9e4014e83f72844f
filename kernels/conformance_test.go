package kernels_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/kernels"
	"github.com/optc-dev/optc/tools/conformance"
)

// TestNodeConformance runs every single-node model of the ONNX backend
// test data whose operator has a kernel, on every recorded data set, and
// compares with the recorded outputs: exactly for integers and bools,
// within rtol 1e-5, atol 1e-6 for floats. A kernel may refuse a type or
// attribute combination (ErrUnsupported); it may never disagree.
func TestNodeConformance(t *testing.T) {
	root, models := conformance.Models(t)
	type tally struct{ matched, unsupported, mismatched int }
	byOp := map[string]*tally{}
	for _, p := range models {
		dir := filepath.Dir(p)
		if rel, _ := filepath.Rel(root, dir); !strings.HasPrefix(rel, "node"+string(filepath.Separator)) {
			continue
		}
		m, err := graph.LoadFile(p)
		if err != nil {
			continue // the graph package's tests cover loading
		}
		if len(m.Graph.Nodes) != 1 || !kernels.Has(m.Graph.Nodes[0].OpType, m.Graph.Nodes[0].Domain) {
			m.Close()
			continue
		}
		n := m.Graph.Nodes[0]
		tl := byOp[n.OpType]
		if tl == nil {
			tl = &tally{}
			byOp[n.OpType] = tl
		}
		switch err := checkNodeTest(m, dir); {
		case err == nil:
			tl.matched++
		case errors.Is(err, kernels.ErrUnsupported):
			tl.unsupported++
			t.Logf("%s: %v", filepath.Base(dir), err)
		default:
			tl.mismatched++
			t.Errorf("%s: %v", filepath.Base(dir), err)
		}
		m.Close()
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var sum tally
	lines := []string{"op | matched | unsupported | mismatched"}
	for _, op := range ops {
		tl := byOp[op]
		lines = append(lines, fmt.Sprintf("%s | %d | %d | %d", op, tl.matched, tl.unsupported, tl.mismatched))
		sum.matched += tl.matched
		sum.unsupported += tl.unsupported
		sum.mismatched += tl.mismatched
	}
	lines = append(lines, fmt.Sprintf("total | %d | %d | %d", sum.matched, sum.unsupported, sum.mismatched))
	t.Log("\n" + strings.Join(lines, "\n"))
	if sum.matched < 250 {
		t.Errorf("only %d node tests matched", sum.matched)
	}
}

// checkNodeTest evaluates the model's node on each data set.
func checkNodeTest(m *graph.Model, dir string) error {
	n := m.Graph.Nodes[0]
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no data sets")
	}
	var feeds []*graph.Value
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			feeds = append(feeds, v)
		}
	}
	for _, v := range append(slices.Clone(feeds), m.Graph.Outputs...) {
		if v.Type == nil || v.Type.Kind != graph.KindTensor {
			return fmt.Errorf("%w: value %q is a %s, not a tensor", kernels.ErrUnsupported, v.Name, v.Type)
		}
	}
	for _, set := range sets {
		byValue := map[*graph.Value]*graph.Tensor{}
		for i, v := range feeds {
			tn, err := conformance.ReadPB(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				return err
			}
			byValue[v] = asDeclared(tn, v)
		}
		inputs := make([]*graph.Tensor, len(n.Inputs()))
		for i, v := range n.Inputs() {
			switch {
			case v == nil:
			case v.Const != nil:
				inputs[i] = v.Const
			default:
				inputs[i] = byValue[v]
			}
		}
		got, err := kernels.Eval(n.OpType, n.Domain, m.OpsetVersion(n.Domain), n, inputs)
		if err != nil {
			return err
		}
		for i, v := range n.Outputs() {
			k := slices.Index(m.Graph.Outputs, v)
			if v == nil || k < 0 {
				continue
			}
			want, err := conformance.ReadPB(filepath.Join(set, fmt.Sprintf("output_%d.pb", k)))
			if err != nil {
				return err
			}
			want = asDeclared(want, v)
			if i >= len(got) {
				return fmt.Errorf("%s: %d outputs, want output %d", filepath.Base(set), len(got), i)
			}
			if msg := diff(want, got[i]); msg != "" {
				return fmt.Errorf("%s, output %q: %s", filepath.Base(set), v.Name, msg)
			}
		}
	}
	return nil
}

// asDeclared relabels the uint16 data this test data stores bfloat16
// values as.
func asDeclared(t *graph.Tensor, v *graph.Value) *graph.Tensor {
	if t.DType == graph.Uint16 && v.Type.Elem == graph.BFloat16 {
		t.DType = graph.BFloat16
	}
	return t
}

// diff returns "" when got equals want (floats within rtol 1e-5, atol
// 1e-6, NaN matching NaN), else what differs.
func diff(want, got *graph.Tensor) string {
	if want.DType != got.DType || !slices.Equal(want.Dims, got.Dims) {
		return fmt.Sprintf("got %s%v, want %s%v", got.DType, got.Dims, want.DType, want.Dims)
	}
	if !want.DType.IsFloat() {
		wb, err1 := want.Bytes()
		gb, err2 := got.Bytes()
		if err1 != nil || err2 != nil {
			return fmt.Sprint("cannot read: ", err1, err2)
		}
		if string(wb) != string(gb) {
			w, _ := want.Int64s()
			g, _ := got.Int64s()
			return fmt.Sprintf("got %v, want %v", clip(g), clip(w))
		}
		return ""
	}
	w, err1 := want.Float32s()
	g, err2 := got.Float32s()
	if err1 != nil || err2 != nil {
		return fmt.Sprint("cannot read: ", err1, err2)
	}
	if want.DType == graph.Double {
		wd, gd := float64s(want), float64s(got)
		for i := range wd {
			if !closeTo(wd[i], gd[i]) {
				return fmt.Sprintf("element %d is %g, want %g", i, gd[i], wd[i])
			}
		}
		return ""
	}
	for i := range w {
		if !closeTo(float64(w[i]), float64(g[i])) {
			return fmt.Sprintf("element %d is %g, want %g", i, g[i], w[i])
		}
	}
	return ""
}

func closeTo(want, got float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return want == got
	}
	return math.Abs(want-got) <= 1e-6+1e-5*math.Abs(want)
}

func float64s(t *graph.Tensor) []float64 {
	b, _ := t.Bytes()
	out := make([]float64, len(b)/8)
	for i := range out {
		var u uint64
		for j := 7; j >= 0; j-- {
			u = u<<8 | uint64(b[8*i+j])
		}
		out[i] = math.Float64frombits(u)
	}
	return out
}

func clip[T any](v []T) []T {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}
