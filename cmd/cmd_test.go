package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/testenv"
)

// protoModel serializes a model with graph input x and output y whose nodes
// are {op, input, output} triples, so tests can build broken graphs.
func protoModel(t *testing.T, nodes [][3]string) []byte {
	t.Helper()
	vi := func(name string) *onnxpb.ValueInfoProto { return &onnxpb.ValueInfoProto{Name: proto.String(name)} }
	g := &onnxpb.GraphProto{Name: proto.String("g"), Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi("y")}}
	for i, n := range nodes {
		g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String(fmt.Sprint("n", i)), OpType: proto.String(n[0]), Input: []string{n[1]}, Output: []string{n[2]}})
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run executes optc with args and returns the exit status and both streams.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status := Main(args, &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return status, out.String(), errOut.String()
}

// runProgress is run with the progress lines on stderr too, as a
// terminal shows them.
func runProgress(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status := Main(args, &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Progress: &errOut})
	return status, out.String(), errOut.String()
}

// failsCleanly checks the failure contract: the given status, exactly one
// line on stderr that mentions want, and nothing on stdout.
func failsCleanly(t *testing.T, status int, wantStatus int, stdout, stderr, want string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status %d, want %d (stderr %q)", status, wantStatus, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "optc: ") {
		t.Errorf("stderr is not one optc: line: %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not mention %q", stderr, want)
	}
	if stdout != "" {
		t.Errorf("unexpected stdout on failure: %q", stdout)
	}
}

// failCase is a command line that must fail with status, saying want.
type failCase struct {
	args   []string
	status int
	want   string
}

// failAllCleanly runs each case and holds it to failsCleanly's contract.
func failAllCleanly(t *testing.T, cases []failCase) {
	t.Helper()
	for _, c := range cases {
		status, stdout, stderr := run(t, c.args...)
		failsCleanly(t, status, c.status, stdout, stderr, c.want)
	}
}

func TestInspectFlags(t *testing.T) {
	var got *InspectOptions
	c := newCmdInspect(StdIO(), func(o *InspectOptions) error { got = o; return nil })
	c.SetArgs([]string{"--json", "m.onnx"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Model != "m.onnx" || !got.JSON {
		t.Errorf("parsed %+v", got)
	}
}

func TestConvertFlags(t *testing.T) {
	var got *ConvertOptions
	c := newCmdConvert(StdIO(), func(o *ConvertOptions) error { got = o; return nil })
	c.SetArgs([]string{"in.onnx", "-o", "out.onnx", "--external-data", "--size-threshold", "4096", "--location", "w.bin"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	want := ConvertOptions{Input: "in.onnx", Output: "out.onnx", ExternalData: true, SizeThreshold: 4096, Location: "w.bin"}
	got.IO = nil
	if *got != want {
		t.Errorf("parsed %+v, want %+v", *got, want)
	}
}

func TestInspectMNIST(t *testing.T) {
	status, out, errOut := run(t, "inspect", testenv.Model("mnist_cnn.onnx"))
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"ir version     7", "input   float32[N,1,28,28]", "logits  float32[N,10]", "BatchNormalization      3", "55,002 in 17 initializers"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	status, out, errOut := run(t, "inspect", "--json", testenv.Model("mnist_cnn.onnx"))
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var s graph.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if s.IRVersion != 7 || s.Nodes != 11 || len(s.Inputs) != 1 || s.Inputs[0].Shape[0] != "N" || s.Parameters.Initializers != 17 {
		t.Errorf("unexpected summary %+v", s)
	}
	if s.OpTypes[0].Count != 3 || s.FileBytes != 222647 {
		t.Errorf("op types %v, file bytes %d", s.OpTypes, s.FileBytes)
	}
}

func TestInspectPaddleOCRConstants(t *testing.T) {
	p := filepath.Join(testenv.Data(t, "ocr-models"), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	status, out, errOut := run(t, "inspect", "--json", p)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var s graph.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	// Every weight of this model sits in a Constant node.
	if s.Parameters.Initializers != 0 || s.Parameters.ConstantNodes != 250 || s.Parameters.Count == 0 {
		t.Errorf("parameters %+v", s.Parameters)
	}
}

func TestConvertExternalAndBack(t *testing.T) {
	dir := t.TempDir()
	in := testenv.Model("mnist_cnn.onnx")
	ext := filepath.Join(dir, "ext.onnx")
	status, out, errOut := run(t, "convert", in, "-o", ext, "--external-data")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(out, "external tensors  0      ") {
		t.Errorf("table:\n%s", out)
	}
	if _, err := os.Stat(ext + ".data"); err != nil {
		t.Fatalf("no side file: %v", err)
	}
	back := filepath.Join(dir, "back.onnx")
	if status, _, errOut := run(t, "convert", ext, "-o", back); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	want, _ := os.ReadFile(in)
	got, _ := os.ReadFile(back)
	if !bytes.Equal(want, got) {
		t.Errorf("inline -> external -> inline changed the model bytes (%d vs %d bytes)", len(want), len(got))
	}
}

func TestConvertRefusesToOverwriteInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.onnx")
	orig, _ := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	os.WriteFile(in, orig, 0o644)
	status, out, errOut := run(t, "convert", in, "-o", in)
	failsCleanly(t, status, 1, out, errOut, "refusing to overwrite the input")

	// An external-data input whose side file the output would replace.
	ext := filepath.Join(dir, "e.onnx")
	if status, _, errOut := run(t, "convert", in, "-o", ext, "--external-data"); status != 0 {
		t.Fatal(errOut)
	}
	status, out, errOut = run(t, "convert", ext, "-o", filepath.Join(dir, "other.onnx"), "--external-data", "--location", "e.onnx.data")
	failsCleanly(t, status, 1, out, errOut, "holds the input's tensor data")
	if got, _ := os.ReadFile(in); !bytes.Equal(got, orig) {
		t.Error("input changed")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	model, _ := os.ReadFile(testenv.Model("mnist_cnn.onnx"))
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope.onnx"), "no such file"},
		{"empty", write("empty.onnx", nil), "empty"},
		{"truncated", write("trunc.onnx", model[:len(model)/2]), "not a valid ONNX model"},
		{"random", write("random.onnx", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x17}, 400)), "not a valid ONNX model"},
		{"folder", dir, "folder"},
		{"cycle", write("cycle.onnx", protoModel(t, [][3]string{{"Relu", "b", "a"}, {"Relu", "a", "b"}})), "cycle"},
		{"duplicate", write("dup.onnx", protoModel(t, [][3]string{{"Relu", "x", "y"}, {"Sigmoid", "x", "y"}})), `"y"`},
		{"dangling", write("dangling.onnx", protoModel(t, [][3]string{{"Relu", "ghost", "y"}})), `"ghost" is not defined`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{{"inspect", c.path}, {"convert", c.path, "-o", filepath.Join(dir, "out.onnx")}} {
				status, out, errOut := run(t, args...)
				failsCleanly(t, status, 1, out, errOut, c.want)
				if !strings.Contains(errOut, c.path) {
					t.Errorf("%v: error does not name the file: %q", args, errOut)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "out.onnx")); err == nil {
				t.Error("a failed convert left an output file")
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestVersion(t *testing.T) {
	status, out, _ := run(t, "version")
	if status != 0 || !strings.HasPrefix(out, "optc "+ReadBuildInfo().Version) || !strings.Contains(out, "go1.") {
		t.Errorf("status %d, output %q", status, out)
	}
}
