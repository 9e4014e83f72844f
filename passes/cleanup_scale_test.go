package passes

import (
	"fmt"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/testgraph"
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
		c := b.constant(p+"c", testgraph.Float32Tensor(t, []int64{3}, 1, 2, 3))
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
	return b.Model
}

// TestCleanupOnLargeGraph runs the cleanup passes on a 100k-node graph and
// checks what is left; how the time grows with size is measured by
// BenchmarkCleanup and BenchmarkPipeline, not asserted here.
func TestCleanupOnLargeGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100k-node graph")
	}
	m := bigCleanupModel(t, 10000)
	pipeline, err := Select(1, cleanupPassNames, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(m, pipeline, Options{MaxRounds: 16}); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := clCountNodes(m); got != 4*10000 {
		t.Errorf("%d nodes left, want 4 per block (Add, Relu, Add, Mul)", got)
	}
}

// BenchmarkCleanup reports ns per node at 12.5k and 100k nodes; linear
// passes give about the same figure at both sizes.
func BenchmarkCleanup(b *testing.B) {
	for _, blocks := range []int{1250, 10000} {
		b.Run(fmt.Sprintf("%dk-nodes", blocks*10/1000), func(b *testing.B) {
			var nodes int
			for range b.N {
				b.StopTimer()
				m := bigCleanupModel(b, blocks)
				nodes = clCountNodes(m)
				pipeline, err := Select(1, cleanupPassNames, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := Run(m, pipeline, Options{MaxRounds: 16}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
		})
	}
}
