package graph

// Fuzz targets for the tensor-file decoder and for models with external
// data. Like FuzzParse they call the decoders without the recover in
// ParseTensor and parse, so a panic shows as a crash.

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
)

// fuzzSeedTensors are .pb tensor files of the backend tests: float, int64,
// bool, string, float16 and empty tensors.
var fuzzSeedTensors = []string{
	"node/test_add/test_data_set_0/input_0.pb",
	"node/test_argmax_default_axis_example/test_data_set_0/output_0.pb",
	"node/test_and2d/test_data_set_0/input_0.pb",
	"node/test_strnormalizer_export_monday_casesensintive_lower/test_data_set_0/input_0.pb",
	"node/test_cast_FLOAT_to_FLOAT16/test_data_set_0/output_0.pb",
	"node/test_reduce_sum_empty_axes_input_noop_example/test_data_set_0/input_1.pb",
}

// FuzzParseTensor: any input is decoded or refused without a panic, and
// what ParseTensor accepts writes back (MarshalTensor) and parses to the
// same bytes.
func FuzzParseTensor(f *testing.F) {
	for _, rel := range fuzzSeedTensors {
		if b, err := os.ReadFile(filepath.Join(fuzzCacheDir(), "onnx-testdata", rel)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if tp, raw, err := unmarshalTensor(data); err == nil && tp.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			if tn, err := decodeTensor(tp, raw, nil); err == nil {
				_, _ = tn.Bytes()
			}
		}
		tn, err := ParseTensor(data)
		if err != nil {
			return
		}
		out, err := MarshalTensor(tn)
		if err != nil {
			t.Fatalf("MarshalTensor of a parsed tensor: %v", err)
		}
		again, err := ParseTensor(out)
		if err != nil {
			t.Fatalf("ParseTensor of the re-encoded tensor: %v", err)
		}
		if out2, err := MarshalTensor(again); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("a second round trip changed the tensor (err %v)", err)
		}
	})
}

// externalSeed is a model with one initializer w (float32[2,2]) in the side
// file w.data at the given offset, read by an Identity node.
func externalSeed(offset, length string) []byte {
	return externalSeedOf(onnxpb.TensorProto_FLOAT, []int64{2, 2}, offset, length)
}

// externalSeedOf is externalSeed with the initializer's dtype and dims given.
func externalSeedOf(dtype onnxpb.TensorProto_DataType, dims []int64, offset, length string) []byte {
	kv := func(k, v string) *onnxpb.StringStringEntryProto {
		return &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(v)}
	}
	vi := func(name string) *onnxpb.ValueInfoProto {
		dims := []*onnxpb.TensorShapeProto_Dimension{
			{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}},
			{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}},
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: dims}}}}}
	}
	ext := []*onnxpb.StringStringEntryProto{kv("location", "w.data"), kv("offset", offset)}
	if length != "" {
		ext = append(ext, kv("length", length))
	}
	mp := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("g"),
			Node: []*onnxpb.NodeProto{{Name: proto.String("id"), OpType: proto.String("Identity"), Input: []string{"w"}, Output: []string{"y"}}},
			Initializer: []*onnxpb.TensorProto{{
				Name: proto.String("w"), Dims: dims, DataType: proto.Int32(int32(dtype)),
				DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(), ExternalData: ext,
			}},
			Output: []*onnxpb.ValueInfoProto{vi("y")},
		},
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(mp)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzLoadExternal writes a model and its side file w.data into a folder
// and loads it as LoadFile does, then reads every initializer: locations,
// offsets and lengths off the file must be checked, never trusted.
func FuzzLoadExternal(f *testing.F) {
	side := make([]byte, 64)
	for i := range side {
		side[i] = byte(i)
	}
	f.Add(externalSeed("0", "16"), side)
	f.Add(externalSeed("48", ""), side)
	f.Add(externalSeed("9223372036854775800", "16"), side)
	f.Add(externalSeed("0", "16"), []byte{})
	// No length and a dtype or dims that fix no size: once read as "the rest
	// of the file".
	f.Add(externalSeedOf(onnxpb.TensorProto_UNDEFINED, []int64{2, 2}, "63", ""), side)
	f.Add(externalSeedOf(onnxpb.TensorProto_FLOAT, []int64{1 << 40, 1 << 40}, "63", ""), side)
	dir := f.TempDir()
	modelPath, sidePath := filepath.Join(dir, "model.onnx"), filepath.Join(dir, "w.data")
	f.Fuzz(func(t *testing.T, model, data []byte) {
		if err := os.WriteFile(modelPath, model, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sidePath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mp, raws, err := unmarshalModel(model)
		if err != nil {
			return
		}
		src := newExternalSource(dir)
		m, err := decodeModel(mp, raws, src)
		if err != nil {
			return
		}
		src.model = m
		defer m.Close()
		m.Graph.Walk(func(g *Graph) {
			for _, v := range g.Initializers {
				b, err := v.Const.Bytes()
				if err == nil && v.Const.IsExternal() && v.Const.DType != String {
					if want := v.Const.ByteSize(); int64(len(b)) != want {
						t.Fatalf("initializer %q: %d bytes read, %d wanted", v.Name, len(b), want)
					}
				}
			}
		})
		_ = m.Verify()
	})
}
