package cmd

// The error catalog: optc run on corrupt and hostile inputs through every
// command that reads them. Each must fail with the documented exit status
// and one stderr line naming what is wrong, without a panic or a hang,
// without writing anything and without changing its input
// (docs/errors.md lists these errors and their fixes).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// catalogTimeout bounds one command of the catalog: a hostile input must
// fail fast, and a hang must fail the test rather than stall it.
const catalogTimeout = 3 * time.Minute

// modelCommands are the commands that read a model, as argument lists for
// the model M; outputs go to the folder D. Each sets the least needed for
// the command to reach the model.
var modelCommands = map[string]func(m, d string) []string{
	"inspect": func(m, d string) []string { return []string{"inspect", m} },
	"convert": func(m, d string) []string { return []string{"convert", m, "-o", filepath.Join(d, "converted.onnx")} },
	"optimize": func(m, d string) []string {
		return []string{"optimize", m, "-o", filepath.Join(d, "opt.onnx"), "--no-check"}
	},
	"lint": func(m, d string) []string { return []string{"lint", "--target", "tensorrt", m} },
	"run": func(m, d string) []string {
		return []string{"run", m, "--data", "random", "-o", filepath.Join(d, "run")}
	},
	"compare": func(m, d string) []string { return []string{"compare", m, m, "--data", "random"} },
	"bench": func(m, d string) []string {
		return []string{"bench", m, "--data", "random", "--iterations", "1", "--warmup", "0"}
	},
	"quantize": func(m, d string) []string {
		return []string{"quantize", m, "--calib-data", "random", "-o", filepath.Join(d, "q.onnx")}
	},
	"build": func(m, d string) []string {
		return []string{"build", m, "--int8", "--calib-data", "random", "-o", filepath.Join(d, "build")}
	},
}

// dataCommands read data file F for the bundled MNIST model M.
var dataCommands = map[string]func(m, f, d string) []string{
	"run":     func(m, f, d string) []string { return []string{"run", m, "--data", f, "-o", filepath.Join(d, "run")} },
	"compare": func(m, f, d string) []string { return []string{"compare", m, m, "--data", f} },
	"bench": func(m, f, d string) []string {
		return []string{"bench", m, "--data", f, "--iterations", "1", "--warmup", "0"}
	},
	"quantize": func(m, f, d string) []string {
		return []string{"quantize", m, "--calib-data", f, "-o", filepath.Join(d, "q.onnx")}
	},
	"build": func(m, f, d string) []string {
		return []string{"build", m, "--int8", "--calib-data", f, "-o", filepath.Join(d, "build")}
	},
}

var allModelCommands = []string{"inspect", "convert", "optimize", "lint", "run", "compare", "bench", "quantize", "build"}

// mnistProto is the bundled MNIST CNN, decoded for tests to corrupt.
func mnistProto(t *testing.T) *onnxpb.ModelProto {
	t.Helper()
	b, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		t.Fatal(err)
	}
	return mp
}

func marshalProto(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withMnistInitializer returns the MNIST CNN with its first initializer
// (conv1.weight, float32[16,1,3,3]) changed by edit.
func withMnistInitializer(edit func(tp *onnxpb.TensorProto)) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		mp := mnistProto(t)
		edit(mp.Graph.Initializer[0])
		return marshalProto(t, mp)
	}
}

// withProto returns protoModel(nodes), with x and y typed float32[1,4]
// so that what fails is the graph itself, changed by edit.
func withProto(nodes [][3]string, edit func(mp *onnxpb.ModelProto)) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		mp := &onnxpb.ModelProto{}
		if err := proto.Unmarshal(protoModel(t, nodes), mp); err != nil {
			t.Fatal(err)
		}
		for _, vi := range []*onnxpb.ValueInfoProto{mp.Graph.Input[0], mp.Graph.Output[0]} {
			vi.Type = &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
				ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
				Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
					{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}},
					{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 4}},
				}},
			}}}
		}
		if edit != nil {
			edit(mp)
		}
		return marshalProto(t, mp)
	}
}

func external(location string, offset int64) []*onnxpb.StringStringEntryProto {
	return []*onnxpb.StringStringEntryProto{
		{Key: proto.String("location"), Value: proto.String(location)},
		{Key: proto.String("offset"), Value: proto.String(fmt.Sprint(offset))},
	}
}

// chain is n Relu nodes from x to y.
func chain(n int) [][3]string {
	nodes := make([][3]string, n)
	for i := range nodes {
		in, out := fmt.Sprint("v", i), fmt.Sprint("v", i+1)
		if i == 0 {
			in = "x"
		}
		if i == n-1 {
			out = "y"
		}
		nodes[i] = [3]string{"Relu", in, out}
	}
	return nodes
}

type modelCase struct {
	name  string
	model func(t *testing.T) []byte
	// files are written next to the model (name relative to its folder;
	// "../x" lands outside it).
	files map[string][]byte
	cmds  []string
	want  string // what the message must name
}

func modelCases(t *testing.T) []modelCase {
	mnist, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	conv1 := mnistProto(t).Graph.Initializer[0]
	return []modelCase{
		{name: "truncated", model: func(*testing.T) []byte { return mnist[:len(mnist)/2] }, cmds: allModelCommands, want: "model.onnx"},
		{name: "truncated-header", model: func(*testing.T) []byte { return mnist[:7] }, cmds: allModelCommands, want: "model.onnx"},
		{name: "not-a-model", model: func(*testing.T) []byte { return []byte("not a model\n") }, cmds: allModelCommands, want: "model.onnx"},
		{name: "external-outside-folder", model: withMnistInitializer(func(tp *onnxpb.TensorProto) {
			tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("../outside.bin", 0)
		}), files: map[string][]byte{"../outside.bin": conv1.RawData}, cmds: allModelCommands, want: "../outside.bin"},
		{name: "external-huge-offset", model: withMnistInitializer(func(tp *onnxpb.TensorProto) {
			tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("w.bin", 1<<62)
		}), files: map[string][]byte{"w.bin": conv1.RawData}, cmds: allModelCommands, want: "w.bin"},
		{name: "external-missing-file", model: withMnistInitializer(func(tp *onnxpb.TensorProto) {
			tp.RawData, tp.DataLocation, tp.ExternalData = nil, onnxpb.TensorProto_EXTERNAL.Enum(), external("gone.bin", 0)
		}), cmds: allModelCommands, want: "gone.bin"},
		{name: "data-shorter-than-dims", model: withMnistInitializer(func(tp *onnxpb.TensorProto) {
			tp.RawData = tp.RawData[:len(tp.RawData)-4]
		}), cmds: allModelCommands, want: conv1.GetName()},
		{name: "negative-dim", model: withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.Dims[0] = -16 }), cmds: allModelCommands, want: conv1.GetName()},
		{name: "overflowing-dims", model: withMnistInitializer(func(tp *onnxpb.TensorProto) {
			tp.Dims = []int64{1 << 32, 1 << 32, 1 << 32}
		}), cmds: allModelCommands, want: conv1.GetName()},
		{name: "max-int64-dim", model: withMnistInitializer(func(tp *onnxpb.TensorProto) { tp.Dims = []int64{math.MaxInt64} }), cmds: allModelCommands, want: conv1.GetName()},
		{name: "cycle", model: withProto([][3]string{{"Relu", "b", "a"}, {"Relu", "a", "b"}, {"Relu", "a", "y"}}, nil), cmds: allModelCommands, want: "cycle"},
		{name: "self-loop", model: withProto([][3]string{{"Relu", "a", "a"}, {"Relu", "a", "y"}}, nil), cmds: allModelCommands, want: "n0"},
		{name: "undefined-input", model: withProto([][3]string{{"Relu", "ghost", "y"}}, nil), cmds: allModelCommands, want: "ghost"},
		{name: "subgraph-undefined-outer-value", model: withProto([][3]string{{"If", "x", "y"}}, func(mp *onnxpb.ModelProto) {
			branch := func(name, in string) *onnxpb.GraphProto {
				return &onnxpb.GraphProto{Name: proto.String(name),
					Node:   []*onnxpb.NodeProto{{Name: proto.String(name + "_id"), OpType: proto.String("Identity"), Input: []string{in}, Output: []string{name + "_out"}}},
					Output: []*onnxpb.ValueInfoProto{{Name: proto.String(name + "_out")}}}
			}
			mp.Graph.Node[0].Attribute = []*onnxpb.AttributeProto{
				{Name: proto.String("then_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: branch("then", "ghost")},
				{Name: proto.String("else_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: branch("else", "x")},
			}
		}), cmds: allModelCommands, want: "ghost"},
		{name: "unknown-domain", model: withProto([][3]string{{"Mystery", "x", "y"}}, func(mp *onnxpb.ModelProto) {
			mp.Graph.Node[0].Domain = proto.String("com.example.none")
		}), cmds: allModelCommands, want: "com.example.none"},
		{name: "missing-required-attribute", model: withProto([][3]string{{"Cast", "x", "y"}}, nil), cmds: allModelCommands, want: `needs attribute "to"`},
	}
}

// snapshot hashes every file under dir, so a test can tell that a failed
// command wrote, removed or changed nothing.
func snapshot(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	out := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p+"/"] = [sha256.Size]byte{}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failsWithin runs optc like run does, bounded by catalogTimeout, and
// checks the failure contract: status, one "optc: " line naming want, no
// internal error (a recovered panic), nothing on stdout, and the folder
// dir exactly as it was. It returns stderr.
func failsWithin(t *testing.T, dir string, wantStatus int, want string, args ...string) string {
	t.Helper()
	return failsWithinOut(t, dir, wantStatus, want, false, args...)
}

// failsWithinOut is failsWithin for a command that may print on stdout
// what it measured before it failed (stdout true).
func failsWithinOut(t *testing.T, dir string, wantStatus int, want string, stdout bool, args ...string) string {
	t.Helper()
	before := snapshot(t, dir)
	type result struct {
		status         int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		status := Main(args, &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		done <- result{status, out.String(), errOut.String()}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(catalogTimeout):
		t.Fatalf("optc %s: still running after %v", strings.Join(args, " "), catalogTimeout)
	}
	t.Logf("%s", r.stderr)
	if strings.Contains(r.stderr, "internal error") {
		t.Errorf("optc %s: %s", strings.Join(args, " "), r.stderr)
	}
	if stdout {
		r.stdout = ""
	}
	failsCleanly(t, r.status, wantStatus, r.stdout, r.stderr, want)
	after := snapshot(t, dir)
	for p, h := range after {
		if bh, ok := before[p]; !ok {
			t.Errorf("optc %s: left %s behind", args[0], p)
		} else if bh != h {
			t.Errorf("optc %s: changed %s", args[0], p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("optc %s: removed %s", args[0], p)
		}
	}
	return r.stderr
}

func TestErrorCatalogModels(t *testing.T) {
	ortenv.Require(t)
	for _, c := range modelCases(t) {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "m")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			model := filepath.Join(dir, "model.onnx")
			if err := os.WriteFile(model, c.model(t), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, b := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range c.cmds {
				t.Run(name, func(t *testing.T) {
					failsWithin(t, root, 1, c.want, modelCommands[name](model, dir)...)
				})
			}
		})
	}
}

// writeNpy writes a float32 .npy of the given dims filled with v.
func writeNpy(t *testing.T, path string, dt graph.DataType, dims []int64, fill func(i int) float32) {
	t.Helper()
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	size, _ := dt.ByteSize(n)
	b := make([]byte, size)
	if dt == graph.Float {
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(fill(int(i))))
		}
	}
	tn, err := graph.NewTensor("x", dt, dims, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(path, tn); err != nil {
		t.Fatal(err)
	}
}

func TestErrorCatalogData(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Model("mnist_cnn.onnx")
	noise := func(i int) float32 { return float32(i%255) / 255 }
	nan := func(int) float32 { return float32(math.NaN()) }
	cases := []struct {
		name  string
		write func(t *testing.T, path string)
		cmds  []string
		want  string
	}{
		{"no-samples", func(t *testing.T, p string) { writeNpy(t, p, graph.Float, []int64{0, 1, 28, 28}, noise) },
			[]string{"run", "compare", "bench", "quantize", "build"}, "data.npy"},
		{"wrong-shape", func(t *testing.T, p string) { writeNpy(t, p, graph.Float, []int64{4, 1, 20, 20}, noise) },
			[]string{"run", "compare", "bench", "quantize", "build"}, "data.npy"},
		{"wrong-type", func(t *testing.T, p string) { writeNpy(t, p, graph.Int64, []int64{4, 1, 28, 28}, noise) },
			[]string{"run", "compare", "bench", "quantize", "build"}, "data.npy"},
		{"truncated", func(t *testing.T, p string) {
			writeNpy(t, p, graph.Float, []int64{4, 1, 28, 28}, noise)
			if err := os.Truncate(p, 1000); err != nil {
				t.Fatal(err)
			}
		}, []string{"run", "compare", "bench", "quantize", "build"}, "data.npy"},
		{"nan-calibration", func(t *testing.T, p string) { writeNpy(t, p, graph.Float, []int64{4, 1, 28, 28}, nan) },
			[]string{"quantize", "build"}, "data.npy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "data.npy")
			c.write(t, path)
			for _, name := range c.cmds {
				t.Run(name, func(t *testing.T) {
					failsWithin(t, dir, 1, c.want, dataCommands[name](mnist, path, dir)...)
				})
			}
		})
	}
}

func TestErrorCatalogFiles(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Model("mnist_cnn.onnx")
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badCache := write("cache.json", `{"version": 1, "method": "percentile", "tensors": [{"name": "x", "min": 1, "max": -1}]}`)
	notJSON := write("garbage.json", "\x00\x01 not json")
	badConfig := write("optc.yaml", "model: m.onnx\ncalibraton: {data: x}\n")
	twoDocs := write("two.yaml", "model: m.onnx\n---\nmodel: n.onnx\n")
	aFile := write("file", "a regular file, not a folder")
	under := func(name string) string { return filepath.Join(aFile, name) }
	cases := []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"inverted-cache-range", []string{"quantize", mnist, "--calib-data", "random", "--calib-cache", badCache, "-o", filepath.Join(dir, "q.onnx")}, 1, "cache.json"},
		{"cache-not-json", []string{"quantize", mnist, "--calib-data", "random", "--calib-cache", notJSON, "-o", filepath.Join(dir, "q.onnx")}, 1, "garbage.json"},
		{"build-cache-not-json", []string{"build", mnist, "--int8", "--calib-data", "random", "--calib-cache", notJSON, "-o", filepath.Join(dir, "b")}, 1, "garbage.json"},
		{"config-unknown-key", []string{"build", "--config", badConfig}, 1, "calibraton"},
		{"config-two-documents", []string{"build", "--config", twoDocs}, 1, "two.yaml"},
		{"config-missing", []string{"build", "--config", filepath.Join(dir, "none.yaml")}, 1, "none.yaml"},
		{"model-missing", []string{"inspect", filepath.Join(dir, "none.onnx")}, 1, "none.onnx"},
		{"model-is-a-folder", []string{"convert", dir, "-o", filepath.Join(dir, "c.onnx")}, 1, dir},
		{"convert-unwritable", []string{"convert", mnist, "-o", under("c.onnx")}, 1, under("c.onnx")},
		{"optimize-unwritable", []string{"optimize", mnist, "-o", under("o.onnx"), "--no-check"}, 1, under("o.onnx")},
		{"quantize-unwritable", []string{"quantize", mnist, "--calib-data", "random", "-o", under("q.onnx")}, 1, under("q.onnx")},
		{"run-unwritable", []string{"run", mnist, "--data", "random", "-o", under("run")}, 1, under("run")},
		{"build-unwritable", []string{"build", mnist, "-o", under("b")}, 1, under("b")},
		{"build-output-exists", []string{"build", mnist, "-o", dir}, 1, dir},
		{"convert-no-output", []string{"convert", mnist}, 2, "-o OUT"},
		{"unknown-flag", []string{"inspect", "--no-such-flag", mnist}, 2, "--no-such-flag"},
		{"unknown-command", []string{"frobnicate"}, 2, "frobnicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failsWithin(t, dir, c.status, c.want, c.args...)
		})
	}
}

// TestByteFlippedModels flips bytes across the bundled model, a few at a
// time, and loads the result through the commands that read models without
// running them: each copy is either a model (status 0) or refused with one
// line naming the file; never a panic, and the copy is left as it was.
func TestByteFlippedModels(t *testing.T) {
	mnist, err := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "flipped.onnx")
	const positions = 48
	for i := range positions {
		// The first 64 bytes one by one (the header and the first node),
		// then evenly across the rest.
		pos := i
		if i >= 16 {
			pos = 64 + (i-16)*(len(mnist)-64)/(positions-16)
		}
		b := slices.Clone(mnist)
		b[pos] ^= 0xff
		b[(pos*7+13)%len(b)] ^= 0x55
		if err := os.WriteFile(model, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"inspect", "convert", "lint", "optimize"} {
			status, stdout, stderr := run(t, modelCommands[name](model, dir)...)
			if strings.Contains(stderr, "internal error") {
				t.Errorf("byte %d: %s: %s", pos, name, stderr)
			}
			if status != 0 {
				failsCleanly(t, status, 1, stdout, stderr, model)
			}
			got, err := os.ReadFile(model)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("byte %d: %s changed its input", pos, name)
			}
		}
		for _, out := range []string{"converted.onnx", "opt.onnx"} {
			os.Remove(filepath.Join(dir, out))
		}
	}
}

// TestDeepChain: a valid 100,000-node chain loads, verifies, optimizes
// and saves without exhausting the stack.
func TestDeepChain(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "chain.onnx")
	if err := os.WriteFile(model, withProto(chain(100_000), nil)(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inspect", "convert", "lint", "optimize"} {
		status, _, stderr := run(t, modelCommands[name](model, dir)...)
		if status != 0 {
			t.Errorf("%s: status %d: %s", name, status, stderr)
		}
	}
}

// TestOutputsCheckedFirst: every command that writes a file or folder
// checks it can before the work starts (/sys refuses writes even to
// root), and fails with one line naming it.
func TestOutputsCheckedFirst(t *testing.T) {
	ortenv.Require(t)
	mnist := testenv.Model("mnist_cnn.onnx")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"optimize", mnist, "-o", "/sys/m.onnx"}, "cannot write /sys/m.onnx: permission denied"},
		{[]string{"convert", mnist, "-o", "/sys/m.onnx"}, "cannot write /sys/m.onnx: permission denied"},
		{[]string{"run", mnist, "--data", "random", "-o", "/sys/out"}, "cannot write into /sys/out: permission denied"},
		{[]string{"bench", mnist, "--data", "random", "--report", "/sys/r/a"}, "cannot write into /sys/r/a: permission denied"},
		{[]string{"quantize", mnist, "-o", filepath.Join(t.TempDir(), "q.onnx"), "--calib-data", "random", "--report", "/sys/r"}, "cannot write into /sys/r: permission denied"},
		{[]string{"quantize", mnist, "-o", filepath.Join(t.TempDir(), "q.onnx"), "--calib-data", "random", "--calib-cache", "/sys/c.json"}, "cannot write /sys/c.json: permission denied"},
	} {
		status, out, stderr := run(t, tc.args...)
		failsCleanly(t, status, 1, out, stderr, tc.want)
	}
}

// TestBuildErrorsNameNoTemporary: a build's error names the files the
// user knows, never its working folder, whether -o has a folder part or
// not (a bare "-o out" made "./.out.tmp-N", which was not stripped), and
// says no prefix twice.
func TestBuildErrorsNameNoTemporary(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "bad.json", []byte("{}"))
	for _, out := range []string{"o1", filepath.Join("sub", "o2"), filepath.Join(dir, "o3")} {
		status, stdout, stderr := run(t, "build", testenv.Model("mnist_cnn.onnx"), "-o", out, "--int8", "--calib-data", "random", "--placement", "bad.json")
		failsCleanly(t, status, 1, stdout, stderr, "quantize: model.fp32.onnx: placement: replaying bad.json: placement file schema 0, want 1")
		if strings.Contains(stderr, ".tmp-") || strings.Contains(stderr, "placement: placement") {
			t.Errorf("-o %s: %s", out, stderr)
		}
	}
}
