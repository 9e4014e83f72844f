package weightonly

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// BenchmarkLMFigures is `make bench-lm`: the small decoder LM that
// scripts/lm/train.py trains (held-out text, never trained on) quantized
// every way weightonly offers, and to static and dynamic INT8 as `optc
// quantize` makes them, each measured in ORT (level all): held-out
// perplexity, next-token agreement with FP32, file size, and latency per
// sequence at lengths 32, 128 and 512 (the held-out tokens run on as one
// sequence) with one thread and all cores (interleaved rounds, medians
// and ranges). Prints the table docs/transformers.md quotes.
func BenchmarkLMFigures(b *testing.B) {
	ortenv.Require(b)
	dir := os.Getenv("OPTC_LM_DIR") // another trained model (default: the cache's)
	if dir == "" {
		dir = testenv.Data(b, "lm")
	}
	model := filepath.Join(dir, "lm.onnx")
	calib := filepath.Join(dir, "calib.npy")
	heldPath := filepath.Join(dir, "heldout.npy")
	held, err := data.ReadNpy(heldPath)
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	type variant struct {
		name string
		path string
		opts *Options
		int8 *ptq.Options // static or dynamic INT8 (optc quantize), instead of opts
	}
	vs := []variant{{name: "fp32", path: model}}
	for _, c := range []struct {
		typ   Type
		r     Rounding
		block int
	}{{Int4, RTN, 32}, {Int4, GPTQ, 32}, {Int4, RTN, 128}, {Int3, RTN, 32}, {Int3, GPTQ, 32}} {
		o := &Options{Type: c.typ, Rounding: c.r, BlockSize: c.block}
		vs = append(vs, variant{name: fmt.Sprintf("%s %s b%d", c.typ, c.r, c.block), opts: o,
			path: filepath.Join(work, fmt.Sprintf("%s_%s_%d.onnx", c.typ, c.r, c.block))})
	}
	// INT8 for comparison: static (all-INT8, calibrated on the
	// calibration windows) and dynamic, as `optc quantize` makes them.
	for _, dynamic := range []bool{false, true} {
		name, calibData := "int8 static", calib
		if dynamic {
			name, calibData = "int8 dynamic", ""
		}
		path := filepath.Join(work, strings.ReplaceAll(name, " ", "_")+".onnx")
		o := &ptq.Options{Input: model, Output: path, CalibData: calibData,
			CalibOpts: data.Options{Batch: 8}, Dynamic: dynamic, Session: ort.DefaultOptions(), NoLatency: true, AllowAccuracyLoss: true}
		if dynamic {
			o.EvalData, o.EvalOpts = heldPath, data.Options{Batch: 8}
		}
		vs = append(vs, variant{name: name, path: path, int8: o})
	}
	var weightRatio = map[string]float64{}
	for _, v := range vs[1:] {
		if v.int8 != nil {
			start := time.Now()
			res, err := ptq.Run(*v.int8)
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			b.Logf("%s: %d nodes in %.1fs", v.name, len(res.Quantize.Quantized), time.Since(start).Seconds())
			continue
		}
		if v.opts.Rounding == GPTQ {
			v.opts.Data = &prune.Data{Spec: calib, Opts: data.Options{Batch: 8}, Session: ort.DefaultOptions()}
		}
		start := time.Now()
		res, err := Run(RunOptions{Input: model, Output: v.path, Weights: *v.opts, Session: ort.DefaultOptions()})
		if err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		weightRatio[v.name] = float64(res.Weights.BytesAfter) / float64(res.Weights.BytesBefore)
		b.Logf("%s: %d layers in %.1fs", v.name, res.Weights.Quantized, time.Since(start).Seconds())
	}
	// Held-out quality: all positions of all windows, as `optc build
	// --eval-task lm` measures it (compare's LM scoring), each variant
	// against FP32 at level all.
	ids, err := held.Int64s()
	if err != nil {
		b.Fatal(err)
	}
	n, seq := int(held.Dims[0]), int(held.Dims[1])
	sess := ort.DefaultOptions()
	sess.Level = ort.LevelAll
	ref := &compare.Reference{}
	lms := make([]*compare.LM, len(vs))
	for i, v := range vs {
		r, err := compare.Models(compare.Options{ModelA: model, ModelB: v.path, Data: heldPath, DataOpts: data.Options{Batch: 8},
			Atol: map[string]float64{"": math.Inf(1)}, Session: sess, Task: compare.TaskLM, Reference: ref})
		if err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		lms[i] = r.LM
	}
	tokens := lms[0].Tokens
	// Latency: batch 1, one intra-op thread and all cores; each round runs
	// every variant (order rotating) a few times; medians and ranges over
	// rounds.
	lens := []int{32, 128, 512}
	threads := []int{1, 0}
	lat := make([][][]float64, len(vs)) // variant, threads×length, rounds (ms)
	for i := range vs {
		lat[i] = make([][]float64, len(threads)*len(lens))
	}
	const rounds, reps = 11, 5
	for ti, th := range threads {
		sessions := make([]*ort.Session, len(vs))
		for i, v := range vs {
			sessions[i] = session(b, v.path, th)
		}
		for li, L := range lens {
			if L > len(ids) {
				b.Fatalf("held-out data shorter than %d tokens", L)
			}
			// Windows laid end to end: a 512-token input is 4 windows.
			x, _ := graph.NewInt64Tensor("ids", []int64{1, int64(L)}, ids[:L])
			for _, s := range sessions { // warm-up
				for range 2 {
					if _, err := s.Run([]*graph.Tensor{x}); err != nil {
						b.Fatal(err)
					}
				}
			}
			for r := 0; r < rounds; r++ {
				for j := range vs {
					i := (j + r) % len(vs)
					start := time.Now()
					for range reps {
						if _, err := sessions[i].Run([]*graph.Tensor{x}); err != nil {
							b.Fatal(err)
						}
					}
					k := ti*len(lens) + li
					lat[i][k] = append(lat[i][k], float64(time.Since(start).Microseconds())/1000/reps)
				}
			}
		}
		for _, s := range sessions {
			s.Close()
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d held-out windows of %d tokens (%d predictions); ORT %s level all; %s, GOMAXPROCS %d\n\n", n, seq, tokens, ortVersion(), cpuLine(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&sb, "| model | perplexity | vs FP32 | next-token agreement with FP32 | top-1 accuracy | file bytes | weights vs FP32 |")
	for _, th := range []string{"1 thread", "all cores"} {
		for _, L := range lens {
			fmt.Fprintf(&sb, " ms/seq L=%d, %s |", L, th)
		}
	}
	sb.WriteString("\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, v := range vs {
		l := lms[i]
		st, _ := os.Stat(v.path)
		ratio := "1"
		if i > 0 {
			ratio = "-" // INT8: weights int8, not counted here
		}
		if r, ok := weightRatio[v.name]; ok {
			ratio = fmt.Sprintf("%.3f", r)
		}
		fmt.Fprintf(&sb, "| %s | %.3f | %+.1f%% | %.2f%% | %.2f%% | %d | %s |", v.name, float64(l.PerplexityB), float64(l.IncreasePercent), 100*l.Agreement, 100*l.AccuracyB, st.Size(), ratio)
		for k := range lat[i] {
			ms := slices.Clone(lat[i][k])
			slices.Sort(ms)
			fmt.Fprintf(&sb, " %.2f (%.2f-%.2f) |", ms[len(ms)/2], ms[0], ms[len(ms)-1])
		}
		sb.WriteString("\n")
	}
	fmt.Print(sb.String())
	if p := os.Getenv("LM_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func session(b *testing.B, path string, threads int) *ort.Session {
	m, err := graph.LoadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	src, err := ort.SourceOf(m)
	if err != nil {
		b.Fatal(err)
	}
	o := ort.DefaultOptions()
	o.Level = ort.LevelAll
	o.IntraOpThreads, o.InterOpThreads = threads, 1
	s, err := ort.NewSession(src, o)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func ortVersion() string {
	v, _ := ort.Version()
	return v
}

// cpuLine names the CPU from /proc/cpuinfo (Linux), for the table's
// caption.
func cpuLine() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
