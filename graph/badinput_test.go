package graph_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testenv"
)

// topFields returns the [start, end) byte spans of a message's top-level
// fields.
func topFields(t *testing.T, b []byte) [][2]int {
	t.Helper()
	var spans [][2]int
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			t.Fatalf("bad tag at %d", off)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			t.Fatalf("bad field %d at %d", num, off)
		}
		spans = append(spans, [2]int{off, off + n + m})
		off += n + m
	}
	return spans
}

// loadFails writes data to a file and checks LoadFile refuses it with an
// error naming the file.
func loadFails(t *testing.T, data []byte, want ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := graph.LoadFile(path)
	if err == nil {
		m.Close()
	}
	wantErr(t, err, append([]string{path}, want...)...)
	// Parse of the same bytes fails the same way (no file name then).
	if _, err := graph.Parse(data, ""); err == nil {
		t.Errorf("Parse accepted what LoadFile refused")
	}
}

func TestLoadFileEmptyMissingFolder(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.onnx")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{empty, "empty"},
		{filepath.Join(dir, "missing.onnx"), "no such file"},
		{filepath.Join(dir, "nodir", "missing.onnx"), "no such file"},
		{dir, "folder"},
		{filepath.Join(empty, "under-a-file.onnx"), "not a directory"},
	} {
		m, err := graph.LoadFile(tc.path)
		if err == nil {
			m.Close()
		}
		wantErr(t, err, tc.path, tc.want)
	}
	if _, err := graph.Parse(nil, ""); err == nil {
		t.Errorf("Parse(nil) gave no error")
	}
}

func TestLoadFileTruncatedModel(t *testing.T) {
	data, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	spans := topFields(t, data)
	// Cutting a message strictly inside one of its top-level fields always
	// leaves it malformed: cut just after each field's start and just
	// before its end, and at several points deep inside the (large) graph.
	cuts := map[int]bool{}
	for _, s := range spans {
		cuts[s[0]+1] = true
		if s[1]-1 > s[0] {
			cuts[s[1]-1] = true
		}
		if s[1]-s[0] > 1000 {
			for _, f := range []int{2, 3, 10, 100, 1000} {
				cuts[s[0]+(s[1]-s[0])*f/1001] = true
			}
		}
	}
	if len(cuts) < 10 {
		t.Fatalf("only %d cut points", len(cuts))
	}
	for cut := range cuts {
		t.Run(strconv.Itoa(cut), func(t *testing.T) {
			loadFails(t, data[:cut], "not a valid ONNX model")
		})
	}

	// A cut at a field boundary leaves a shorter, valid message: cut off
	// everything after the graph and the model loads, but Verify notices
	// what is missing when the opset imports are gone.
	for i, s := range spans {
		num, _, _ := protowire.ConsumeTag(data[s[0]:])
		if num != 7 || i == len(spans)-1 {
			continue
		}
		m, err := graph.Parse(data[:s[1]], "")
		if err != nil {
			t.Fatalf("prefix ending with the graph: %v", err)
		}
		if len(m.Opsets) == 0 {
			wantVerifyErr(t, m, "imports no operator set")
		}
	}
}

func TestLoadFileRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 30 {
		n := 1 + rng.IntN(4096)
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { loadFails(t, b) })
	}
}

func TestLoadFileWrongWireTypes(t *testing.T) {
	mnist, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(num, protowire.BytesType), v)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"graph field as varint", cat(tag(7, protowire.VarintType), []byte{1}), "no graph"},
		{"graph field as fixed32", cat(tag(7, protowire.Fixed32Type), []byte{1, 2, 3, 4}), "no graph"},
		{"graph holds garbage", bytesField(7, []byte{0xff, 0xff, 0xff}), "graph"},
		{"graph holds a bad length", bytesField(7, []byte{0x0a, 0x7f, 'x'}), "graph"},
		{"initializer holds garbage", bytesField(7, bytesField(5, []byte{0xff, 0xff})), "initializer 0"},
		{"node holds garbage", bytesField(7, bytesField(1, []byte{0x0a, 0x05})), "graph"},
		{"raw_data overruns", bytesField(7, bytesField(5, cat(tag(9, protowire.BytesType), []byte{0x10, 1}))), "initializer 0"},
		{"truncated varint", []byte{0x08, 0x80}, "model"},
		{"length past the end", []byte{0x3a, 0x7f}, "model"},
		{"field number zero", []byte{0x00, 0x01}, "model"},
		{"unterminated group", tag(7, protowire.StartGroupType), "model"},
		{"opset import as varint then no graph", cat(tag(8, protowire.VarintType), []byte{3}), "no graph"},
		{"model followed by garbage", cat(mnist, []byte{0xff}), "model"},
		{"two graphs, one garbage", cat(mnist, bytesField(7, []byte{0x0a, 0x09})), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { loadFails(t, tc.data, tc.want) })
	}
}

func TestSaveFailsCleanly(t *testing.T) {
	m := weightsModel(t, 300)
	for _, mode := range []graph.ExternalMode{graph.ExternalNever, graph.ExternalAlways} {
		dir := t.TempDir()
		file := filepath.Join(dir, "file")
		writeFile(t, file, []byte("x"))
		for _, path := range []string{
			filepath.Join(dir, "missing", "model.onnx"),
			filepath.Join(file, "model.onnx"), // the parent is a regular file
		} {
			err := graph.Save(m, path, graph.SaveOptions{External: mode, SizeThreshold: 64})
			wantErr(t, err, path)
			if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
				t.Errorf("Save created the missing folder")
			}
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("mode %d: folder holds %d entries after failed saves, want 1", mode, len(ents))
		}
	}

	// A path that is an existing folder: the rename at the end fails, and
	// the temporary file is removed.
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	wantErr(t, graph.Save(m, sub, graph.SaveOptions{External: graph.ExternalNever}), sub)
	if left := tempLeftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Errorf("the folder was replaced")
	}
}

func TestSaveReplacesOnlyOnSuccess(t *testing.T) {
	good := weightsModel(t, 300)
	// The same model with a type that cannot be encoded: a sequence type
	// built in code has no protobuf form.
	bad := weightsModel(t, 300)
	x := mustValue(t, bad.Graph, "x")
	x.Type = &graph.Type{Kind: graph.KindSequence}
	bad.Graph.Inputs = append(bad.Graph.Inputs, x)
	noGraph := &graph.Model{IRVersion: 8}

	for _, mode := range []graph.ExternalMode{graph.ExternalNever, graph.ExternalAlways} {
		dir := t.TempDir()
		path := filepath.Join(dir, "model.onnx")
		side := filepath.Join(dir, "model.onnx.data")
		writeFile(t, path, []byte("OLD MODEL"))
		writeFile(t, side, []byte("OLD SIDE"))
		opts := graph.SaveOptions{External: mode, SizeThreshold: 64}
		for _, tc := range []struct {
			name string
			m    *graph.Model
			want string
		}{{"unencodable type", bad, `"x"`}, {"no graph", noGraph, "no graph"}} {
			wantErr(t, graph.Save(tc.m, path, opts), path, tc.want)
			for p, want := range map[string]string{path: "OLD MODEL", side: "OLD SIDE"} {
				if b, _ := os.ReadFile(p); string(b) != want {
					t.Errorf("mode %d, %s: failed save changed %s to %q", mode, tc.name, filepath.Base(p), b)
				}
			}
			if left := tempLeftovers(t, dir); len(left) > 0 {
				t.Errorf("mode %d, %s: temporary files left: %q", mode, tc.name, left)
			}
		}
		if err := graph.Save(good, path, opts); err != nil {
			t.Fatal(err)
		}
		r, err := graph.LoadFile(path)
		if err != nil {
			t.Fatalf("mode %d: the replaced file does not load: %v", mode, err)
		}
		sameModel(t, mustMarshal(t, good), mustMarshal(t, r))
		r.Close()
		if left := tempLeftovers(t, dir); len(left) > 0 {
			t.Errorf("temporary files left: %q", left)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("saved file mode %v, %v", fi.Mode(), err)
		}
	}
}

func TestSaveIsDeterministic(t *testing.T) {
	mnist, err := graph.LoadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer mnist.Close()
	for _, tc := range []struct {
		name string
		m    *graph.Model
	}{
		{"built", weightsModel(t, 300, 4, 20000)},
		{"if", parseProto(t, ifModelProto())},
		{"mnist", mnist},
	} {
		for _, opts := range []graph.SaveOptions{
			{},
			{External: graph.ExternalAlways, SizeThreshold: 256, Location: "weights.bin"},
		} {
			var first map[string][]byte
			for i := range 2 {
				dir := t.TempDir()
				if err := graph.Save(tc.m, filepath.Join(dir, "model.onnx"), opts); err != nil {
					t.Fatal(err)
				}
				got := map[string][]byte{}
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					got[e.Name()], _ = os.ReadFile(filepath.Join(dir, e.Name()))
				}
				if i == 0 {
					first = got
					continue
				}
				if len(got) != len(first) {
					t.Fatalf("%s: saves wrote %d and %d files", tc.name, len(first), len(got))
				}
				for name, b := range got {
					if !bytes.Equal(b, first[name]) {
						t.Errorf("%s, mode %d: %s differs between two saves", tc.name, opts.External, name)
					}
				}
			}
		}
		a, b := mustMarshal(t, tc.m), mustMarshal(t, tc.m)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: Marshal differs between two calls", tc.name)
		}
	}
}
