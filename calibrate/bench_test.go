package calibrate

// The memory benchmark is Linux-only in effect: peak RSS is the child's
// VmHWM from /proc/self/status (see graph/bench_test.go for why a child's
// own VmHWM and not wait4's ru_maxrss).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

const (
	calibChildEnv  = "OPTC_CALIB_CHILD"
	calibChildMark = "calibchild:"
)

// TestCalibrateChild is the child of BenchmarkCalibrationMemory: with
// OPTC_CALIB_CHILD=<samples>,<method> it calibrates mnist_cnn.onnx on that
// many training images (batch 50, DefaultTensors) and prints its peak RSS.
// Without the variable it does nothing.
func TestCalibrateChild(t *testing.T) {
	spec := os.Getenv(calibChildEnv)
	if spec == "" {
		t.Skip("child of BenchmarkCalibrationMemory")
	}
	n, method, _ := strings.Cut(spec, ",")
	samples, err := strconv.Atoi(n)
	if err != nil {
		t.Fatal(err)
	}
	ortenv.Require(t)
	m := loadMNIST(t)
	s := collectMNIST(t, m, "mnist/train_images.npy", 50, samples, DefaultTensors(m), Options{Session: singleThread()})
	if _, err := s.Ranges(Method(method), Options{}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%s samples=%d hwm=%d heap=%d sys=%d heapsys=%d released=%d rss=%d\n", calibChildMark, s.Samples, testenv.ProcStatus(t, "VmHWM"), ms.HeapInuse, ms.Sys, ms.HeapSys, ms.HeapReleased, testenv.ProcStatus(t, "VmRSS"))
}

// BenchmarkCalibrationMemory calibrates MNIST on 200 and on 2000 samples,
// each in a fresh child process, and reports both peak RSS figures and the
// growth from the first to the second (target under 30%). Timing is not
// the point; b.N is ignored beyond one pair of runs per iteration.
func BenchmarkCalibrationMemory(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc/self/status (Linux)")
	}
	ortenv.Require(b)
	testenv.Data(b, "mnist/train_images.npy")
	method := os.Getenv("OPTC_CALIB_METHOD")
	if method == "" {
		method = string(Entropy)
	}
	run := func(samples int) (hwm, heap int64) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCalibrateChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", calibChildEnv, samples, method))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child %d: %v\n%s", samples, err, out)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), calibChildMark)
			if !ok {
				continue
			}
			got := map[string]int64{}
			for kv := range strings.FieldsSeq(line) {
				k, v, _ := strings.Cut(kv, "=")
				got[k], _ = strconv.ParseInt(v, 10, 64)
			}
			if got["samples"] != int64(samples) {
				b.Fatalf("child ran %d samples, want %d", got["samples"], samples)
			}
			return got["hwm"], got["heap"]
		}
		b.Fatalf("child %d printed no report:\n%s", samples, out)
		return 0, 0
	}
	var small, large, smallHeap, largeHeap int64
	for b.Loop() {
		small, smallHeap = run(200)
		large, largeHeap = run(2000)
	}
	const mb = 1 << 20
	growth := 100 * (float64(large)/float64(small) - 1)
	b.ReportMetric(float64(small)/mb, "peak-RSS-MB-200")
	b.ReportMetric(float64(large)/mb, "peak-RSS-MB-2000")
	b.ReportMetric(growth, "RSS-growth-%")
	b.ReportMetric(float64(smallHeap)/mb, "heap-MB-200")
	b.ReportMetric(float64(largeHeap)/mb, "heap-MB-2000")
	if growth >= 30 {
		b.Errorf("peak RSS grew %.1f%% from 200 to 2000 samples (%d -> %d bytes); the target is under 30%%", growth, small, large)
	}
}

// singleThread keeps ORT's thread pools (and their arenas) out of the
// memory figures.
func singleThread() ort.Options { return ort.Options{IntraOpThreads: 1, InterOpThreads: 1} }
