package cmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/ortenv"
)

// TestBuildOverProtobufLimit builds a model whose weights are in a side
// file, with the protobuf limit lowered to 1 MiB (OPTC_PROTOBUF_LIMIT) so
// that the 2 MiB model takes the path of a model over 2 GiB: calibration,
// quantization, the checks and the timing read its weights where they lie;
// float artifacts get side files, recorded in the manifest; the deployed
// FP32 model gets no .ort (a flatbuffer cannot hold it) and its Triton copy
// keeps its side file; the manifest digests the input's side file too.
// make bench-big runs the real 2.1 GiB case.
func TestBuildOverProtobufLimit(t *testing.T) {
	ortenv.Require(t)
	bin := buildOptc(t)
	dir := t.TempDir()
	model, _ := writeBigExternalModel(t, dir, 512) // w1: float32[1024,512], 2 MiB
	weights, err := os.ReadFile(filepath.Join(dir, "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(weights)
	weightsDigest := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		name  string
		args  []string
		files []string // side files expected
		ort   bool     // ort/model.ort expected
	}{
		{"int8", []string{"--int8", "--calib-data", "random", "--calib-samples", "16", "--placement", "all-int8"},
			[]string{"model.fp32.onnx.data", "tensorrt/model.fp16.onnx.data"}, true},
		{"fp32", nil, []string{"model.fp32.onnx.data", "triton/model_repository/big/1/model.onnx.data", "openvino/model.onnx.data"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"build", model, "--target", "all", "-o", out,
				"--latency-batches", "1", "--latency-duration", "200ms"}, c.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "OPTC_PROTOBUF_LIMIT=1048576")
			stdout, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("optc build: %v: %s", err, stderr)
			}
			var man struct {
				Artifacts      []struct{ Path, Kind string }
				InputSideFiles []struct{ Path, SHA256 string } `json:"input_side_files"`
			}
			b, err := os.ReadFile(filepath.Join(out, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &man); err != nil {
				t.Fatal(err)
			}
			if len(man.InputSideFiles) != 1 || man.InputSideFiles[0].Path != "weights.bin" || man.InputSideFiles[0].SHA256 != weightsDigest {
				t.Errorf("input side files %+v, want weights.bin with sha256 %s", man.InputSideFiles, weightsDigest)
			}
			recorded := map[string]string{}
			for _, a := range man.Artifacts {
				recorded[a.Path] = a.Kind
			}
			for _, f := range c.files {
				if recorded[f] != "external-data" {
					t.Errorf("%s: recorded as %q, want external-data (manifest: %v)", f, recorded[f], recorded)
				}
			}
			_, err = os.Stat(filepath.Join(out, "ort", "model.ort"))
			if c.ort != (err == nil) {
				t.Errorf("ort/model.ort exists: %v, want %v", err == nil, c.ort)
			}
			if !c.ort && !strings.Contains(string(stdout), "which the ORT format cannot hold") {
				t.Errorf("the build does not say why there is no .ort:\n%s", stdout)
			}
			if !strings.Contains(string(stdout), "1.00000") {
				t.Errorf("no artifact agrees with the input (cosine 1.00000):\n%s", stdout)
			}
		})
	}
}
