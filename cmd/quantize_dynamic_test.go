package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestQuantizeDynamicZoo runs `optc quantize --dynamic` the way a user
// does, with its defaults, on the zoo's BERT-like encoder (dynamic batch
// and sequence, weights in Constant nodes, layers sharing weights) and
// small ViT, at ORT levels all (the default) and disable: the output holds
// MatMulInteger and no float MatMul weight, passes the guard (cosine >=
// 0.99 on every output), is smaller, and the same run writes the same
// bytes.
func TestQuantizeDynamicZoo(t *testing.T) {
	ortenv.Require(t)
	bert, vit := testenv.Data(t, "zoo/bert_tiny/dynamic.onnx"), testenv.Data(t, "zoo/vit_tiny/dynbatch.onnx")
	for _, c := range []struct {
		name, model string
		args        []string
		layers      int // MatMul/Gemm nodes with a constant weight
	}{
		{"bert_tiny", bert, []string{"--calib-data", testenv.Data(t, "zoo/bert_tiny/calib.npz"), "--shape", "input_ids:1,16", "--shape", "attention_mask:1,16"}, 9},
		{"vit_tiny", vit, []string{"--calib-data", testenv.Data(t, "zoo/vit_tiny/calib.npy")}, 0},
	} {
		for _, level := range []string{"all", "disable"} {
			t.Run(c.name+" "+level, func(t *testing.T) {
				dir := t.TempDir()
				var first []byte
				for i, out := range []string{filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx")} {
					args := append([]string{"quantize", c.model, "-o", out, "--dynamic", "--level", level, "--json"}, c.args...)
					status, stdout, stderr := run(t, args...)
					if status != 0 {
						t.Fatalf("exit %d: %s", status, stderr)
					}
					b, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					if i == 1 {
						if !bytes.Equal(first, b) {
							t.Fatal("two runs wrote different bytes")
						}
						break
					}
					first = b
					var res ptq.Result
					if err := json.Unmarshal([]byte(stdout), &res); err != nil {
						t.Fatal(err)
					}
					if !res.Quantize.Dynamic || res.Guard == nil || !res.Guard.Pass || len(res.Guard.Checks) == 0 || res.Int8Bytes >= res.FloatBytes {
						t.Fatalf("result: %s", stdout)
					}
					if c.layers > 0 && len(res.Quantize.Quantized) != c.layers {
						t.Errorf("%d layers quantized, want %d", len(res.Quantize.Quantized), c.layers)
					}
					for _, o := range res.Accuracy.Outputs {
						t.Logf("%s: cosine %.5f", o.Name, float64(o.Cosine))
					}
					m, err := graph.LoadValid(out)
					if err != nil {
						t.Fatal(err)
					}
					ops := map[string]int{}
					for _, n := range m.Graph.Nodes {
						ops[n.OpType]++
						if (n.OpType == "MatMul" || n.OpType == "Gemm") && n.Input(1).Const != nil {
							t.Errorf("%s still reads a float weight", n)
						}
					}
					m.Close()
					if ops["MatMulInteger"] == 0 || ops["MatMulInteger"] != ops["DynamicQuantizeLinear"] {
						t.Errorf("ops: %v", ops)
					}
				}
			})
		}
	}
}

// TestQuantizeDynamicEvalOnly: without --calib-data the evaluation data
// checks the float model and the result, and --shape still fixes the
// latency runs' dynamic dims.
func TestQuantizeDynamicEvalOnly(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Data(t, "zoo/bert_tiny/dynamic.onnx")
	eval := testenv.Data(t, "zoo/bert_tiny/calib.npz")
	status, stdout, stderr := run(t, "quantize", model, "-o", filepath.Join(t.TempDir(), "q.onnx"), "--dynamic",
		"--eval-data", eval, "--shape", "input_ids:1,16", "--shape", "attention_mask:1,16", "--json")
	if status != 0 {
		t.Fatalf("exit %d: %s", status, stderr)
	}
	var res ptq.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Guard == nil || !res.Guard.Pass || res.Guard.Data != eval || len(res.Latency) == 0 {
		t.Fatalf("result: %s", stdout)
	}
}

// TestBuildDynamicBertTiny is `optc build --dynamic` on the zoo's encoder:
// the ORT artifact (and its .ort twin) is the dynamic INT8 model, checked
// against the input in ORT like every artifact, and the build needs no
// calibration data.
func TestBuildDynamicBertTiny(t *testing.T) {
	ortenv.Require(t)
	stdout := buildBertTinyORT(t, filepath.Join(t.TempDir(), "b"), "--dynamic")
	var rep struct {
		Dynamic   *ptq.Result     `json:"dynamic"`
		Artifacts []builtArtifact `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Dynamic == nil || !rep.Dynamic.Quantize.Dynamic || rep.Dynamic.Guard == nil || !rep.Dynamic.Guard.Pass {
		t.Fatalf("no passing dynamic report: %s", stdout)
	}
	for _, a := range checkORTArtifacts(t, rep.Artifacts, "model.int8.dynamic.onnx", "int8-dynamic") {
		for name, c := range a.Check.Cosine {
			if c < 0.99 {
				t.Errorf("%s: cosine of %s %.5f to the input", a.Path, name, c)
			}
		}
	}

	// With --int8 and calibration data as well: no target takes static
	// INT8, so nothing is calibrated (and no calibration file is listed),
	// and the checks on the calibration data count as held out.
	out2 := filepath.Join(t.TempDir(), "b")
	stdout = buildBertTinyORT(t, out2, "--dynamic", "--int8", "--calib-data", testenv.Data(t, "zoo/bert_tiny/calib.npz"))
	var rep2 struct {
		EvalHeldOut bool `json:"eval_held_out"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out2, "calibration.json")); err == nil || !rep2.EvalHeldOut {
		t.Errorf("--int8 --dynamic: calibration.json written (%v) or checks not held out (%v)", err, rep2.EvalHeldOut)
	}
}

// builtArtifact is one row of the artifacts list of `optc build --json`.
type builtArtifact struct {
	Path, Precision string
	Check           *struct{ Cosine map[string]float64 }
}

// buildBertTinyORT runs `optc build --target ort` with flags on the zoo's
// bert_tiny encoder (inputs pinned to 1x16, 200ms latency runs) into out and
// returns its --json report, failing the test unless it exits 0. The
// dynamic and weight-only builds are tested this way.
func buildBertTinyORT(t *testing.T, out string, flags ...string) string {
	t.Helper()
	args := append([]string{"build", testenv.Data(t, "zoo/bert_tiny/dynamic.onnx"), "-o", out, "--target", "ort"}, flags...)
	args = append(args, "--shape", "input_ids:1,16", "--shape", "attention_mask:1,16", "--latency-duration", "200ms", "--json", "-q")
	status, stdout, stderr := run(t, args...)
	if status != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(flags, " "), status, stderr)
	}
	return stdout
}

// checkORTArtifacts checks the artifacts of an `optc build --target ort`
// report: the ONNX model (file) and its .ort twin are both at precision,
// and every artifact at precision was checked against the input. It
// returns the artifacts at precision.
func checkORTArtifacts(t *testing.T, arts []builtArtifact, file, precision string) []builtArtifact {
	t.Helper()
	found := map[string]string{}
	var at []builtArtifact
	for _, a := range arts {
		found[a.Path] = a.Precision
		if a.Precision != precision {
			continue
		}
		if a.Check == nil {
			t.Fatalf("%s was not checked against the input", a.Path)
		}
		at = append(at, a)
	}
	if found[file] != precision || found["ort/model.ort"] != precision {
		t.Fatalf("artifacts %v, want %s and ort/model.ort at %s", found, file, precision)
	}
	return at
}
