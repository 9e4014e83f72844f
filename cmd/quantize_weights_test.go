package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
	"github.com/optc-dev/optc/weightonly"
)

// TestQuantizeWeightsBertTiny runs `optc quantize --weights` the way a
// user does, on the zoo's BERT-like encoder (dynamic batch and sequence,
// weights in Constant nodes, layers sharing weights): int4 and int3, RTN
// and GPTQ, each compared with float in ORT on the calibration data. The
// output must hold MatMulNBits and no float MatMul weight, be smaller, be
// close to float, and GPTQ must not be worse than RTN at 3 bits.
func TestQuantizeWeightsBertTiny(t *testing.T) {
	ortenv.Require(t)
	model := testenv.Data(t, "zoo/bert_tiny/dynamic.onnx")
	calib := testenv.Data(t, "zoo/bert_tiny/calib.npz")
	dir := t.TempDir()
	cosine := map[string]float64{}
	for _, c := range []struct{ weights, rounding string }{{"int4", "rtn"}, {"int3", "rtn"}, {"int3", "gptq"}} {
		out := filepath.Join(dir, c.weights+c.rounding+".onnx")
		status, stdout, stderr := run(t, "quantize", model, "-o", out, "--weights", c.weights, "--weight-rounding", c.rounding,
			"--calib-data", calib, "--calib-batch", "8", "--json")
		if status != 0 {
			t.Fatalf("%s %s: exit %d: %s", c.weights, c.rounding, status, stderr)
		}
		var res weightonly.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		if res.Weights.Quantized < 3 || res.Compare == nil || res.OutputBytes >= res.FloatBytes {
			t.Fatalf("%s %s: %s", c.weights, c.rounding, stdout)
		}
		m, err := graph.LoadValid(out)
		if err != nil {
			t.Fatal(err)
		}
		nbits := testgraph.OpCounts(m.Graph)["MatMulNBits"]
		m.Close()
		if nbits < 6 {
			t.Fatalf("%s %s: %d MatMulNBits nodes, want at least 6 (4 MatMuls and 2 Gemms in 2 layers)", c.weights, c.rounding, nbits)
		}
		for _, o := range res.Compare.Outputs {
			if o.Name == "last_hidden_state" {
				cosine[c.weights+c.rounding] = float64(o.Cosine)
			}
		}
	}
	t.Logf("cosine of last_hidden_state to float: %v", cosine)
	if cosine["int4rtn"] < 0.99 || cosine["int3rtn"] < 0.95 {
		t.Errorf("too far from float: %v", cosine)
	}
	if cosine["int3gptq"] < cosine["int3rtn"] {
		t.Errorf("int3 gptq (cosine %.5f) is worse than rtn (%.5f)", cosine["int3gptq"], cosine["int3rtn"])
	}
	if _, err := os.Stat(filepath.Join(dir, "int3gptq.onnx")); err != nil {
		t.Fatal(err)
	}
}

// TestBuildWeightsBertTiny is `optc build --weights int4 --weight-rounding
// gptq` on the zoo's encoder: the ORT artifact (and its .ort twin) is the
// int4 model, checked against the input in ORT like every artifact.
func TestBuildWeightsBertTiny(t *testing.T) {
	ortenv.Require(t)
	stdout := buildBertTinyORT(t, filepath.Join(t.TempDir(), "b"), "--weights", "int4", "--weight-rounding", "gptq",
		"--calib-data", testenv.Data(t, "zoo/bert_tiny/calib.npz"))
	var rep struct {
		Weights   *weightonly.Result `json:"weights"`
		Artifacts []builtArtifact    `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Weights == nil || rep.Weights.Weights.Rounding != "gptq" {
		t.Fatalf("no gptq weights report: %s", stdout)
	}
	checkORTArtifacts(t, rep.Artifacts, "model.int4.onnx", "int4")
}
