package graph

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/testenv"
)

// conformanceModels lists every model of the ONNX backend test data.
func conformanceModels(t *testing.T) []string {
	root := testenv.Data(t, "onnx-testdata")
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".onnx") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 1000 {
		t.Fatalf("found %d models under %s, want the whole backend test data (~1,070)", len(paths), root)
	}
	return paths
}

// roundTrip loads path, writes it back, and checks the result equals the
// file (protobuf equality). It reports whether the bytes are identical.
func roundTrip(t *testing.T, path string) bool {
	t.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return false
	}
	defer m.Close()
	out, err := Marshal(m)
	if err != nil {
		t.Errorf("%s: save: %v", path, err)
		return false
	}
	want, got := &onnxpb.ModelProto{}, &onnxpb.ModelProto{}
	if err := proto.Unmarshal(orig, want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := proto.Unmarshal(out, got); err != nil {
		t.Errorf("%s: output does not parse: %v", path, err)
		return false
	}
	if !proto.Equal(want, got) {
		t.Errorf("%s: load+save changed the model", path)
		return false
	}
	return bytes.Equal(orig, out)
}

func TestRoundTripConformance(t *testing.T) {
	paths := conformanceModels(t)
	identical := 0
	for _, p := range paths {
		if roundTrip(t, p) {
			identical++
		}
	}
	t.Logf("%d models round-tripped equal, %d byte-identical", len(paths), identical)
}

func TestVerifyConformance(t *testing.T) {
	for _, p := range conformanceModels(t) {
		m, err := LoadFile(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if err := m.Verify(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		m.Close()
	}
}

func TestRoundTripRealModels(t *testing.T) {
	dir := testenv.Data(t, "ocr-models")
	paths := []string{
		filepath.Join(dir, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
		filepath.Join(dir, "ch_PP-OCRv4_det_infer.onnx"),
		filepath.Join(dir, "ch_PP-OCRv4_rec_infer.onnx"),
		testenv.Model("mnist_cnn.onnx"),
	}
	for _, p := range paths {
		identical := roundTrip(t, p)
		t.Logf("%s: byte-identical %v", filepath.Base(p), identical)
	}
}

// TestRepeatedDeclarationsRoundTrip: a value declared twice (an untyped
// graph output and a typed value_info) is written back as it was.
func TestRepeatedDeclarationsRoundTrip(t *testing.T) {
	typ := &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1)}}}
	other := &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(7)}}}
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Node:      []*onnxpb.NodeProto{{OpType: proto.String("Relu"), Input: []string{"x"}, Output: []string{"y"}}},
			Input:     []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: typ}},
			Output:    []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
			ValueInfo: []*onnxpb.ValueInfoProto{{Name: proto.String("y"), Type: typ}, {Name: proto.String("x"), Type: other}},
		}}
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(out, got); err != nil || !proto.Equal(got, mp) {
		t.Errorf("declarations changed on save: %v", err)
	}
	// Once the type changes, every declaration carries the new one.
	m.Graph.Outputs[0].Type = TensorType(Float, StaticShape(2))
	out, _ = Marshal(m)
	proto.Unmarshal(out, got)
	if got.Graph.Output[0].Type == nil || got.Graph.ValueInfo[0].Type.GetTensorType().GetShape() == nil {
		t.Error("a changed type was not written to every declaration")
	}
}
