package infer_test

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"optc/data"
	"optc/graph"
	"optc/infer"
	"optc/internal/ortenv"
	"optc/internal/testenv"
	"optc/ort"
)

// Tolerances of the ONNX backend test runner.
const (
	conformanceRtol = 1e-3
	conformanceAtol = 1e-5
)

// looserAtol lists the tests ONNX's own ORT backend test runs with an
// absolute tolerance only (test_backend_onnxruntime.py): Fourier
// transforms whose exact zeros come out as float32 rounding noise.
var looserAtol = map[string]float64{
	"test_dft": 1e-3, "test_dft_axis": 1e-3, "test_dft_inverse": 1e-3,
	"test_stft": 1e-4, "test_stft_with_window": 1e-4,
}

// knownDisagreements are tests whose recorded outputs (libonnx-testdata
// 1.12) ORT 1.24.1 does not reproduce: max-unpooling with an explicit
// output shape, downsampling Resize with align_corners, and float to
// bfloat16 casts (ORT rounds to nearest, the 1.12 reference truncated).
// They are counted and listed, not hidden.
var knownDisagreements = map[string]bool{
	"test_cast_FLOAT_to_BFLOAT16":                        true,
	"test_maxunpool_export_with_output_shape":            true,
	"test_resize_downsample_scales_cubic_align_corners":  true,
	"test_resize_downsample_scales_linear_align_corners": true,
}

// TestConformance runs every model of the ONNX backend test data the way
// `optc run MODEL --data test_data_set_0 -o DIR` does, and compares the
// .npy outputs with the recorded output_N.pb. Models ORT cannot load or
// run, and models whose inputs or outputs the binding cannot carry, are
// counted; every model that runs must match.
func TestConformance(t *testing.T) {
	ortenv.Require(t)
	root := testenv.Data(t, "onnx-testdata")
	var models []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "model.onnx" {
			models = append(models, p)
		}
		return err
	})
	sort.Strings(models)
	tmp := t.TempDir()
	counts := map[string]int{}
	var cannot, unsupported []string
	for _, p := range models {
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		outcome, detail := runConformance(p, tmp)
		counts[outcome]++
		switch outcome {
		case "mismatch":
			if knownDisagreements[filepath.Base(rel)] {
				counts["mismatch"]--
				counts["known disagreement"]++
				t.Logf("known disagreement: %s: %s", rel, detail)
				continue
			}
			t.Errorf("%s: %s", rel, detail)
		case "ort cannot run":
			cannot = append(cannot, rel+": "+detail)
		case "random":
			unsupported = append(unsupported, rel+": "+detail)
		case "unsupported":
			unsupported = append(unsupported, rel+": "+detail)
		}
	}
	t.Logf("%d models: %d matched, %d ORT cannot run, %d not expressible through the binding, %d random, %d known disagreements, %d mismatched",
		len(models), counts["match"], counts["ort cannot run"], counts["unsupported"], counts["random"], counts["known disagreement"], counts["mismatch"])
	if testing.Verbose() {
		for _, s := range cannot {
			t.Log("ORT cannot run: " + s)
		}
		for _, s := range unsupported {
			t.Log("unsupported: " + s)
		}
	}
	if counts["match"] < 900 {
		t.Errorf("only %d models matched; expected most of the ~1,070", counts["match"])
	}
}

func runConformance(path, tmp string) (outcome, detail string) {
	m, err := graph.LoadFile(path)
	if err != nil {
		return "mismatch", err.Error()
	}
	defer m.Close()
	ins, outs := ort.Interface(m)
	for _, v := range append(append([]*graph.Value{}, m.Graph.Inputs...), m.Graph.Outputs...) {
		if v.Const == nil && (v.Type == nil || v.Type.Kind != graph.KindTensor) {
			return "unsupported", fmt.Sprintf("value %q is a %s, not a tensor", v.Name, v.Type)
		}
		if v.Type.Elem == graph.String {
			return "unsupported", fmt.Sprintf("value %q is a string tensor", v.Name)
		}
	}
	if op := randomOp(m); op != "" {
		return "random", op + " draws random numbers: outputs are not reproducible"
	}
	set := filepath.Join(filepath.Dir(path), "test_data_set_0")
	opts := data.Options{}
	// Test data of this age stores bfloat16 values as uint16 bits, which
	// the data reader rightly refuses; such models are counted, not run.
	if len(ins) == 0 {
		return "unsupported", "models without inputs are not supported by the ORT binding"
	}
	for _, in := range ins {
		if in.DType == graph.BFloat16 {
			return "unsupported", "bfloat16 inputs are stored as uint16 in this test data"
		}
	}
	out := filepath.Join(tmp, filepath.Base(filepath.Dir(path)))
	res, err := infer.Run(infer.Options{Model: path, Data: set, DataOpts: opts, OutDir: out, Session: ort.DefaultOptions()})
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "binding") || strings.Contains(msg, "not supported"):
			return "unsupported", msg
		case strings.Contains(msg, "ONNX Runtime"):
			return "ort cannot run", msg
		}
		return "mismatch", msg
	}
	for i := range outs {
		want, err := readPB(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return "mismatch", err.Error()
		}
		got, err := data.ReadNpy(res.Files[i].File)
		if err != nil {
			return "mismatch", err.Error()
		}
		if want.DType == graph.Uint16 && got.DType == graph.BFloat16 {
			want.DType = graph.BFloat16
		}
		atol, ok := looserAtol[filepath.Base(filepath.Dir(path))]
		rtol := conformanceRtol
		if ok {
			rtol = 0
		} else {
			atol = conformanceAtol
		}
		if msg := compareTensors(want, got, atol, rtol); msg != "" {
			return "mismatch", fmt.Sprintf("output %q: %s", outs[i].Name, msg)
		}
	}
	return "match", ""
}

func readPB(path string) (*graph.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := graph.ParseTensor(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// compareTensors returns "" when got matches want within the backend
// test tolerances, else what differs.
func compareTensors(want, got *graph.Tensor, atol, rtol float64) string {
	if want.DType != got.DType {
		return fmt.Sprintf("dtype %s, want %s", got.DType, want.DType)
	}
	if fmt.Sprint(want.Dims) != fmt.Sprint(got.Dims) {
		return fmt.Sprintf("shape %v, want %v", got.Dims, want.Dims)
	}
	if !want.DType.IsFloat() {
		wb, err1 := want.Bytes()
		gb, err2 := got.Bytes()
		if err1 != nil || err2 != nil || string(wb) != string(gb) {
			return "values differ"
		}
		return ""
	}
	w, err1 := want.Float32s()
	g, err2 := got.Float32s()
	if err1 != nil || err2 != nil {
		return fmt.Sprint("cannot read values: ", err1, err2)
	}
	for i := range w {
		a, b := float64(g[i]), float64(w[i])
		if math.IsNaN(a) && math.IsNaN(b) || a == b {
			continue
		}
		if math.Abs(a-b) > atol+rtol*math.Abs(b) {
			return fmt.Sprintf("element %d is %g, want %g", i, a, b)
		}
	}
	return ""
}

// randomOp returns the first op of m that draws random numbers, or "".
func randomOp(m *graph.Model) string {
	found := ""
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			switch n.OpType {
			case "Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial", "Dropout":
				if found == "" && (n.OpType != "Dropout" || len(n.Inputs()) > 1) {
					found = n.OpType
				}
			}
		}
	})
	return found
}
