package cmd

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
	"github.com/optc-dev/optc/tools/ortenv"
)

// bigModelColumns makes w1 float32[1024, 557056]: 2.125 GiB, over
// protobuf's 2 GiB limit, so the model must have external data.
const bigModelColumns = 557056

// writeBigExternalModel writes y = relu(x @ w1) @ w2 with x float32[N,1024],
// w1 float32[1024,cols] and w2 float32[cols,8] in the side file
// weights.bin, streamed so that the benchmark itself stays small.
func writeBigExternalModel(b testing.TB, dir string, cols int64) (model string, bytes int64) {
	b.Helper()
	side, err := os.Create(filepath.Join(dir, "weights.bin"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(side, 4<<20)
	var off int64
	tensor := func(name string, dims ...int64) *onnxpb.TensorProto {
		n := dims[0] * dims[1]
		var buf [4]byte
		for i := range n {
			// Small deterministic weights, so activations stay finite.
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(float32(i%251-125)/4096))
			if _, err := w.Write(buf[:]); err != nil {
				b.Fatal(err)
			}
		}
		tp := &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(), ExternalData: []*onnxpb.StringStringEntryProto{
				{Key: proto.String("location"), Value: proto.String("weights.bin")},
				{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(off, 10))},
				{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(4*n, 10))},
			}}
		off += 4 * n
		return tp
	}
	w1, w2 := tensor("w1", 1024, cols), tensor("w2", cols, 8)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := side.Close(); err != nil {
		b.Fatal(err)
	}
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	vi := func(name string, d int64) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}}, dim(d)}}}}}}
	}
	node := func(name, op string, ins ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: ins, Output: []string{name}}
	}
	mp := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("big"),
			Node:        []*onnxpb.NodeProto{node("h", "MatMul", "x", "w1"), node("r", "Relu", "h"), node("y", "MatMul", "r", "w2")},
			Initializer: []*onnxpb.TensorProto{w1, w2},
			Input:       []*onnxpb.ValueInfoProto{vi("x", 1024)},
			Output:      []*onnxpb.ValueInfoProto{vi("y", 8)},
		},
	}
	model = filepath.Join(dir, "big.onnx")
	raw, err := proto.Marshal(mp)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(model, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	return model, off + int64(len(raw))
}

// procPeaks follows a running process's memory in /proc/PID/status.
type procPeaks struct{ hwm, anon, file int64 }

func (p *procPeaks) sample(pid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	for line := range strings.Lines(string(b)) {
		key, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmHWM":
			p.hwm = max(p.hwm, kb<<10)
		case "RssAnon":
			p.anon = max(p.anon, kb<<10)
		case "RssFile":
			p.file = max(p.file, kb<<10)
		}
	}
}

// runPeaks runs the binary and returns its peak memory, read from
// /proc every 20 ms while it runs, and its wall time.
func runPeaks(b *testing.B, bin string, args ...string) (procPeaks, time.Duration, error) {
	b.Helper()
	c := exec.Command(bin, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	var peaks procPeaks
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
			}
			return peaks, time.Since(start), err
		case <-time.After(20 * time.Millisecond):
			peaks.sample(c.Process.Pid)
		}
	}
}

// BenchmarkBigModel runs optc on a synthetic model over 2 GiB with
// external data, one sub-benchmark a command (run: one ORT session, the
// baseline; inspect, convert, optimize without and with the ORT check,
// quantize and build --int8 on random calibration data), and
// reports each one's peak memory: VmHWM (peak RSS, mapped weight pages
// included) and the peaks of anonymous memory (what optc and ORT allocate)
// and of file-backed pages (the mapped model, reclaimable). make bench-big
// runs it; OPTC_BIG_COLUMNS shrinks the model for a trial run.
func BenchmarkBigModel(b *testing.B) {
	ortenv.Require(b)
	cols := int64(bigModelColumns)
	if s := os.Getenv("OPTC_BIG_COLUMNS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("OPTC_BIG_COLUMNS=%q: want a positive number", s)
		}
		cols = n
	}
	dir := b.TempDir()
	model, size := writeBigExternalModel(b, dir, cols)
	bin := filepath.Join(b.TempDir(), "optc")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/optc-dev/optc/cmd/optc").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	commands := []struct {
		name string
		args []string
	}{
		{"run", []string{"run", model, "--data", "random", "-o", filepath.Join(out, "run")}}, // ORT's own need: one session
		{"inspect", []string{"inspect", model}},
		{"convert", []string{"convert", model, "-o", filepath.Join(out, "c.onnx"), "--external-data"}},
		{"optimize", []string{"optimize", model, "-o", filepath.Join(out, "o.onnx"), "--no-check"}},
		{"optimize-check", []string{"optimize", model, "-o", filepath.Join(out, "o.onnx"), "--check", "1"}},
		{"quantize", []string{"quantize", model, "-o", filepath.Join(out, "q.onnx"), "--calib-data", "random", "--calib-batch", "4"}},
		{"build-int8", []string{"build", model, "--int8", "--calib-data", "random", "--calib-batch", "4",
			"--latency-batches", "1", "--latency-duration", "1s", "-o", filepath.Join(out, "build")}},
	}
	for _, c := range commands {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if err := os.MkdirAll(out, 0o755); err != nil {
					b.Fatal(err)
				}
				peaks, wall, err := runPeaks(b, bin, c.args...)
				if err != nil {
					b.Fatalf("optc %s: %v", c.name, err)
				}
				b.ReportMetric(float64(size)/(1<<20), "model-MiB")
				b.ReportMetric(float64(peaks.hwm)/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(float64(peaks.anon)/(1<<20), "peak-anon-MiB")
				b.ReportMetric(float64(peaks.file)/(1<<20), "peak-file-MiB")
				b.ReportMetric(wall.Seconds(), "wall-s")
				if err := os.RemoveAll(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
