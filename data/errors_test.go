package data

import (
	"archive/zip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// rawNpy builds a .npy file from a header dict and data, for headers
// WriteNpy would never write.
func rawNpy(dict string, data []byte) []byte {
	h := dict + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), binary.LittleEndian.AppendUint16(nil, uint16(len(h)))...)
	return append(append(b, h...), data...)
}

// TestValidationErrors covers every way data can fail to fit a model: each
// error names the input and the file, and says what was expected and given.
func TestValidationErrors(t *testing.T) {
	dir := t.TempDir()
	img := []Input{{Name: "img", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), st(48), st(192)}}}
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := npyBytes(t, graph.Float, []int64{2, 3, 48, 192}, make([]byte, 2*3*48*192*4))
	goodPath := file("good.npy", good)

	for _, c := range []struct {
		name   string
		spec   string
		inputs []Input
		opts   Options
		want   []string // besides the spec
	}{
		{"wrong dtype npy", file("i64.npy", npyBytes(t, graph.Int64, []int64{2, 3, 48, 192}, make([]byte, 2*3*48*192*8))), img, Options{},
			[]string{`input "img"`, "float32[N,3,48,192]", "int64[2,3,48,192]", "element type int64, want float32"}},
		{"wrong rank npy", file("rank.npy", npyBytes(t, graph.Float, []int64{2, 3, 48}, make([]byte, 2*3*48*4))), img, Options{},
			[]string{`input "img"`, "float32[N,3,48,192]", "float32[2,3,48]", "rank 3, want 4"}},
		{"wrong static dim npy", file("dim.npy", npyBytes(t, graph.Float, []int64{2, 3, 50, 192}, make([]byte, 2*3*50*192*4))), img, Options{},
			[]string{`input "img"`, "float32[N,3,48,192]", "float32[2,3,50,192]", "dim 2 is 50, want 48"}},
		{"scalar npy", file("scalar.npy", npyBytes(t, graph.Float, nil, f32(1))), img, Options{},
			[]string{`input "img"`, "float32[]", "sample axis"}},
		{"static batch vs --batch", goodPath,
			[]Input{{Name: "img", DType: graph.Float, Shape: graph.StaticShape(1, 3, 48, 192)}}, Options{Batch: 8, StrictBatch: true},
			[]string{`input "img"`, "float32[1,3,48,192]", "static batch size of 1", "batch size 8"}},
		{"static batch does not divide", goodPath,
			[]Input{{Name: "img", DType: graph.Float, Shape: graph.StaticShape(3, 3, 48, 192)}}, Options{},
			[]string{"2 samples", `static batch size of input "img" float32[3,3,48,192]`}},
		{"--shape vs data", goodPath, img, Options{Spec: Spec{Shapes: map[string][]int64{"img": {2, 3, 48, 96}}}},
			[]string{`img`, "48,96", "want 192"}},
		{"--shape vs data dynamic dim", goodPath,
			[]Input{{Name: "img", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), dyn("H"), dyn("W")}}},
			Options{Spec: Spec{Shapes: map[string][]int64{"img": {1, 3, 48, 96}}}},
			[]string{`input "img"`, "float32[N,3,H,W]", "--shape img:1,3,48,96", "float32[2,3,48,192]", "dim 3 is 192, want 96"}},
		{"--shape unknown input", goodPath, img, Options{Spec: Spec{Shapes: map[string][]int64{"image": {1, 3, 48, 192}}}},
			[]string{`"image"`, `"img"`}},
		{"multi-input npy", goodPath, twoInputs, Options{},
			[]string{`"a"`, `"b"`, ".npz"}},
		{"truncated npy", file("trunc.npy", good[:len(good)-10]), img, Options{},
			[]string{`input "img"`, "truncated", "sample 1 of 2"}},
		{"bad magic", file("magic.npy", append([]byte("NOTNPY"), good[6:]...)), img, Options{},
			[]string{`input "img"`, "not a .npy file"}},
		{"bad header", file("header.npy", rawNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 48, 192) ", good[128:])), img, Options{},
			[]string{`input "img"`, "bad .npy header"}},
		{"bad version", file("version.npy", append([]byte("\x93NUMPY\x09\x00"), good[8:]...)), img, Options{},
			[]string{`input "img"`, "version 9.0"}},
		{"unknown header key", file("key.npy", rawNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f32(1, 2))), img, Options{},
			[]string{`input "img"`, `unknown key "x"`}},
		{"structured dtype", file("struct.npy", rawNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", f32(1, 2))), img, Options{},
			[]string{`input "img"`, "structured"}},
		{"object dtype", file("object.npy", rawNpy("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", f32(1, 2))), img, Options{},
			[]string{`input "img"`, `"|O"`}},
		{"fortran order", file("fortran.npy", rawNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 48, 192), }", good[128:])), img, Options{},
			[]string{`input "img"`, "Fortran order"}},
		{"big-endian", file("big.npy", rawNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3, 48, 192), }", good[128:])), img, Options{},
			[]string{`input "img"`, "big-endian", ">f4"}},
		{"absurd shape", file("absurd.npy", rawNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 2), }", f32(1))), img, Options{},
			[]string{`input "img"`, "too large"}},
		{"header exceeds file", file("hlen.npy", append([]byte("\x93NUMPY\x02\x00\xff\xff\xff\x7f"), good[12:100]...)), img, Options{},
			[]string{`input "img"`, "header length"}},
		{"no such file", filepath.Join(dir, "missing.npy"), img, Options{},
			[]string{"no such file"}},
		{"unknown format", file("data.bin", []byte("hello")), img, Options{},
			[]string{"unknown format"}},
		{"negative batch", goodPath, img, Options{Batch: -1},
			[]string{"negative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := Open(c.spec, c.inputs, c.opts)
			if err == nil {
				src.Close()
			} else if src != nil {
				t.Errorf("Open returned a non-nil Source with its error")
			}
			wantErr(t, err, append([]string{c.spec}, c.want...)...)
			if err != nil {
				t.Log(err)
			}
		})
	}
}

func TestNpzErrors(t *testing.T) {
	dir := t.TempDir()
	a := npyBytes(t, graph.Float, []int64{4, 3}, seqF32(12))
	b := npyBytes(t, graph.Int64, []int64{4}, i64(1, 2, 3, 4))
	for _, c := range []struct {
		name    string
		members []zipMember
		inputs  []Input
		want    []string
	}{
		{"missing key", []zipMember{{"a.npy", a, zip.Store}}, twoInputs,
			[]string{`input "b"`, `"b.npy"`, `keys: "a"`}},
		{"extra key", []zipMember{{"a.npy", a, zip.Store}, {"b.npy", b, zip.Store}, {"c.npy", b, zip.Store}}, twoInputs,
			[]string{`"c.npy"`, `"a", "b"`}},
		{"key without .npy", []zipMember{{"a.npy", a, zip.Store}, {"b", b, zip.Store}}, twoInputs,
			[]string{`input "b"`, `"b.npy"`}},
		{"wrong dtype member", []zipMember{{"a.npy", a, zip.Store}, {"b.npy", npyBytes(t, graph.Int32, []int64{4}, make([]byte, 16)), zip.Deflate}}, twoInputs,
			[]string{"b.npy", `input "b"`, "int64[N]", "int32[4]"}},
		{"sample counts differ", []zipMember{{"a.npy", a, zip.Store}, {"b.npy", npyBytes(t, graph.Int64, []int64{3}, i64(1, 2, 3)), zip.Deflate}}, twoInputs,
			[]string{`"a"`, `"b"`, "different sample counts", "4", "3"}},
		{"truncated stored member", []zipMember{{"a.npy", a[:len(a)-13], zip.Store}, {"b.npy", b, zip.Store}}, twoInputs,
			[]string{"a.npy", `input "a"`, "truncated", "sample 2 of 4"}},
		{"truncated deflated member", []zipMember{{"a.npy", a, zip.Store}, {"b.npy", b[:len(b)-9], zip.Deflate}}, twoInputs,
			[]string{"b.npy", `input "b"`, "truncated", "sample 2 of 4"}},
		{"bad member header", []zipMember{{"a.npy", a, zip.Store}, {"b.npy", []byte("garbage"), zip.Deflate}}, twoInputs,
			[]string{"b.npy", `input "b"`, "not a .npy file"}},
		{"fortran member", []zipMember{{"a.npy", rawNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }", seqF32(12)), zip.Store}, {"b.npy", b, zip.Store}}, twoInputs,
			[]string{"a.npy", `input "a"`, "Fortran"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeZip(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".npz"), c.members...)
			src, err := Open(p, c.inputs, Options{Batch: 2})
			if err == nil {
				src.Close()
			} else if src != nil {
				t.Errorf("Open returned a non-nil Source with its error")
			}
			wantErr(t, err, append([]string{p}, c.want...)...)
			if err != nil {
				t.Log(err)
			}
		})
	}
	p := filepath.Join(dir, "notzip.npz")
	os.WriteFile(p, []byte("not a zip"), 0o644)
	_, err := Open(p, twoInputs, Options{})
	wantErr(t, err, p, "zip")
}

func TestPBErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		tensors map[string]*graph.Tensor
		want    []string
	}{
		{"wrong dtype", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Double, []int64{2, 3}, make([]byte, 48)),
			"input_1.pb": mustTensor(t, "", graph.Int64, []int64{2}, i64(1, 2)),
		}, []string{"input_0.pb", `input "a"`, "float32[N,3]", "float64[2,3]"}},
		{"wrong rank", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Float, []int64{6}, seqF32(6)),
			"input_1.pb": mustTensor(t, "", graph.Int64, []int64{2}, i64(1, 2)),
		}, []string{"input_0.pb", `input "a"`, "rank 1, want 2"}},
		{"wrong static dim", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Float, []int64{3, 2}, seqF32(6)),
			"input_1.pb": mustTensor(t, "", graph.Int64, []int64{2}, i64(1, 2)),
		}, []string{"input_0.pb", `input "a"`, "dim 1 is 2, want 3"}},
		{"missing input", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Float, []int64{2, 3}, seqF32(6)),
		}, []string{`input "b"`}},
		{"extra index", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Float, []int64{2, 3}, seqF32(6)),
			"input_1.pb": mustTensor(t, "", graph.Int64, []int64{2}, i64(1, 2)),
			"input_2.pb": mustTensor(t, "", graph.Int64, []int64{2}, i64(1, 2)),
		}, []string{"input_2.pb", `"a", "b"`}},
		{"two feed one input", map[string]*graph.Tensor{
			"input_0.pb": mustTensor(t, "", graph.Float, []int64{2, 3}, seqF32(6)),
			"input_1.pb": mustTensor(t, "a", graph.Float, []int64{2, 3}, seqF32(6)),
		}, []string{"input_0.pb", "input_1.pb", `input "a"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			for name, tt := range c.tensors {
				writePB(t, filepath.Join(set, name), tt)
			}
			src, err := Open(set, twoInputs, Options{})
			if src != nil {
				t.Errorf("Open returned a non-nil Source with its error")
			}
			wantErr(t, err, append([]string{set}, c.want...)...)
			if err != nil {
				t.Log(err)
			}
		})
	}
	// A corrupt tensor file and a multi-input model fed one .pb file.
	bad := filepath.Join(dir, "bad", "input_0.pb")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte{0xff, 0xff, 0xff}, 0o644)
	_, err := Open(filepath.Dir(bad), twoInputs, Options{})
	wantErr(t, err, bad, `input "a"`, "not a valid ONNX tensor")
	one := filepath.Join(dir, "one.pb")
	writePB(t, one, mustTensor(t, "", graph.Float, []int64{2, 3}, seqF32(6)))
	_, err = Open(one, twoInputs, Options{})
	wantErr(t, err, one, `"a"`, `"b"`)
	_, err = Open(filepath.Join(dir, "bad"), nil, Options{})
	wantErr(t, err, "no inputs")
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	_, err = Open(empty, twoInputs, Options{})
	wantErr(t, err, empty, "input_<i>.pb")

	// A later set that does not fit fails at its turn, naming its file.
	sets := filepath.Join(dir, "sets")
	in := []Input{{Name: "x", DType: graph.Int64, Shape: graph.Shape{dyn("N")}}}
	writePB(t, filepath.Join(sets, "s0", "input_0.pb"), mustTensor(t, "", graph.Int64, []int64{1}, i64(1)))
	writePB(t, filepath.Join(sets, "s1", "input_0.pb"), mustTensor(t, "", graph.Float, []int64{1}, f32(1)))
	err = secondBatchErr(t, sets, in, Options{})
	wantErr(t, err, filepath.Join(sets, "s1", "input_0.pb"), `input "x"`, "int64[N]", "float32[1]")
}

func TestNoSamples(t *testing.T) {
	p := writeNpyFile(t, t.TempDir(), "empty.npy", graph.Float, []int64{0, 3}, nil)
	_, err := Open(p, []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3)}}}, Options{})
	wantErr(t, err, p, "no samples")
}
