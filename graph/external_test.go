package graph_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
)

// weightsModel returns a model whose initializers have the given float
// counts (named t0, t1, ...), each read by an Identity node whose output
// is a graph output. Element i of tensor k is k*1000+i.
func weightsModel(t *testing.T, counts ...int) *graph.Model {
	t.Helper()
	g := graph.NewGraph("weights")
	m := newModel(g)
	for k, n := range counts {
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(k*1000 + i)
		}
		name := "t" + string(rune('0'+k))
		w := mustInit(t, g, mustF32(t, name, []int64{int64(n)}, vals))
		out := mustValue(t, g, "out"+name)
		mustNode(t, g, "id"+name, "Identity", []*graph.Value{w}, []*graph.Value{out})
		g.Outputs = append(g.Outputs, out)
	}
	mustVerify(t, m)
	return m
}

func TestSaveExternalAlways(t *testing.T) {
	// 16 B inline; 2 KiB; 80,000 B (aligned); 1,200 B; 68,000 B (aligned).
	m := weightsModel(t, 4, 512, 20000, 300, 17000)
	orig := mustMarshal(t, m)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.onnx")
	if err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalAlways, SizeThreshold: 1024}); err != nil {
		t.Fatal(err)
	}
	side, err := os.ReadFile(filepath.Join(dir, "model.onnx.data"))
	if err != nil {
		t.Fatalf("side file: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 4096 {
		t.Fatalf("model file holds tensor data: %v bytes, %v", fi.Size(), err)
	}
	if left := tempLeftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}

	r, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mustVerify(t, r)
	type span struct{ off, n int64 }
	spans := map[string]span{}
	for i, v := range r.Graph.Initializers {
		want, _ := m.Graph.Initializers[i].Const.Bytes()
		got, err := v.Const.Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: reloaded bytes differ (%v)", v.Name, err)
		}
		e := v.Const.External()
		if len(want) < 1024 {
			if e != nil || v.Const.IsExternal() {
				t.Errorf("%s (%d bytes, under the threshold) went to the side file", v.Name, len(want))
			}
			continue
		}
		if e == nil || !v.Const.IsExternal() {
			t.Fatalf("%s (%d bytes) is not external", v.Name, len(want))
		}
		if e.Location != "model.onnx.data" || e.Length != int64(len(want)) {
			t.Errorf("%s: location %q length %d", v.Name, e.Location, e.Length)
		}
		if !bytes.Equal(side[e.Offset:e.Offset+e.Length], want) {
			t.Errorf("%s: side file bytes at %d differ", v.Name, e.Offset)
		}
		if len(want) >= 64<<10 && e.Offset%4096 != 0 {
			t.Errorf("%s (%d bytes) at offset %d, not 4096-aligned", v.Name, len(want), e.Offset)
		}
		spans[v.Name] = span{e.Offset, e.Length}
	}
	// Small tensors are packed without padding: t1 at 0, t3 right after t2.
	if spans["t1"].off != 0 || spans["t3"].off != spans["t2"].off+spans["t2"].n {
		t.Errorf("unexpected layout %v", spans)
	}
	if want := spans["t4"].off + spans["t4"].n; int64(len(side)) != want {
		t.Errorf("side file is %d bytes, want %d", len(side), want)
	}

	// Re-saved inline, the model is the original.
	sameModel(t, orig, mustMarshal(t, r))
	inl := saveReload(t, r)
	for _, v := range inl.Graph.Initializers {
		if v.Const.IsExternal() {
			t.Errorf("%s still external after an inline save", v.Name)
		}
	}
	sameModel(t, orig, mustMarshal(t, inl))
}

func TestSaveExternalLocationAndResave(t *testing.T) {
	m := weightsModel(t, 300, 20)
	orig := mustMarshal(t, m)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	opts := graph.SaveOptions{External: graph.ExternalAlways, SizeThreshold: 100, Location: "w.bin"}
	if err := graph.Save(m, path, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "w.bin")); err != nil {
		t.Fatalf("side file at the given location: %v", err)
	}
	r, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if e := r.Graph.Initializers[0].Const.External(); e == nil || e.Location != "w.bin" {
		t.Fatalf("external = %+v", e)
	}
	// Saving over the files the model was loaded from works: the data is
	// read before the new files replace the old ones.
	if err := graph.Save(r, path, opts); err != nil {
		t.Fatal(err)
	}
	r2, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	sameModel(t, orig, mustMarshal(t, r2))
}

func TestSaveExternalAutoKeepsSmallModelsInline(t *testing.T) {
	m := weightsModel(t, 20000, 4)
	for _, mode := range []graph.ExternalMode{graph.ExternalAuto, graph.ExternalNever} {
		dir := t.TempDir()
		path := filepath.Join(dir, "model.onnx")
		if err := graph.Save(m, path, graph.SaveOptions{External: mode, SizeThreshold: 16}); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("mode %d: folder holds %q, want only the model", mode, names)
		}
		r, err := graph.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range r.Graph.Initializers {
			if v.Const.IsExternal() {
				t.Errorf("mode %d: %s is external", mode, v.Name)
			}
		}
		sameModel(t, mustMarshal(t, m), mustMarshal(t, r))
		r.Close()
	}
}

func TestSaveRefusesExternalLocationOutsideFolder(t *testing.T) {
	m := weightsModel(t, 300)
	parent := t.TempDir()
	dir := filepath.Join(parent, "models")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.onnx")
	for _, loc := range []string{"../escape.bin", filepath.Join(parent, "abs.bin"), "a/../../escape.bin"} {
		err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalAlways, Location: loc})
		wantErr(t, err, path, loc)
	}
	for _, d := range []string{parent, dir} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() != "models" {
				t.Errorf("refused save left %s in %s", e.Name(), d)
			}
		}
	}
}

// extModelFile writes into dir a model whose one initializer w
// (float32[4], 16 bytes) has the given external_data entries, and returns
// the model's path.
func extModelFile(t *testing.T, dir string, kv ...string) string {
	t.Helper()
	tp := &onnxpb.TensorProto{Name: pstr("w"), DataType: proto.Int32(int32(graph.Float)), Dims: []int64{4},
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum()}
	for i := 0; i+1 < len(kv); i += 2 {
		tp.ExternalData = append(tp.ExternalData, &onnxpb.StringStringEntryProto{Key: pstr(kv[i]), Value: pstr(kv[i+1])})
	}
	mp := pmodel(&onnxpb.GraphProto{
		Name:        pstr("ext"),
		Initializer: []*onnxpb.TensorProto{tp},
		Node:        []*onnxpb.NodeProto{pnode("id", "Identity", []string{"w"}, []string{"y"})},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 4)},
	})
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, marshalProto(t, mp), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sideData is 64 bytes: float32 values 0..15.
func sideData() []byte {
	var vals []any
	for i := range 16 {
		vals = append(vals, float32(i))
	}
	return le(vals...)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExternalDataLoads(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
		want []float32
	}{
		{"offset and length", []string{"location", "data.bin", "offset", "16", "length", "16"}, []float32{4, 5, 6, 7}},
		{"no offset", []string{"location", "data.bin", "length", "16"}, []float32{0, 1, 2, 3}},
		{"at the very end", []string{"location", "data.bin", "offset", "48", "length", "16"}, []float32{12, 13, 14, 15}},
		{"no length, more data follows", []string{"location", "data.bin", "offset", "32"}, []float32{8, 9, 10, 11}},
		{"checksum is carried", []string{"location", "data.bin", "checksum", "abc"}, []float32{0, 1, 2, 3}},
		{"symlink inside the folder", []string{"location", "inside-link.bin", "offset", "0"}, []float32{0, 1, 2, 3}},
		{"subfolder", []string{"location", "sub/data.bin", "offset", "4"}, []float32{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "data.bin"), sideData())
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			writeFile(t, filepath.Join(dir, "sub", "data.bin"), sideData())
			if err := os.Symlink("data.bin", filepath.Join(dir, "inside-link.bin")); err != nil {
				t.Fatal(err)
			}
			m, err := graph.LoadFile(extModelFile(t, dir, tc.kv...))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			mustVerify(t, m)
			w := m.Graph.Value("w").Const
			if !w.IsExternal() {
				t.Fatalf("w is not external")
			}
			got, err := w.Float32s()
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Float32s = %v, %v; want %v", got, err, tc.want)
			}
			// Saved inline, the data comes along.
			r := saveReload(t, m)
			if got, _ := r.Graph.Value("w").Const.Float32s(); !slices.Equal(got, tc.want) || r.Graph.Value("w").Const.IsExternal() {
				t.Errorf("after inline save: %v", got)
			}
		})
	}
}

func TestExternalDataRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kv    []string
		setup func(t *testing.T, dir string) // after data.bin is written
		want  []string
	}{
		{"parent folder", []string{"location", "../data.bin"}, nil, []string{"../data.bin", "leaves the model's folder"}},
		{"parent inside path", []string{"location", "sub/../../data.bin"}, nil, []string{"leaves the model's folder"}},
		{"absolute", []string{"location", "/ABS/data.bin"}, nil, []string{"data.bin", "leaves the model's folder"}},
		{"symlink leading outside", []string{"location", "link.bin"}, func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(dir), "data.bin"), filepath.Join(dir, "link.bin")); err != nil {
				t.Fatal(err)
			}
		}, []string{"link.bin", "outside"}},
		{"symlinked folder leading outside", []string{"location", "out/data.bin"}, func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Dir(dir), filepath.Join(dir, "out")); err != nil {
				t.Fatal(err)
			}
		}, []string{"out/data.bin", "outside"}},
		{"missing side file", []string{"location", "nothere.bin"}, nil, []string{"nothere.bin"}},
		{"offset past the end", []string{"location", "data.bin", "offset", "100"}, nil, []string{"data.bin", "past the end"}},
		{"data runs past the end", []string{"location", "data.bin", "offset", "52", "length", "16"}, nil, []string{"data.bin", "past the end"}},
		{"negative offset", []string{"location", "data.bin", "offset", "-16"}, nil, []string{"offset", "-16"}},
		{"offset not a number", []string{"location", "data.bin", "offset", "ten"}, nil, []string{"offset", "ten"}},
		{"offset overflows", []string{"location", "data.bin", "offset", "99999999999999999999"}, nil, []string{"offset"}},
		{"length not a number", []string{"location", "data.bin", "length", "16b"}, nil, []string{"length", "16b"}},
		{"negative length", []string{"location", "data.bin", "length", "-1"}, nil, []string{"length", "-1"}},
		{"length disagrees with dims", []string{"location", "data.bin", "length", "12"}, nil, []string{"length 12", "16"}},
		{"length too large", []string{"location", "data.bin", "length", "64"}, nil, []string{"length 64", "16"}},
		{"no location", []string{"offset", "0", "length", "16"}, nil, []string{"no location"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "model")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// The data exists both inside and next to the model's folder, so
			// a refusal is not just a missing file.
			writeFile(t, filepath.Join(dir, "data.bin"), sideData())
			writeFile(t, filepath.Join(parent, "data.bin"), sideData())
			kv := slices.Clone(tc.kv)
			for i := range kv {
				if kv[i] == "/ABS/data.bin" {
					kv[i] = filepath.Join(dir, "data.bin")
				}
			}
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			path := extModelFile(t, dir, kv...)
			m, err := graph.LoadFile(path)
			if err == nil {
				m.Close()
			}
			wantErr(t, err, append([]string{path, `"w"`}, tc.want...)...)
		})
	}
}

func TestExternalDataNeedsAFolder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data.bin"), sideData())
	b, err := os.ReadFile(extModelFile(t, dir, "location", "data.bin", "length", "16"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = graph.Parse(b, "")
	wantErr(t, err, "data.bin", "not loaded from a file")
	// With the folder given, the same bytes load.
	m, err := graph.Parse(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, err := m.Graph.Value("w").Const.Float32s(); err != nil || !slices.Equal(got, []float32{0, 1, 2, 3}) {
		t.Errorf("Float32s = %v, %v", got, err)
	}
}

// The side file is mapped when a tensor is first read; one that has
// changed since the model was loaded must give errors, never a crash.
func TestExternalDataChangedAfterLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kv     []string
		change func(t *testing.T, side string)
	}{
		{"truncated, length given", []string{"location", "data.bin", "offset", "32", "length", "16"}, func(t *testing.T, side string) {
			writeFile(t, side, sideData()[:8])
		}},
		{"truncated, no length", []string{"location", "data.bin", "offset", "32"}, func(t *testing.T, side string) {
			writeFile(t, side, sideData()[:8])
		}},
		{"truncated to empty", []string{"location", "data.bin", "offset", "32"}, func(t *testing.T, side string) {
			writeFile(t, side, nil)
		}},
		{"removed", []string{"location", "data.bin", "length", "16"}, func(t *testing.T, side string) {
			if err := os.Remove(side); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by a folder", []string{"location", "data.bin", "length", "16"}, func(t *testing.T, side string) {
			if err := os.Remove(side); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(side, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			side := filepath.Join(dir, "data.bin")
			writeFile(t, side, sideData())
			path := extModelFile(t, dir, tc.kv...)
			m, err := graph.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			tc.change(t, side)
			w := m.Graph.Value("w").Const
			if b, err := w.Bytes(); err == nil {
				t.Fatalf("Bytes = %x, want an error", b)
			}
			if _, err := w.Float32s(); err == nil {
				t.Fatalf("Float32s gave no error")
			}
			// Saving the model inline fails cleanly too, leaving nothing.
			out := filepath.Join(t.TempDir(), "out.onnx")
			err = graph.Save(m, out, graph.SaveOptions{})
			wantErr(t, err, out, `"w"`)
			if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("failed save left %s", out)
			}
			if left := tempLeftovers(t, filepath.Dir(out)); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
	}
}

func TestExternalDataSharedFileWithoutLength(t *testing.T) {
	// Two tensors in one side file, neither with a length: each reads its
	// own 16 bytes, not the rest of the file.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data.bin"), sideData())
	ext := func(name, off string) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: pstr(name), DataType: proto.Int32(int32(graph.Float)), Dims: []int64{4},
			DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*onnxpb.StringStringEntryProto{
				{Key: pstr("location"), Value: pstr("data.bin")}, {Key: pstr("offset"), Value: pstr(off)}}}
	}
	mp := pmodel(&onnxpb.GraphProto{
		Name:        pstr("shared"),
		Initializer: []*onnxpb.TensorProto{ext("a", "0"), ext("b", "16")},
		Node:        []*onnxpb.NodeProto{pnode("add", "Add", []string{"a", "b"}, []string{"y"})},
		Output:      []*onnxpb.ValueInfoProto{vinfo("y", graph.Float, 4)},
	})
	path := filepath.Join(dir, "model.onnx")
	writeFile(t, path, marshalProto(t, mp))
	m, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for name, want := range map[string][]float32{"a": {0, 1, 2, 3}, "b": {4, 5, 6, 7}} {
		w := m.Graph.Value(name).Const
		b, err := w.Bytes()
		if err != nil || len(b) != 16 {
			t.Errorf("%s: Bytes gave %d bytes, %v; want 16", name, len(b), err)
		}
		if got, err := w.Float32s(); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: Float32s = %v, %v; want %v", name, got, err, want)
		}
	}
	// An inline save writes 16 bytes per tensor.
	r := saveReload(t, m)
	for _, v := range r.Graph.Initializers {
		if b, _ := v.Const.Bytes(); len(b) != 16 {
			t.Errorf("%s saved with %d bytes", v.Name, len(b))
		}
	}
}

// A model over the protobuf limit is serialized with the tensors still in
// its side file referenced there, and the bytes parse back to the same
// data; tensors made since loading are inline. Its digest is the one of
// the model with everything inline.
func TestMarshalReferencing(t *testing.T) {
	m := weightsModel(t, 4, 20000, 17000)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.onnx")
	if err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalAlways}); err != nil {
		t.Fatal(err)
	}
	loaded, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	inline := mustMarshal(t, loaded)
	wantDigest := sha256.Sum256(inline)
	made, err := graph.NewFloat32Tensor("t2", []int64{2}, []float32{7, 8})
	if err != nil {
		t.Fatal(err)
	}

	small, err := graph.MarshalReferencing(loaded)
	if err != nil || small.Dir != "" || !bytes.Equal(small.Bytes, inline) {
		t.Fatalf("under the limit: dir %q, inline %v (%v)", small.Dir, bytes.Equal(small.Bytes, inline), err)
	}
	defer graph.SetProtobufLimit(4096)()
	if _, err := graph.Marshal(loaded); !errors.Is(err, graph.ErrTooLarge) {
		t.Fatalf("Marshal over the limit: %v", err)
	}
	digest, err := graph.Digest(loaded)
	if err != nil || digest != hex.EncodeToString(wantDigest[:]) {
		t.Errorf("digest %s, want %x (%v)", digest, wantDigest, err)
	}
	loaded.Graph.Initializers[2].Const = made
	s, err := graph.MarshalReferencing(loaded)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir != dir || len(s.Bytes) > 4096 {
		t.Fatalf("over the limit: dir %q (want %q), %d bytes", s.Dir, dir, len(s.Bytes))
	}
	back, err := s.Parse()
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	for i, v := range back.Graph.Initializers {
		want, _ := loaded.Graph.Initializers[i].Const.Bytes()
		got, err := v.Const.Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: bytes differ (%v)", v.Name, err)
		}
		if wantExt := i == 1; v.Const.IsExternal() != wantExt {
			t.Errorf("%s: external %v, want %v", v.Name, v.Const.IsExternal(), wantExt)
		}
	}
	if _, err := graph.Parse(s.Bytes, ""); err == nil {
		t.Error("the referencing bytes parsed without their folder")
	}
}
