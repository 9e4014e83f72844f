package passes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/tools/synth"
)

// chain builds x -> Relu -> ... (n nodes) -> y, plus dead side branches
// hanging off every k-th value when k > 0.
func chain(tb testing.TB, n, k int) *graph.Model {
	tb.Helper()
	m, err := synth.ReluChain(n, k)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestSelect(t *testing.T) {
	if p, _ := passes.Select(0, nil, nil); len(p) != 0 {
		t.Errorf("-O0 runs %d passes", len(p))
	}
	all, _ := passes.Select(2, nil, nil)
	one, _ := passes.Select(1, nil, nil)
	if len(all) < len(one) || len(one) == 0 {
		t.Errorf("-O2 has %d passes, -O1 %d", len(all), len(one))
	}
	for _, p := range one {
		if p.Level > 1 {
			t.Errorf("-O1 includes level-%d pass %s", p.Level, p.Name)
		}
	}
	only, err := passes.Select(0, []string{"eliminate-dead-code"}, nil)
	if err != nil || len(only) != 1 {
		t.Errorf("--passes: %v %v", only, err)
	}
	if p, _ := passes.Select(2, nil, []string{"eliminate-dead-code"}); len(p) != len(all)-1 {
		t.Error("--disable-pass did not remove the pass")
	}
	for _, bad := range [][]string{{"no-such-pass"}} {
		if _, err := passes.Select(2, bad, nil); err == nil || !strings.Contains(err.Error(), "no-such-pass") {
			t.Errorf("unknown pass: %v", err)
		}
		if _, err := passes.Select(2, nil, bad); err == nil {
			t.Error("unknown disabled pass accepted")
		}
	}
	if _, err := passes.Select(3, nil, nil); err == nil {
		t.Error("-O3 accepted")
	}
}

func TestDeadCode(t *testing.T) {
	m := chain(t, 10, 3)
	before := len(m.Graph.Nodes)
	dead, _ := passes.Lookup("eliminate-dead-code")
	rep, err := passes.Run(m, []*passes.Pass{dead}, passes.Options{VerifyEach: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Graph.Nodes); got != 10 || rep.Passes[0].Stats.Removed != before-10 {
		t.Errorf("%d nodes left (removed %d), want the 10 on the path", got, rep.Passes[0].Stats.Removed)
	}
	// A second round found nothing, so the pipeline stopped.
	if rep.Rounds != 2 {
		t.Errorf("%d rounds, want 2 (one that changed, one that did not)", rep.Rounds)
	}
	// An unused initializer goes too; one that is a graph input stays.
	g := m.Graph
	unused, _ := graph.NewFloat32Tensor("w", []int64{1}, []float32{1})
	g.AddInitializer(unused)
	if _, err := passes.Run(m, []*passes.Pass{dead}, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	if len(g.Initializers) != 0 {
		t.Error("unused initializer kept")
	}
}

func TestRunRefusesInvalidModelAndCatchesBrokenPass(t *testing.T) {
	m := chain(t, 3, 0)
	broken := &passes.Pass{Name: "break", Doc: "drops a node's input value from the graph", Level: 1,
		Run: func(c *passes.Context) (passes.Stats, error) {
			n := c.Model.Graph.Nodes[1]
			ghost := &graph.Value{Name: "ghost"}
			n.SetInput(0, ghost)
			return passes.Stats{Rewritten: 1}, nil
		}}
	_, err := passes.Run(m, []*passes.Pass{broken}, passes.Options{VerifyEach: true})
	if err == nil || !strings.Contains(err.Error(), "pass break broke the model") {
		t.Fatalf("broken pass: %v", err)
	}
	_, err = passes.Run(m, nil, passes.Options{})
	if err == nil || !strings.Contains(err.Error(), "invalid before any pass") {
		t.Errorf("invalid model: %v", err)
	}
}

func TestDumpAfter(t *testing.T) {
	m := chain(t, 4, 2)
	path := filepath.Join(t.TempDir(), "m.after-eliminate-dead-code.onnx")
	dead, _ := passes.Lookup("eliminate-dead-code")
	if _, err := passes.Run(m, []*passes.Pass{dead}, passes.Options{DumpAfter: dead.Name, DumpPath: path}); err != nil {
		t.Fatal(err)
	}
	d, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Graph.Nodes) != 4 {
		t.Errorf("dump has %d nodes, want 4", len(d.Graph.Nodes))
	}
	if got := passes.DumpPathFor("/a/b.onnx", "x"); got != "/a/b.after-x.onnx" {
		t.Errorf("dump path %s", got)
	}
	os.Remove(path)
}

// BenchmarkPipeline runs the -O2 pipeline on synthetic models of 10k,
// 100k and 1M nodes and reports the cost per node: linear passes give the
// same ns/node at every size. "chain" is a Relu chain with a quarter of the
// nodes dead (the cleanup passes' work); "residual" is synth.ResidualNet,
// residual Conv/BatchNormalization/Relu blocks with initializers, Constant
// nodes and duplicates, so the folding, dedup and fusion passes have work
// too. Select a size with -bench 'Pipeline/residual/1M'.
func BenchmarkPipeline(b *testing.B) {
	pipeline, _ := passes.Select(2, nil, nil)
	shapes := []struct {
		name  string
		build func(n int) (*graph.Model, error)
	}{
		{"chain", func(n int) (*graph.Model, error) { return synth.ReluChain(n, 4) }},
		{"residual", func(n int) (*graph.Model, error) { return synth.ResidualNet(n / synth.ResidualNodesPerBlock) }},
	}
	for _, s := range shapes {
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			size := fmt.Sprintf("%dk", n/1000)
			if n >= 1_000_000 {
				size = fmt.Sprintf("%dM", n/1_000_000)
			}
			b.Run(s.name+"/"+size, func(b *testing.B) {
				b.ReportAllocs()
				nodes := 0
				var cpu time.Duration
				for range b.N {
					b.StopTimer()
					m, err := s.build(n)
					if err != nil {
						b.Fatal(err)
					}
					nodes = len(m.Graph.Nodes)
					runtime.GC() // the model's garbage is not the pipeline's
					start := processCPU()
					b.StartTimer()
					if _, err := passes.Run(m, pipeline, passes.Options{}); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					cpu += processCPU() - start
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
				// CPU time of the whole process (GC workers included):
				// on a loaded machine it moves less than wall time.
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
