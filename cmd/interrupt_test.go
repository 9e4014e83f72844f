package cmd

// Interrupted and failing runs of the optc binary: Ctrl-C or kill while a
// command works or writes leaves no output and no temporary file, and a
// full disk is a clear error.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// interruptTimeout bounds one interrupted run of the binary.
const interruptTimeout = 5 * time.Minute

// buildOptc compiles the optc binary into a test folder.
func buildOptc(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "optc")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/optc-dev/optc/cmd/optc").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// bigModel writes y = x + w with w a float32[1,n] initializer, a model
// large enough that writing it takes a while.
func bigModel(t *testing.T, path string, n int64) {
	t.Helper()
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}},
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: n}},
			}}}}}}
	}
	raw := make([]byte, 4*n)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	mp := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("big"),
			Node:        []*onnxpb.NodeProto{{Name: proto.String("add"), OpType: proto.String("Add"), Input: []string{"x", "w"}, Output: []string{"y"}}},
			Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), Dims: []int64{1, n}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: raw}},
			Input:       []*onnxpb.ValueInfoProto{vi("x")},
			Output:      []*onnxpb.ValueInfoProto{vi("y")},
		},
	}
	if err := os.WriteFile(path, marshalProto(t, mp), 0o644); err != nil {
		t.Fatal(err)
	}
}

// temporaries lists the names in dir that optc's temporaries use
// (".NAME.tmp-*" files and folders, "optc-*" scratch folders).
func temporaries(t *testing.T, dir string) []string {
	t.Helper()
	return testenv.DirNames(t, dir, func(name string) bool {
		return strings.Contains(name, ".tmp-") || strings.HasPrefix(name, "optc-")
	})
}

// interrupt starts the binary with args in dir (TMPDIR set to scratch),
// waits until a temporary appears in watch (the command is writing), or
// with watch "" until after has passed (the command is working), sends
// sig, and returns the exit status and stderr. started says whether the
// signal went out before the command ended by itself.
func interrupt(t *testing.T, bin, dir, scratch, watch string, after time.Duration, sig syscall.Signal, args ...string) (status int, stderr string, started bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "TMPDIR="+scratch)
	var errBuf bytes.Buffer
	c.Stderr = &errBuf
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	var err error
poll:
	for {
		select {
		case err = <-exited:
			break poll
		default:
		}
		if (watch == "" && time.Since(start) > after) || (watch != "" && len(temporaries(t, watch)) > 0) {
			started = c.Process.Signal(sig) == nil
			err = <-exited
			break
		}
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("optc %s: still running after %v", strings.Join(args, " "), interruptTimeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), errBuf.String(), started
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, errBuf.String(), started
}

func TestInterruptedRuns(t *testing.T) {
	ortenv.Require(t)
	bin := buildOptc(t)
	root := testenv.RepoRoot()
	models := t.TempDir()
	big := filepath.Join(models, "big.onnx")
	bigModel(t, big, 32<<20) // 128 MiB
	mnist := testenv.Model("mnist_cnn.onnx")
	cases := []struct {
		name  string
		sig   syscall.Signal
		args  func(out string) []string
		watch string // "out": signal once the output folder has a temporary; "": after a second
	}{
		{"build-sigint", syscall.SIGINT, func(out string) []string {
			return []string{"build", "--config", "testdata/mnist/optc.yaml", "-o", filepath.Join(out, "mnist")}
		}, "out"},
		{"build-sigterm", syscall.SIGTERM, func(out string) []string {
			return []string{"build", "--config", "testdata/mnist/optc.yaml", "-o", filepath.Join(out, "mnist")}
		}, "out"},
		{"quantize-while-measuring", syscall.SIGINT, func(out string) []string {
			return []string{"quantize", mnist, "--calib-data", "random", "-o", filepath.Join(out, "q.onnx")}
		}, ""},
		{"convert-while-writing", syscall.SIGINT, func(out string) []string {
			return []string{"convert", big, "-o", filepath.Join(out, "big.onnx"), "--external-data"}
		}, "out"},
		{"optimize-while-writing", syscall.SIGTERM, func(out string) []string {
			return []string{"optimize", big, "-o", filepath.Join(out, "big.onnx"), "--no-check"}
		}, "out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, scratch := t.TempDir(), t.TempDir()
			before := snapshot(t, models)
			watch := ""
			if c.watch == "out" {
				watch = out
			}
			status, stderr, started := interrupt(t, bin, root, scratch, watch, time.Second, c.sig, c.args(out)...)
			if !started {
				t.Fatalf("the command ended (status %d) before a temporary appeared: %s", status, stderr)
			}
			for _, dir := range []string{out, scratch} {
				if left := temporaries(t, dir); len(left) > 0 {
					t.Errorf("left temporaries in %s: %v", dir, left)
				}
			}
			if status == 0 {
				// The signal came after the last rename: the output is whole.
				t.Logf("finished before the signal took effect: %s", stderr)
			} else {
				if want := 128 + int(c.sig); status != want {
					t.Errorf("status %d, want %d (stderr %q)", status, want, stderr)
				}
				if entries, _ := os.ReadDir(out); len(entries) > 0 {
					t.Errorf("an interrupted run left %v in its output folder", entries)
				}
				// Build's stage lines (quantize's progress lines) may come
				// first; the error is one line.
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				for _, l := range lines[:len(lines)-1] {
					if !strings.HasPrefix(l, "build: ") && !strings.HasPrefix(l, "quantize: ") {
						t.Errorf("stderr has a line that is neither a stage line nor the error: %q", l)
					}
				}
				if !strings.HasSuffix(stderr, "\n") || !strings.Contains(lines[len(lines)-1], "interrupted") {
					t.Errorf("stderr does not end with one line saying it was interrupted: %q", stderr)
				}
			}
			after := snapshot(t, models)
			for p, h := range before {
				if after[p] != h {
					t.Errorf("the input %s changed", p)
				}
			}
		})
	}
}

// TestFullDisk writes outputs into a 1 MiB tmpfs: each command fails with
// one line saying the device is full, and leaves nothing there.
func TestFullDisk(t *testing.T) {
	ortenv.Require(t)
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); the unwritable-destination cases of the error catalog still run", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, 0) })
	big := filepath.Join(t.TempDir(), "big.onnx")
	bigModel(t, big, 1<<20) // 4 MiB
	cases := [][]string{
		{"convert", big, "-o", filepath.Join(disk, "c.onnx")},
		{"convert", big, "-o", filepath.Join(disk, "c.onnx"), "--external-data"},
		{"optimize", big, "-o", filepath.Join(disk, "o.onnx"), "--no-check"},
		{"run", big, "--data", "random", "-o", filepath.Join(disk, "run")},
		{"build", big, "-o", filepath.Join(disk, "b")},
	}
	for _, args := range cases {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			failsWithin(t, disk, 1, "no space left on device", args...)
		})
	}
}
