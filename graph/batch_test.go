package graph

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// batchChain is x -> A -> B -> C -> y, each node named after its op.
func batchChain(t *testing.T) (*Graph, []*Node) {
	t.Helper()
	g := NewGraph("g")
	x, _ := g.NewValue("x")
	g.Inputs = []*Value{x}
	cur := x
	var nodes []*Node
	for _, op := range []string{"A", "B", "C"} {
		out, err := g.NewValue(op + "_out")
		if err != nil {
			t.Fatal(err)
		}
		n, err := g.AddNode(op, []*Value{cur}, []*Value{out})
		if err != nil {
			t.Fatal(err)
		}
		n.Name = op
		out.Type = TensorType(Float, nil)
		g.ValueInfo = append(g.ValueInfo, out)
		nodes = append(nodes, n)
		cur = out
	}
	g.Outputs = []*Value{cur}
	return g, nodes
}

// edits replaces B by two nodes P, Q (Q inserted before B, then P before
// Q), and removes B: the same whether or not a batch is open.
func batchEdits(t *testing.T, g *Graph, nodes []*Node, inBatch func()) {
	t.Helper()
	b := nodes[1]
	mid, _ := g.NewValue("mid")
	out := b.Output(0)
	if err := b.SetOutput(0, nil); err != nil {
		t.Fatal(err)
	}
	q, err := g.InsertNodeBefore(b, "Q", []*Value{mid}, []*Value{out})
	if err != nil {
		t.Fatal(err)
	}
	q.Name = "Q"
	p, err := g.InsertNodeBefore(q, "P", []*Value{b.Input(0)}, []*Value{mid})
	if err != nil {
		t.Fatal(err)
	}
	p.Name = "P"
	if err := g.RemoveNodes([]*Node{b}); err != nil {
		t.Fatal(err)
	}
	inBatch()
}

func TestBatchMatchesDirectEdits(t *testing.T) {
	direct, dn := batchChain(t)
	batchEdits(t, direct, dn, func() {})
	batched, bn := batchChain(t)
	batched.BeginBatch()
	batchEdits(t, batched, bn, func() {
		// Inside the batch: the dataflow is already edited, the lists not
		// yet, and the names are those of the edited graph.
		if bn[1].Graph() != nil || len(bn[0].Output(0).Uses()) != 1 {
			t.Error("the removal did not take effect at once")
		}
		if names := batched.NodeNames(); !names["P"] || !names["Q"] || names["B"] {
			t.Errorf("node names in the batch: %v", names)
		}
		if _, err := batched.InsertNodeBefore(bn[1], "Z", nil, nil); err == nil {
			t.Error("inserted before a removed node")
		}
	})
	batched.EndBatch()
	opsOf := func(g *Graph) []string {
		var ops []string
		for _, n := range g.Nodes {
			ops = append(ops, n.OpType)
		}
		return ops
	}
	if want, got := opsOf(direct), opsOf(batched); !slices.Equal(want, got) || !slices.Equal(got, []string{"A", "P", "Q", "C"}) {
		t.Errorf("nodes after the batch %v, direct edits %v", got, want)
	}
	if len(batched.ValueInfo) != len(direct.ValueInfo) || slices.Contains(batched.ValueInfo, bn[1].Output(0)) {
		t.Errorf("value_info after the batch: %d entries, direct %d", len(batched.ValueInfo), len(direct.ValueInfo))
	}
	m := &Model{IRVersion: 8, Opsets: []OpsetImport{{Version: 17}}, Graph: batched}
	if err := m.Verify(); err != nil {
		t.Error(err)
	}
}

// TestUseListKeepsOrder removes and adds uses of one shared value in a
// random order and checks the use list against a plain ordered list after
// every step: holes and squeezing must not show.
func TestUseListKeepsOrder(t *testing.T) {
	g := NewGraph("g")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	var nodes []*Node
	for i := range 200 {
		out, _ := g.NewValue("o" + strconv.Itoa(i))
		n, err := g.AddNode("Add", []*Value{x, x}, []*Value{out})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	var want []Use
	for _, n := range nodes {
		want = append(want, Use{n, 0}, Use{n, 1})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 600 {
		n := nodes[rng.IntN(len(nodes))]
		i := rng.IntN(2)
		u := Use{n, i}
		if n.Input(i) == x {
			n.SetInput(i, y)
			want = slices.DeleteFunc(want, func(w Use) bool { return w == u })
		} else {
			n.SetInput(i, x)
			want = append(want, u)
		}
		if step%7 == 0 || step > 590 {
			if got := x.Uses(); !slices.Equal(got, want) {
				t.Fatalf("step %d: %d uses, want %d (or out of order)", step, len(got), len(want))
			}
		}
	}
	m := &Model{IRVersion: 8, Opsets: []OpsetImport{{Version: 17}}, Graph: g}
	g.Inputs = []*Value{x, y}
	if err := m.Verify(); err != nil {
		t.Error(err)
	}
}
