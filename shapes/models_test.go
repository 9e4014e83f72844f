package shapes_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/shapes"
	"github.com/optc-dev/optc/tools/conformance"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestBackendModels infers every model of the ONNX backend test data: no
// error, no panic, and every graph output with a static inferred shape
// (from the operator rules alone, not the declaration) has the shape and
// type of the recorded output_N.pb.
func TestBackendModels(t *testing.T) {
	root, models := conformance.Models(t)
	var outputs, static, matched, conflicts int
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		m, err := graph.LoadFile(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		res, err := shapes.Infer(m)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			m.Close()
			continue
		}
		for _, c := range res.Conflicts {
			conflicts++
			t.Logf("%s: conflict: %s", rel, c)
		}
		set := filepath.Join(filepath.Dir(p), "test_data_set_0")
		for i, v := range m.Graph.Outputs {
			outputs++
			inf := res.Inferred.Get(v)
			if inf == nil || !inf.Shape.IsStatic() {
				if testing.Verbose() {
					t.Logf("%s: output %q of %s: inferred %s", rel, v.Name, v.Producer(), inf)
				}
				continue
			}
			static++
			b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				continue
			}
			want, err := graph.ParseTensor(b)
			if err != nil {
				continue
			}
			if !slices.Equal(inf.Shape.Dims(), want.Dims) {
				t.Errorf("%s: output %q: inferred %s, recorded %s%v", rel, v.Name, inf, want.DType, want.Dims)
				continue
			}
			if inf.Elem != graph.Undefined && inf.Elem != want.DType && !(want.DType == graph.Uint16 && inf.Elem == graph.BFloat16) {
				t.Errorf("%s: output %q: inferred %s, recorded %s%v", rel, v.Name, inf, want.DType, want.Dims)
				continue
			}
			matched++
		}
		m.Close()
	}
	t.Logf("%d models, %d outputs: %d with a static inferred shape, %d of them match the recorded outputs; %d conflicts with declarations",
		len(models), outputs, static, matched, conflicts)
	if static < outputs/2 {
		t.Errorf("only %d of %d outputs got a static shape", static, outputs)
	}
}

// TestRealModelsAgainstORT runs each model once in ONNX Runtime with every
// intermediate value exposed and checks the inference against what ORT
// produced: every inferred element type, every static dim, and every
// symbolic dim (a symbol must stand for one number throughout the run).
// Each model is inferred twice: with its input fixed to the run's static
// shape, and with the input as the model declares it (symbolic dims).
func TestRealModelsAgainstORT(t *testing.T) {
	ortenv.Require(t)
	for _, tc := range testenv.RealModels(t) {
		// Two samples where the model allows it, so the batch dim is exercised.
		if tc.Name == "mnist_cnn" || tc.Name == "cls" {
			tc.Input = append([]int64{2}, tc.Input[1:]...)
		}
		t.Run(tc.Name, func(t *testing.T) {
			m, err := graph.LoadFile(tc.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fixed, err := m.Clone()
			if err != nil {
				t.Fatal(err)
			}
			in := fixed.Graph.Inputs[0]
			in.Type = graph.TensorType(in.Type.Elem, graph.StaticShape(tc.Input...))
			for _, run := range []struct {
				what string
				m    *graph.Model
			}{{fmt.Sprint(tc.Input), fixed}, {m.Graph.Inputs[0].Type.Shape.String(), m}} {
				st := compareWithORT(t, run.m, tc.Input)
				t.Logf("%s at %s: %d values: %d static (%.1f%%), %d partial, %d unknown; against ORT: %d types, %d static dims, %d symbolic dims checked (%d dims and %d ranks unknown), %d mismatches",
					tc.Name, run.what, st.counts.Values, st.counts.Static, 100*float64(st.counts.Static)/float64(st.counts.Values),
					st.counts.Partial, st.counts.Unknown, st.types, st.static, st.symbolic, st.unknownDims, st.unknownRank, st.mismatches)
			}
		})
	}
}

type ortCheck struct {
	counts                   shapes.Counts
	types, static, symbolic  int
	unknownDims, unknownRank int
	mismatches               int
}

// compareWithORT infers m, runs it with all node outputs exposed on
// random data in [0,1) with input 0 of the given shape, and fails t on
// every difference.
func compareWithORT(t *testing.T, m *graph.Model, input []int64) ortCheck {
	t.Helper()
	res, err := shapes.Infer(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Conflicts {
		t.Errorf("conflict: %s", c)
	}
	x := m.Graph.Inputs[0]
	dopts := data.Options{Samples: int(input[0]), Batch: int(input[0]), High: 1, Spec: data.Spec{Shapes: map[string][]int64{x.Name: input}}}
	got, err := runExposed(m, res.Types, "random", dopts)
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]int64{}
	for i, d := range x.Type.Shape {
		if d.Kind == graph.DimSymbolic {
			bound[d.Param] = input[i]
		}
	}
	st := ortCheck{counts: res.Counts}
	for _, msg := range checkValues(m, res.Types, got, bound, &st) {
		t.Error(msg)
	}
	return st
}

// runExposed runs m in ORT (no graph optimizations) with the node outputs
// of the main graph that types gives a rank exposed, on the first batch of
// the data spec, and returns the tensors by value name. Values of types
// the binding cannot return unless their shape is declared (float16 and
// the like) are left out; the binding returns rank-0 outputs only into
// tensors allocated from a declared type, so values inferred as scalars
// are declared so: a wrong inference then makes ORT fail.
func runExposed(m *graph.Model, types *graph.ValueTable[*graph.Type], spec string, dopts data.Options) (map[string]*graph.Tensor, error) {
	exposed, err := m.Clone()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range exposed.Graph.Nodes {
		for _, v := range n.Outputs() {
			if v == nil || exposed.Graph.IsOutput(v) {
				continue
			}
			inf := types.Get(m.Graph.Value(v.Name))
			if inf == nil || inf.Kind != graph.KindTensor || inf.Shape == nil || !returnable[inf.Elem] {
				continue
			}
			if len(inf.Shape) == 0 && v.Type == nil {
				v.Type = inf.Clone()
			}
			names = append(names, v.Name)
		}
	}
	if err := graph.ExposeValues(exposed, names); err != nil {
		return nil, err
	}
	b, err := graph.Marshal(exposed)
	if err != nil {
		return nil, err
	}
	ins, outs := ort.Interface(exposed)
	opts := ort.DefaultOptions()
	opts.Level = ort.LevelDisable
	sess, err := ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, opts)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	src, err := data.Open(spec, data.GraphInputs(m.Graph), dopts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	batch, err := src.Next()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("no data")
	}
	if err != nil {
		return nil, err
	}
	got, err := sess.Run(batch.Tensors)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*graph.Tensor, len(got))
	for i, o := range outs {
		byName[o.Name] = got[i]
	}
	return byName, nil
}

// returnable lists the element types the binding returns without a
// declared shape.
var returnable = map[graph.DataType]bool{
	graph.Float: true, graph.Double: true, graph.Bool: true,
	graph.Int8: true, graph.Uint8: true, graph.Int16: true, graph.Uint16: true,
	graph.Int32: true, graph.Uint32: true, graph.Int64: true, graph.Uint64: true,
}

// checkValues compares types with the tensors a run produced: element
// types, ranks, static dims, and symbols (each must stand for one number,
// starting from bound). It returns one message per mismatch.
func checkValues(m *graph.Model, types *graph.ValueTable[*graph.Type], got map[string]*graph.Tensor, bound map[string]int64, st *ortCheck) []string {
	var msgs []string
	for name, tn := range got {
		v := m.Graph.Value(name)
		inf := types.Get(v)
		if inf == nil || inf.Kind != graph.KindTensor {
			continue
		}
		bad := func(what string) {
			st.mismatches++
			msgs = append(msgs, fmt.Sprintf("value %q (%s): inferred %s, ORT gave %s%v: %s", name, v.Producer(), inf, tn.DType, tn.Dims, what))
		}
		if inf.Elem != graph.Undefined {
			st.types++
			if inf.Elem != tn.DType {
				bad("element type")
			}
		}
		if inf.Shape == nil {
			st.unknownRank++
			continue
		}
		if len(inf.Shape) != len(tn.Dims) {
			bad("rank")
			continue
		}
		for j, d := range inf.Shape {
			n := tn.Dims[j]
			switch d.Kind {
			case graph.DimStatic:
				st.static++
				if d.Value != n {
					bad(fmt.Sprintf("dim %d", j))
				}
			case graph.DimSymbolic:
				st.symbolic++
				if b, ok := bound[d.Param]; ok && b != n {
					bad(fmt.Sprintf("dim %d: %s is %d elsewhere", j, d.Param, b))
				}
				bound[d.Param] = n
			default:
				st.unknownDims++
			}
		}
	}
	slices.Sort(msgs)
	return msgs
}

// TestBackendModelsAgainstORT runs the backend test models that ORT can
// run on their test_data_set_0 with every intermediate value exposed, and
// checks what inference said of each (the pure inference, declarations
// left out) against what ORT computed.
func TestBackendModelsAgainstORT(t *testing.T) {
	ortenv.Require(t)
	root, models := conformance.Models(t)
	var ran, failed int
	var st ortCheck
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		m, err := graph.LoadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := shapes.Infer(m)
		if err != nil {
			t.Fatal(err)
		}
		set := filepath.Join(filepath.Dir(p), "test_data_set_0")
		got, err := runExposed(m, res.Inferred, set, data.Options{})
		if err != nil {
			// A model that runs as it is must run with its values exposed.
			if _, alone := runExposed(m, nil, set, data.Options{}); alone == nil {
				t.Errorf("%s: runs, but not with the inferred values exposed: %v", rel, err)
			}
			failed++
			m.Close()
			continue
		}
		m.Close()
		ran++
		for _, msg := range checkValues(m, res.Inferred, got, map[string]int64{}, &st) {
			t.Errorf("%s: %s", rel, msg)
		}
	}
	t.Logf("%d models: %d ran in ORT with their inferred values exposed (%d cannot run: ORT, the binding or the data refuse them); checked %d element types, %d static and %d symbolic dims (%d dims and %d ranks unknown); %d mismatches",
		len(models), ran, failed, st.types, st.static, st.symbolic, st.unknownDims, st.unknownRank, st.mismatches)
}
