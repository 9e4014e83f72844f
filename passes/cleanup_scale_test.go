package passes

import (
	"fmt"
	"testing"
	"time"

	"optc/graph"
)

// bigCleanupModel chains blocks of about ten nodes, each with work for
// most cleanup passes: a Constant, an Identity, a cancelling Transpose
// pair, twin Relus, an identical initializer per block, a no-op Reshape.
func bigCleanupModel(t testing.TB, blocks int) *graph.Model {
	b := newCleanupModel(t, 13)
	cur := b.input("x", graph.Float, 2, 3)
	shape := b.i64("shape", 2, 3)
	for i := range blocks {
		p := fmt.Sprintf("b%d_", i)
		c := b.constant(p+"c", clF32(t, []int64{3}, 1, 2, 3))
		w := b.f32(p+"w", []int64{3}, 0.5, 0.25, 0.125)
		add := b.node(p+"add", "Add", cur, c)
		id := b.node(p+"id", "Identity", add.Output(0))
		t1 := transposeNode(b, p+"t1", id.Output(0), 1, 0)
		t2 := transposeNode(b, p+"t2", t1.Output(0), 1, 0)
		r1 := b.node(p+"r1", "Relu", t2.Output(0))
		r2 := b.node(p+"r2", "Relu", t2.Output(0))
		sum := b.node(p+"sum", "Add", r1.Output(0), r2.Output(0))
		sum.Output(0).Type = graph.TensorType(graph.Float, graph.StaticShape(2, 3))
		r := b.node(p+"reshape", "Reshape", sum.Output(0), shape)
		cur = b.node(p+"mul", "Mul", r.Output(0), w).Output(0)
	}
	b.output(cur, graph.Float, 2, 3)
	return b.m
}

func cleanupTime(t testing.TB, blocks int) (time.Duration, int, int) {
	m := bigCleanupModel(t, blocks)
	before := clCountNodes(m)
	start := time.Now()
	pipeline, err := Select(1, cleanupPassNames, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(m, pipeline, Options{MaxRounds: 16}); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	return d, before, clCountNodes(m)
}

// TestCleanupScalesLinearly runs the cleanup passes on graphs of 12.5k
// and 100k nodes: eight times the nodes must not take much more than
// eight times as long (a pass that rescans per node would take 64). Up to
// 25 is allowed: maps and the collector grow too, and machines are busy.
func TestCleanupScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100k-node graph")
	}
	// The faster of two runs each, to damp noise from a busy machine.
	small, n1, a1 := cleanupTime(t, 1250)
	if d, _, _ := cleanupTime(t, 1250); d < small {
		small = d
	}
	large, n2, a2 := cleanupTime(t, 10000)
	if d, _, _ := cleanupTime(t, 10000); d < large {
		large = d
	}
	t.Logf("%d nodes -> %d in %v; %d nodes -> %d in %v", n1, a1, small, n2, a2, large)
	if a2 != 4*10000 {
		t.Errorf("%d nodes left of the large graph, want 4 per block (Add, Relu, Add, Mul)", a2)
	}
	if large > 25*small {
		t.Errorf("8x the nodes took %.1fx as long", float64(large)/float64(small))
	}
}

func BenchmarkCleanup100k(b *testing.B) {
	for range b.N {
		b.StopTimer()
		m := bigCleanupModel(b, 10000)
		pipeline, err := Select(1, cleanupPassNames, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Run(m, pipeline, Options{MaxRounds: 16}); err != nil {
			b.Fatal(err)
		}
	}
}
