//go:build linux

package graph

// Load+save throughput and peak memory.
//
// Intended use (each iteration is a child process over a 512 MiB model, so
// a fixed count is wanted, not the default 1s benchtime):
//
//	go test -run='^$' -bench=LoadSave -benchtime=3x ./graph
//
// OPTC_BENCH_MB sets the weight size of the synthetic model in MiB
// (default 512). OPTC_BENCH_DROP_CACHES=1 drops the page cache before every
// child run (needs root), measuring a cold load instead of a warm one.
// OPTC_BENCH_MEMPROFILE=file makes the load+save child write an allocation
// profile there (every allocation sampled).
//
// The file is Linux-only: peak RSS is the child's VmHWM from
// /proc/self/status (see benchProcStatus for why not wait4's ru_maxrss).

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optc-dev/optc/tools/testenv"
)

const (
	benchChildEnv   = "OPTC_BENCH_CHILD"
	benchChildMark  = "optc-bench-child:"
	benchLayerDim   = 2048 // each MatMul weight is dim×dim float32: 16 MiB
	benchDefaultMiB = 512
)

// writeBenchModel saves into dir a model of about weightMiB MiB of
// float32 weights: a chain of MatMul and Add nodes, each MatMul weight
// 16 MiB, filled with a pseudo-random pattern so that nothing in the file is
// sparse or compressible. It returns the model's path and its size in bytes
// on disk (model file plus side file, if the size made Save use one).
func writeBenchModel(tb testing.TB, dir string, weightMiB int) (string, int64) {
	tb.Helper()
	const d = benchLayerDim
	wBytes := int64(d * d * 4)
	layers := int((int64(weightMiB)<<20 + wBytes - 1) / wBytes)
	layers = max(layers, 1)

	g := NewGraph("bench")
	x, err := g.NewValue("x")
	if err != nil {
		tb.Fatal(err)
	}
	x.Type = TensorType(Float, StaticShape(1, d))
	g.Inputs = append(g.Inputs, x)
	seed := uint64(0x9e3779b97f4a7c15)
	fill := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 8 { // xorshift64
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			binary.LittleEndian.PutUint64(b[i:], seed)
		}
	}
	cur := x
	for i := range layers {
		w := make([]byte, wBytes)
		fill(w)
		wt, err := NewTensor(fmt.Sprintf("w%d", i), Float, []int64{d, d}, w)
		if err != nil {
			tb.Fatal(err)
		}
		bias := make([]byte, d*4)
		fill(bias)
		bt, err := NewTensor(fmt.Sprintf("b%d", i), Float, []int64{d}, bias)
		if err != nil {
			tb.Fatal(err)
		}
		wv, err := g.AddInitializer(wt)
		if err != nil {
			tb.Fatal(err)
		}
		bv, err := g.AddInitializer(bt)
		if err != nil {
			tb.Fatal(err)
		}
		mm, err := g.NewValue(fmt.Sprintf("mm%d", i))
		if err != nil {
			tb.Fatal(err)
		}
		y, err := g.NewValue(fmt.Sprintf("y%d", i))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := g.AddNode("MatMul", []*Value{cur, wv}, []*Value{mm}); err != nil {
			tb.Fatal(err)
		}
		if _, err := g.AddNode("Add", []*Value{mm, bv}, []*Value{y}); err != nil {
			tb.Fatal(err)
		}
		cur = y
	}
	cur.Type = TensorType(Float, StaticShape(1, d))
	g.Outputs = append(g.Outputs, cur)
	m := &Model{
		IRVersion:    8,
		Opsets:       []OpsetImport{{Domain: "", Version: 17}},
		ProducerName: "optc-bench",
		Graph:        g,
	}
	if err := m.Verify(); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "in.onnx")
	if err := Save(m, path, SaveOptions{}); err != nil { // Save fsyncs: no dirty pages are left behind
		tb.Fatal(err)
	}
	return path, benchModelBytes(tb, path)
}

// benchModelBytes is the size of the model at path plus its side file, if any.
func benchModelBytes(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	n := fi.Size()
	if fi, err := os.Stat(benchSidePath(path)); err == nil {
		n += fi.Size()
	}
	return n
}

func benchSidePath(path string) string {
	return filepath.Join(filepath.Dir(path), externalLocation(path))
}

// TestLoadSaveChild is the child process of BenchmarkLoadSave; run on its
// own it skips. OPTC_BENCH_CHILD=mode,in,out selects the work:
// "loadsave" is LoadFile(in), Save(m, out), m.Close(); "copy" copies in
// (and its side file) to out through a temporary file, fsyncs and renames
// it, the same durability work Save does. It prints, on one line, the time
// of each phase (from just before LoadFile or the first open to just after
// Close or the rename; process start-up and test framework are excluded)
// and the Go heap's total allocation.
func TestLoadSaveChild(t *testing.T) {
	spec := os.Getenv(benchChildEnv)
	if spec == "" {
		t.Skip("run only as the child process of BenchmarkLoadSave")
	}
	mode, rest, _ := strings.Cut(spec, ",")
	in, out, _ := strings.Cut(rest, ",")
	profile := os.Getenv("OPTC_BENCH_MEMPROFILE")
	if profile != "" && mode == "loadsave" {
		runtime.MemProfileRate = 1
	}
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var phases []string
	start := time.Now()
	lap := start
	phase := func(name string) {
		now := time.Now()
		phases = append(phases, fmt.Sprintf("%s=%d", name, now.Sub(lap).Nanoseconds()))
		lap = now
	}
	switch mode {
	case "loadsave":
		m, err := LoadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		phase("load")
		if err := Save(m, out, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		phase("save")
		// Resident memory while the mapping is still there, by kind.
		for _, k := range []string{"RssAnon", "RssFile"} {
			phases = append(phases, fmt.Sprintf("%s=%d", k, testenv.ProcStatus(t, k)))
		}
		lap = time.Now()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		phase("close")
	case "copy":
		ext := benchSidePath(in)
		if _, err := os.Stat(ext); err == nil {
			c, s := benchCopyFileSync(t, ext, benchSidePath(out))
			phases = append(phases, "sidecopy="+strconv.FormatInt(c.Nanoseconds(), 10), "sidefsync="+strconv.FormatInt(s.Nanoseconds(), 10))
		}
		c, s := benchCopyFileSync(t, in, out)
		phases = append(phases, "copy="+strconv.FormatInt(c.Nanoseconds(), 10), "fsync="+strconv.FormatInt(s.Nanoseconds(), 10))
	default:
		t.Fatalf("%s=%q: unknown mode", benchChildEnv, spec)
	}
	total := time.Since(start)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	if profile != "" && mode == "loadsave" {
		f, err := os.Create(profile)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("%s total=%d alloc=%d hwm=%d %s\n", benchChildMark, total.Nanoseconds(), ms1.TotalAlloc-ms0.TotalAlloc, testenv.ProcStatus(t, "VmHWM"), strings.Join(phases, " "))
}

// benchCopyFileSync copies src to dst the way Save writes: a temporary file in
// dst's folder, fsynced, then renamed. io.Copy between files uses
// copy_file_range on Linux (an in-kernel copy through the page cache). It
// returns the time of the copy (open to end of data) and of the fsync,
// close and rename.
func benchCopyFileSync(t *testing.T, src, dst string) (copyTime, syncTime time.Duration) {
	start := time.Now()
	r, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, r); err != nil {
		t.Fatal(err)
	}
	copied := time.Now()
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.Name(), dst); err != nil {
		t.Fatal(err)
	}
	return copied.Sub(start), time.Since(copied)
}

// benchChildResult is what one child run reports.
type benchChildResult struct {
	hwm     int64            // peak RSS of the child (VmHWM), bytes
	ruRSS   int64            // wait4's ru_maxrss, bytes: includes the parent (see benchProcStatus)
	total   time.Duration    // the measured work (see TestLoadSaveChild)
	alloc   int64            // Go heap bytes allocated during the work
	phases  map[string]int64 // ns per phase
	outputs string
}

// benchRunChild runs the test binary as a child doing mode on in and out.
func benchRunChild(b *testing.B, mode, in, out string) benchChildResult {
	b.Helper()
	if os.Getenv("OPTC_BENCH_DROP_CACHES") == "1" {
		syscall.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
			b.Fatalf("OPTC_BENCH_DROP_CACHES: %v", err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadSaveChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+mode+","+in+","+out)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child %s: %v\n%s", mode, err, outb)
	}
	res := benchChildResult{phases: map[string]int64{}, outputs: string(outb)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.ruRSS = int64(ru.Maxrss) << 10 // KiB on Linux
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(string(outb)))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), benchChildMark)
		if !ok {
			continue
		}
		found = true
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("child %s: bad report %q", mode, line)
			}
			switch k {
			case "total":
				res.total = time.Duration(n)
			case "alloc":
				res.alloc = n
			case "hwm":
				res.hwm = n
			default:
				res.phases[k] = n
			}
		}
	}
	if !found {
		b.Fatalf("child %s printed no report:\n%s", mode, outb)
	}
	return res
}

func benchRemoveModel(b *testing.B, path string) {
	b.Helper()
	for _, p := range []string{path, benchSidePath(path)} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadSave loads and saves a synthetic model of OPTC_BENCH_MB MiB
// of weights (default 512) in a child process per iteration, and, as a
// baseline, copies the same file with the same fsync in another child.
//
// ns/op and MB/s are the wall time of the load+save child process
// (start-up included). The other metrics (MB = 10^6 bytes):
//
//	loadsave-MB/s   model bytes / (LoadFile + Save + Close) time in the child
//	copy-MB/s       model bytes / (copy + fsync + rename) time in the child
//	loadsave/copy   ratio of those two times (1 = as fast as a file copy)
//	save-fsync-%    share of the load+save time that an fsync of the same
//	                bytes takes (the copy child's fsync time; Save's own
//	                fsync is not separately visible)
//	load-ms, save-ms   the phases of the load+save child
//	peak-RSS-MB     the load+save child's VmHWM (mapped file pages count;
//	                not ru_maxrss, see benchProcStatus)
//	RSS/model       peak RSS over model bytes (target <= 1.2)
//	copy-RSS-MB     the copy child's VmHWM, the floor of a child process
//	alloc-MB        Go heap allocated during load+save (no copy of the
//	                weights: should be far below the model size)
//
// Use -benchtime=3x (see the top of the file).
func BenchmarkLoadSave(b *testing.B) {
	mib := benchDefaultMiB
	if s := os.Getenv("OPTC_BENCH_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("OPTC_BENCH_MB=%q: want a positive number of MiB", s)
		}
		mib = n
	}
	dir := b.TempDir()
	in, size := writeBenchModel(b, dir, mib)
	out := filepath.Join(dir, "out.onnx")
	cp := filepath.Join(dir, "copy.onnx")
	runtime.GC() // the parent's copy of the weights is garbage now
	b.SetBytes(size)

	// One untimed round first. On the VM this was written on, the first
	// child after the weights were built ran 2-5x slower (its page cache
	// landed on memory the guest had not touched yet, which the host backs
	// on first touch); the round is logged, not counted.
	warm := benchRunChild(b, "loadsave", in, out)
	benchRemoveModel(b, out)
	warmCopy := benchRunChild(b, "copy", in, cp)
	benchRemoveModel(b, cp)
	b.Logf("untimed first round: load+save %.0f ms, copy %.0f ms", float64(warm.total)/1e6, float64(warmCopy.total)/1e6)

	var ls, cpy benchChildResult
	var lsNs, cpNs, loadNs, saveNs, fsyncNs float64
	var peak, cpPeak, ruPeak, alloc int64
	var runs []string
	b.ResetTimer()
	for range b.N {
		ls = benchRunChild(b, "loadsave", in, out)
		b.StopTimer()
		cpy = benchRunChild(b, "copy", in, cp)
		if got := benchModelBytes(b, out); got != size {
			b.Fatalf("saved model is %d bytes, want %d (the input's)", got, size)
		}
		benchRemoveModel(b, out)
		benchRemoveModel(b, cp)
		lsNs += float64(ls.total)
		cpNs += float64(cpy.total)
		loadNs += float64(ls.phases["load"])
		saveNs += float64(ls.phases["save"])
		fsyncNs += float64(cpy.phases["fsync"] + cpy.phases["sidefsync"])
		peak = max(peak, ls.hwm)
		cpPeak = max(cpPeak, cpy.hwm)
		ruPeak = max(ruPeak, ls.ruRSS)
		alloc = max(alloc, ls.alloc)
		runs = append(runs, fmt.Sprintf("load+save %.0f ms (save %.0f), copy %.0f ms (fsync %.0f)",
			float64(ls.total)/1e6, float64(ls.phases["save"])/1e6, float64(cpy.total)/1e6, float64(cpy.phases["fsync"])/1e6))
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	mb := float64(size) / 1e6
	b.ReportMetric(mb/(lsNs/n/1e9), "loadsave-MB/s")
	b.ReportMetric(mb/(cpNs/n/1e9), "copy-MB/s")
	b.ReportMetric(lsNs/cpNs, "loadsave/copy")
	b.ReportMetric(100*fsyncNs/lsNs, "save-fsync-%")
	b.ReportMetric(loadNs/n/1e6, "load-ms")
	b.ReportMetric(saveNs/n/1e6, "save-ms")
	b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
	b.ReportMetric(float64(peak)/float64(size), "RSS/model")
	b.ReportMetric(float64(cpPeak)/1e6, "copy-RSS-MB")
	b.ReportMetric(float64(alloc)/1e6, "alloc-MB")
	b.Logf("model %d bytes (%d MiB of weights requested); wait4 ru_maxrss %.1f MB (parent included); runs: %s; last load+save child: %s",
		size, mib, float64(ruPeak)/1e6, strings.Join(runs, "; "), strings.TrimSpace(benchFirstReport(ls.outputs)))
}

func benchFirstReport(out string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, benchChildMark) {
			return line
		}
	}
	return ""
}

// BenchmarkLoadSaveMNIST loads and saves the small committed MNIST model in
// process: the fixed cost of a load+save, not throughput.
func BenchmarkLoadSaveMNIST(b *testing.B) {
	in := testenv.Model("mnist_cnn.onnx")
	fi, err := os.Stat(in)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "out.onnx")
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		m, err := LoadFile(in)
		if err != nil {
			b.Fatal(err)
		}
		if err := Save(m, out, SaveOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(out); err != nil {
			b.Fatal(err)
		}
	}
}
