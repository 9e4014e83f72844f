package graph

// This file is in package graph (not graph_test) so that the fuzz body can
// run the decoder without Parse's recover, which would turn a crash into
// an ordinary-looking error. It does not import tools/testenv: it finds
// its seeds by path itself.

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
)

// fuzzCacheDir is tools/testenv's CacheDir.
func fuzzCacheDir() string {
	if d := os.Getenv("OPTC_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "optc")
	}
	return filepath.Join(os.TempDir(), "optc-cache")
}

// fuzzSeedModels are small backend-test models covering subgraphs (If,
// Loop, Scan), sequences and optionals, tensor attributes and typed data.
var fuzzSeedModels = []string{
	"node/test_add/model.onnx",
	"node/test_if/model.onnx",
	"node/test_if_seq/model.onnx",
	"node/test_loop11/model.onnx",
	"node/test_scan_sum/model.onnx",
	"node/test_constant/model.onnx",
	"node/test_cast_FLOAT_to_FLOAT16/model.onnx",
	"node/test_sequence_map_identity_1_sequence/model.onnx",
	"node/test_optional_has_element/model.onnx",
	"node/test_range_float_type_positive_delta_expanded/model.onnx",
}

func FuzzParse(f *testing.F) {
	mnist, err := os.ReadFile(filepath.Join("..", "testdata", "models", "mnist_cnn.onnx"))
	if err != nil {
		f.Fatal(err)
	}
	seeds := [][]byte{mnist}
	for _, rel := range fuzzSeedModels {
		// The cache is optional here: use what has been fetched.
		if b, err := os.ReadFile(filepath.Join(fuzzCacheDir(), "onnx-testdata", rel)); err == nil {
			seeds = append(seeds, b)
		}
	}
	for _, s := range seeds {
		f.Add(s)
		for _, cut := range []int{1, 2, len(s) / 3, len(s) / 2, len(s) - 1} {
			if cut > 0 && cut < len(s) {
				f.Add(s[:cut])
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Decode without the recover in parse: a panic here is a bug even
		// though Parse would report it as an error.
		if mp, raws, err := unmarshalModel(data); err == nil {
			decodeModel(mp, raws, newExternalSource(""))
		}

		m, err := Parse(data, "")
		if err != nil {
			return
		}
		_ = m.Verify() // must not crash; the input need not be valid
		out, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal of a parsed model: %v", err)
		}
		m2, err := Parse(out, "")
		if err != nil {
			t.Fatalf("Parse of the re-encoded model: %v", err)
		}
		if (m.Verify() == nil) != (m2.Verify() == nil) {
			t.Fatalf("Verify changed its verdict after a round trip: %v / %v", m.Verify(), m2.Verify())
		}
		out2, err := Marshal(m2)
		if err != nil {
			t.Fatalf("Marshal of the re-parsed model: %v", err)
		}
		if !bytes.Equal(out, out2) {
			a, b := &onnxpb.ModelProto{}, &onnxpb.ModelProto{}
			if proto.Unmarshal(out, a) != nil || proto.Unmarshal(out2, b) != nil || !proto.Equal(a, b) {
				t.Fatalf("a second round trip changed the model")
			}
			t.Fatalf("a second round trip changed the bytes (the model is equal)")
		}
	})
}
