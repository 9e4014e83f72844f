package graph_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/onnxpb"
)

func TestSetInputAddInputTruncateInputs(t *testing.T) {
	s := newSimple(t)
	add := s.add

	add.SetInput(1, s.x) // w -> x
	wantUses(t, s.w)
	wantUses(t, s.x, "relu:0", "add:1")
	mustVerify(t, s.m)

	add.SetInput(3, s.w) // grows: input 2 is omitted
	if got, want := inputNames(add), []string{"a", "x", "", "w"}; !slices.Equal(got, want) {
		t.Fatalf("inputs = %q, want %q", got, want)
	}
	if add.Input(2) != nil || add.Input(-1) != nil || add.Input(99) != nil {
		t.Errorf("Input of an omitted or out-of-range index is not nil")
	}
	wantUses(t, s.w, "add:3")
	mustVerify(t, s.m)

	add.AddInput(s.a)
	wantUses(t, s.a, "add:0", "add:4")
	mustVerify(t, s.m)

	add.SetInput(1, s.x) // same value again: no duplicate use
	wantUses(t, s.x, "relu:0", "add:1")

	add.TruncateInputs(2)
	if got, want := inputNames(add), []string{"a", "x"}; !slices.Equal(got, want) {
		t.Fatalf("after TruncateInputs(2): inputs = %q, want %q", got, want)
	}
	wantUses(t, s.w)
	wantUses(t, s.a, "add:0")
	mustVerify(t, s.m)

	add.TruncateInputs(5) // past the end: nothing changes
	if got := len(add.Inputs()); got != 2 {
		t.Fatalf("TruncateInputs past the end changed the input count to %d", got)
	}

	add.SetInput(0, nil)
	wantUses(t, s.a)
	if add.Input(0) != nil {
		t.Fatalf("SetInput(0, nil) left input 0 = %v", add.Input(0))
	}
	mustVerify(t, s.m)

	add.TruncateInputs(0)
	if len(add.Inputs()) != 0 {
		t.Fatalf("TruncateInputs(0) left %d inputs", len(add.Inputs()))
	}
	wantUses(t, s.x, "relu:0")
	mustVerify(t, s.m)
}

func TestSetOutputRefusesSecondProducer(t *testing.T) {
	s := newSimple(t)
	wantErr(t, s.add.SetOutput(1, s.a), `"a"`, `"relu"`)
	if len(s.add.Outputs()) != 1 || s.a.Producer() != s.relu {
		t.Fatalf("refused SetOutput changed the graph: add outputs %d, producer of a %v", len(s.add.Outputs()), s.a.Producer())
	}
	mustVerify(t, s.m)

	// Setting a node's own output again is fine.
	if err := s.relu.SetOutput(0, s.a); err != nil {
		t.Fatalf("SetOutput of the same value: %v", err)
	}
	mustVerify(t, s.m)

	// Moving the output to a new value leaves the old one without producer.
	b := mustValue(t, s.g, "b")
	if err := s.relu.SetOutput(0, b); err != nil {
		t.Fatal(err)
	}
	if s.a.Producer() != nil || b.Producer() != s.relu {
		t.Fatalf("after SetOutput(0, b): producer of a = %v, of b = %v", s.a.Producer(), b.Producer())
	}
	wantVerifyErr(t, s.m, `"add"`, `"a"`, "not defined")
	s.add.SetInput(0, b)
	mustVerify(t, s.m)
}

func TestAddNodeRefusesProducedOutput(t *testing.T) {
	s := newSimple(t)
	n, err := s.g.AddNode("Neg", []*graph.Value{s.x}, []*graph.Value{s.a})
	wantErr(t, err, `"a"`, `"relu"`)
	if n != nil {
		t.Errorf("AddNode returned a node along with its error")
	}
	if len(s.g.Nodes) != 2 {
		t.Errorf("refused AddNode left %d nodes", len(s.g.Nodes))
	}
	wantUses(t, s.x, "relu:0") // the refused node's input was not recorded
	mustVerify(t, s.m)
}

func TestInsertNodeBefore(t *testing.T) {
	s := newSimple(t)
	b := mustValue(t, s.g, "b")
	neg, err := s.g.InsertNodeBefore(s.relu, "Neg", []*graph.Value{s.x}, []*graph.Value{b})
	if err != nil {
		t.Fatal(err)
	}
	neg.Name = "neg"
	s.relu.SetInput(0, b)
	if got, want := nodeNames(s.g), []string{"neg", "relu", "add"}; !slices.Equal(got, want) {
		t.Fatalf("nodes = %q, want %q", got, want)
	}
	if neg.Graph() != s.g || b.Producer() != neg {
		t.Fatalf("inserted node not linked: graph %v, producer of b %v", neg.Graph(), b.Producer())
	}
	wantUses(t, s.x, "neg:0")
	wantUses(t, b, "relu:0")
	mustVerify(t, s.m)

	// Inserting a consumer before its producer breaks the order, and
	// Verify says so naming both nodes.
	c := mustValue(t, s.g, "c")
	late, err := s.g.InsertNodeBefore(s.relu, "Sqrt", []*graph.Value{s.y}, []*graph.Value{c})
	if err != nil {
		t.Fatal(err)
	}
	late.Name = "late"
	wantVerifyErr(t, s.m, `"late"`, `"y"`, `"add"`, "topological order")
	if err := s.g.TopoSort(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s.m)

	// An anchor that is not in the graph is refused before anything changes.
	stray := &graph.Node{Name: "stray", OpType: "Relu"}
	d := mustValue(t, s.g, "d")
	_, err = s.g.InsertNodeBefore(stray, "Neg", []*graph.Value{s.x}, []*graph.Value{d})
	wantErr(t, err, `"stray"`)
	wantUses(t, s.x, "neg:0")
	if d.Producer() != nil || len(s.g.Nodes) != 4 {
		t.Fatalf("refused insert changed the graph")
	}
	mustVerify(t, s.m)
}

func TestRemoveNode(t *testing.T) {
	s := newSimple(t)
	wantErr(t, s.g.RemoveNode(s.relu), `"relu"`, `"a"`, "still used", `"add"`)
	wantErr(t, s.g.RemoveNode(s.add), `"add"`, `"y"`, "graph output")
	if len(s.g.Nodes) != 2 {
		t.Fatalf("refused RemoveNode changed the node list")
	}
	mustVerify(t, s.m)

	// Make y2 = Identity(a) the graph output; then add can go.
	y2 := mustValue(t, s.g, "y2")
	mustNode(t, s.g, "id", "Identity", []*graph.Value{s.a}, []*graph.Value{y2})
	s.g.ReplaceAllUses(s.y, y2)
	if s.g.Outputs[0] != y2 {
		t.Fatalf("graph output = %q, want y2", s.g.Outputs[0].Name)
	}
	if err := s.g.RemoveNode(s.add); err != nil {
		t.Fatal(err)
	}
	if got, want := nodeNames(s.g), []string{"relu", "id"}; !slices.Equal(got, want) {
		t.Fatalf("nodes = %q, want %q", got, want)
	}
	if s.add.Graph() != nil {
		t.Errorf("removed node still belongs to a graph")
	}
	if s.g.Value("y") != nil {
		t.Errorf("the removed node's output is still in scope")
	}
	wantUses(t, s.w)
	wantUses(t, s.a, "id:0")
	mustVerify(t, s.m)

	// The name of the removed output can be used again.
	if _, err := s.g.NewValue("y"); err != nil {
		t.Errorf("NewValue of a removed output's name: %v", err)
	}
	wantErr(t, s.g.RemoveNode(s.add), `"add"`, "not in graph")

	r := saveReload(t, s.m)
	if got, want := nodeNames(r.Graph), []string{"relu", "id"}; !slices.Equal(got, want) {
		t.Fatalf("reloaded nodes = %q, want %q", got, want)
	}
	if r.Graph.Outputs[0].Name != "y2" {
		t.Errorf("reloaded output = %q, want y2", r.Graph.Outputs[0].Name)
	}
}

func TestReplaceAllUsesMainGraph(t *testing.T) {
	s := newSimple(t)
	s.g.ReplaceAllUses(s.a, s.x)
	wantUses(t, s.a)
	wantUses(t, s.x, "relu:0", "add:0")
	if s.add.Input(0) != s.x {
		t.Fatalf("add input 0 = %v, want x", s.add.Input(0))
	}
	mustVerify(t, s.m)
	if err := s.g.RemoveNode(s.relu); err != nil {
		t.Fatalf("RemoveNode after ReplaceAllUses: %v", err)
	}
	mustVerify(t, s.m)

	s.g.ReplaceAllUses(s.x, s.x) // no-op
	wantUses(t, s.x, "add:0")

	// Graph outputs follow too.
	s.g.ReplaceAllUses(s.y, s.w)
	if s.g.Outputs[0] != s.w {
		t.Fatalf("graph output = %q, want w", s.g.Outputs[0].Name)
	}
	if err := s.g.RemoveNode(s.add); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s.m)
	r := saveReload(t, s.m)
	if len(r.Graph.Nodes) != 0 || r.Graph.Outputs[0].Name != "w" || r.Graph.Outputs[0].Const == nil {
		t.Fatalf("reloaded: %d nodes, output %q", len(r.Graph.Nodes), r.Graph.Outputs[0].Name)
	}
}

func TestReplaceAllUsesInSubgraph(t *testing.T) {
	m := parseProto(t, ifModelProto())
	mustVerify(t, m)
	g := m.Graph
	a, b := g.Value("a"), g.Value("b")
	ifn := findNode(g, "if")
	subs := ifn.Subgraphs()
	if len(subs) != 2 {
		t.Fatalf("If has %d subgraphs", len(subs))
	}
	then, els := subs[0], subs[1]
	tid, emul := findNode(then, "tid"), findNode(els, "emul")
	wantUses(t, a, "tid:0", "emul:0")

	g.ReplaceAllUses(a, b)
	wantUses(t, a)
	wantUses(t, b, "tid:0", "emul:0", "emul:1")
	if tid.Input(0) != b || emul.Input(0) != b {
		t.Fatalf("subgraph nodes still read a: tid %v, emul %v", inputNames(tid), inputNames(emul))
	}
	mustVerify(t, m)
	if err := g.RemoveNode(findNode(g, "relu")); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, m)

	r := saveReload(t, m)
	rif := findNode(r.Graph, "if")
	rthen, rels := rif.Subgraphs()[0], rif.Subgraphs()[1]
	if got := inputNames(findNode(rthen, "tid")); !slices.Equal(got, []string{"b"}) {
		t.Errorf("reloaded then-branch reads %q, want [b]", got)
	}
	if got := inputNames(findNode(rels, "emul")); !slices.Equal(got, []string{"b", "b"}) {
		t.Errorf("reloaded else-branch reads %q, want [b b]", got)
	}
	if got := nodeNames(r.Graph); !slices.Equal(got, []string{"neg", "if"}) {
		t.Errorf("reloaded nodes %q", got)
	}
	// The reloaded subgraph reads the outer value itself.
	if findNode(rthen, "tid").Input(0) != r.Graph.Value("b") {
		t.Errorf("reloaded subgraph input is not the outer value")
	}
}

// ifOuterOutputProto is a model whose If branches return outer values
// directly, without a node in the branch: then returns the node output a,
// else the initializer k.
func ifOuterOutputProto() *onnxpb.ModelProto {
	then := &onnxpb.GraphProto{Name: pstr("then"), Output: []*onnxpb.ValueInfoProto{vinfo("a", graph.Float, 2)}}
	els := &onnxpb.GraphProto{Name: pstr("else"), Output: []*onnxpb.ValueInfoProto{vinfo("k", graph.Float, 2)}}
	return ifModelWith(then, els, f32Proto("k", []int64{2}, 1, 2))
}

func TestReplaceAllUsesSubgraphOutputs(t *testing.T) {
	m := parseProto(t, ifOuterOutputProto())
	mustVerify(t, m)
	g := m.Graph
	a, b := g.Value("a"), g.Value("b")
	then := findNode(g, "if").Subgraphs()[0]
	if then.Outputs[0] != a {
		t.Fatalf("then-branch output is not the outer value a")
	}
	g.ReplaceAllUses(a, b)
	if then.Outputs[0] != b {
		t.Fatalf("ReplaceAllUses left the then-branch output reading %q", then.Outputs[0].Name)
	}
	if err := g.RemoveNode(findNode(g, "relu")); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, m)
	r := saveReload(t, m)
	if got := findNode(r.Graph, "if").Subgraphs()[0].Outputs[0]; got != r.Graph.Value("b") {
		t.Errorf("reloaded then-branch output = %q, want the outer b", got.Name)
	}
}

func TestRemoveNodeRefusesSubgraphOutput(t *testing.T) {
	m := parseProto(t, ifOuterOutputProto())
	g := m.Graph
	// a has no node uses, but the then-branch returns it.
	relu := findNode(g, "relu")
	wantErr(t, g.RemoveNode(relu), `"relu"`, `"a"`)
	if g.Value("a") == nil || len(g.Nodes) != 3 {
		t.Fatalf("refused RemoveNode changed the graph")
	}
	// k has no node uses either, but the else-branch returns it.
	k := g.Value("k")
	wantErr(t, g.RemoveInitializer(k), `"k"`)
	if g.Value("k") != k || len(g.Initializers) != 1 {
		t.Fatalf("refused RemoveInitializer changed the graph")
	}
	mustVerify(t, m)
}

func TestRename(t *testing.T) {
	s := newSimple(t)
	if err := s.g.Rename(s.a, "act"); err != nil {
		t.Fatal(err)
	}
	if s.g.Value("a") != nil || s.g.Value("act") != s.a || s.a.Name != "act" {
		t.Fatalf("rename a -> act: scope has a=%v act=%v", s.g.Value("a"), s.g.Value("act"))
	}
	if err := s.g.Rename(s.w, "weight"); err != nil {
		t.Fatal(err)
	}
	if s.w.Const.Name != "weight" {
		t.Errorf("initializer tensor name = %q, want weight", s.w.Const.Name)
	}
	if err := s.g.Rename(s.x, "x"); err != nil {
		t.Errorf("rename to the same name: %v", err)
	}
	mustVerify(t, s.m)

	for _, tc := range []struct{ from, to string }{
		{"act", "x"},      // another value
		{"act", "weight"}, // an initializer
		{"act", "y"},      // a graph output
		{"act", ""},       // empty
	} {
		v := s.g.Value(tc.from)
		wantErr(t, s.g.Rename(v, tc.to), `"`+tc.from+`"`, `"`+tc.to+`"`)
		if s.g.Value(tc.from) != v {
			t.Errorf("refused rename %q -> %q changed the scope", tc.from, tc.to)
		}
	}
	wantErr(t, s.g.Rename(&graph.Value{Name: "loose"}, "z"), `"loose"`)

	r := saveReload(t, s.m)
	add := findNode(r.Graph, "add")
	if got := inputNames(add); !slices.Equal(got, []string{"act", "weight"}) {
		t.Errorf("reloaded add reads %q, want [act weight]", got)
	}
	if len(r.Graph.Initializers) != 1 || r.Graph.Initializers[0].Name != "weight" || r.Graph.Initializers[0].Const.Name != "weight" {
		t.Errorf("reloaded initializer is not called weight")
	}
	if got := findNode(r.Graph, "relu").Output(0).Name; got != "act" {
		t.Errorf("reloaded relu output %q, want act", got)
	}
}

func TestRenameNestedScopes(t *testing.T) {
	m := parseProto(t, ifModelProto())
	g := m.Graph
	ifn := findNode(g, "if")
	then, els := ifn.Subgraphs()[0], ifn.Subgraphs()[1]

	// A main-graph value may not take a name a subgraph defines, and a
	// subgraph value may not take a name visible from the enclosing graph.
	wantErr(t, g.Rename(g.Value("a"), "t"), `"a"`, `"t"`)
	wantErr(t, g.Rename(g.Value("a"), "e"), `"a"`, `"e"`)
	tv := then.Value("t")
	wantErr(t, then.Rename(tv, "x"), `"t"`, `"x"`)
	wantErr(t, then.Rename(tv, "y"), `"t"`, `"y"`)
	mustVerify(t, m)

	// A rename that is unique everywhere works, and a subgraph's reader of an
	// outer value sees the new name.
	if err := g.Rename(g.Value("a"), "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := then.Rename(tv, "t2"); err != nil {
		t.Fatal(err)
	}
	if got := inputNames(findNode(els, "emul")); !slices.Equal(got, []string{"alpha", "b"}) {
		t.Errorf("else-branch reads %q after rename", got)
	}
	if then.Value("t2") != tv || then.Value("t") != nil || g.Value("t2") != nil {
		t.Errorf("subgraph rename registered in the wrong scope")
	}
	mustVerify(t, m)

	r := saveReload(t, m)
	rthen := findNode(r.Graph, "if").Subgraphs()[0]
	if got := inputNames(findNode(rthen, "tid")); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("reloaded then-branch reads %q", got)
	}
	if rthen.Outputs[0].Name != "t2" {
		t.Errorf("reloaded then-branch output %q, want t2", rthen.Outputs[0].Name)
	}
}

// ifGraphs parses ifModelProto and returns its main graph and its then
// branch.
func ifGraphs(t *testing.T) (g, then *graph.Graph) {
	t.Helper()
	g = parseProto(t, ifModelProto()).Graph
	return g, findNode(g, "if").Subgraphs()[0]
}

func TestNewValueScopes(t *testing.T) {
	g, then := ifGraphs(t)
	for _, tc := range []struct {
		g    *graph.Graph
		name string
	}{
		{g, "x"}, {g, "t"}, {g, "e"}, {then, "x"}, {then, "a"}, {then, "t"}, {g, ""},
	} {
		if _, err := tc.g.NewValue(tc.name); err == nil {
			t.Errorf("graph %q: NewValue(%q) succeeded, want a name clash", tc.g.Name, tc.name)
		}
	}
	if _, err := then.NewValue("fresh"); err != nil {
		t.Fatal(err)
	}
	if g.Value("fresh") != nil || then.Value("fresh") == nil {
		t.Errorf("subgraph value visible in the wrong scope")
	}
	if _, err := g.NewValue("fresh"); err == nil {
		t.Errorf("main graph took a name a subgraph uses")
	}
}

func TestInitializers(t *testing.T) {
	s := newSimple(t)
	b2 := mustInit(t, s.g, mustF32(t, "b2", []int64{4}, []float32{5, 6, 7, 8}))
	if s.g.Value("b2") != b2 || b2.Const == nil || !b2.IsConstant() {
		t.Fatalf("AddInitializer did not register a constant value")
	}
	for _, name := range []string{"w", "a", "x", "b2"} {
		_, err := s.g.AddInitializer(mustF32(t, name, []int64{1}, []float32{0}))
		wantErr(t, err, `"`+name+`"`)
	}
	if len(s.g.Initializers) != 2 {
		t.Fatalf("refused AddInitializer changed the list: %d", len(s.g.Initializers))
	}

	wantErr(t, s.g.RemoveInitializer(s.w), `"w"`, "used")
	wantErr(t, s.g.RemoveInitializer(s.a), `"a"`, "not an initializer")
	s.add.SetInput(1, b2)
	if err := s.g.RemoveInitializer(s.w); err != nil {
		t.Fatal(err)
	}
	if s.g.Value("w") != nil || len(s.g.Initializers) != 1 || s.g.Initializers[0] != b2 {
		t.Fatalf("RemoveInitializer left w in scope or list")
	}
	mustVerify(t, s.m)
	wantErr(t, s.g.RemoveInitializer(s.w), `"w"`)

	// An initializer that is also a graph input or output stays.
	s.g.Inputs = append(s.g.Inputs, b2)
	s.add.SetInput(1, s.a)
	wantErr(t, s.g.RemoveInitializer(b2), `"b2"`)
	s.g.Inputs = s.g.Inputs[:1]
	s.g.Outputs = append(s.g.Outputs, b2)
	wantErr(t, s.g.RemoveInitializer(b2), `"b2"`)
	s.g.Outputs = s.g.Outputs[:1]

	// Another graph's initializer is refused.
	other := graph.NewGraph("other")
	wantErr(t, other.RemoveInitializer(b2), `"b2"`)

	r := saveReload(t, s.m)
	if len(r.Graph.Initializers) != 1 || r.Graph.Initializers[0].Name != "b2" {
		t.Fatalf("reloaded initializers: %d", len(r.Graph.Initializers))
	}
	got, err := r.Graph.Initializers[0].Const.Float32s()
	if err != nil || !slices.Equal(got, []float32{5, 6, 7, 8}) {
		t.Errorf("reloaded b2 = %v, %v", got, err)
	}
}

func TestRemoveInitializers(t *testing.T) {
	s := newSimple(t)
	b2 := mustInit(t, s.g, mustF32(t, "b2", []int64{4}, []float32{5, 6, 7, 8}))
	b3 := mustInit(t, s.g, mustF32(t, "b3", []int64{1}, []float32{9}))
	b3.Type = graph.TensorType(graph.Float, graph.StaticShape(1))
	s.g.ValueInfo = append(s.g.ValueInfo, b3)

	// One refused member (w is used) leaves everything as it was.
	wantErr(t, s.g.RemoveInitializers([]*graph.Value{b2, s.w}), `"w"`, "used")
	wantErr(t, s.g.RemoveInitializers([]*graph.Value{s.a}), `"a"`, "not an initializer")
	s.g.Outputs = append(s.g.Outputs, b2)
	wantErr(t, s.g.RemoveInitializers([]*graph.Value{b2}), `"b2"`, "used")
	s.g.Outputs = s.g.Outputs[:1]
	if len(s.g.Initializers) != 3 || s.g.Value("b2") != b2 {
		t.Fatalf("refused RemoveInitializers changed the graph")
	}

	if err := s.g.RemoveInitializers([]*graph.Value{b3, b2}); err != nil {
		t.Fatal(err)
	}
	if s.g.Value("b2") != nil || s.g.Value("b3") != nil || len(s.g.Initializers) != 1 || s.g.Initializers[0] != s.w || len(s.g.ValueInfo) != 0 {
		t.Fatalf("RemoveInitializers left b2 or b3 behind")
	}
	mustVerify(t, s.m)
	wantErr(t, s.g.RemoveInitializers([]*graph.Value{b2}), `"b2"`)
	r := saveReload(t, s.m)
	if len(r.Graph.Initializers) != 1 || r.Graph.Initializers[0].Name != "w" {
		t.Fatalf("reloaded initializers: %d", len(r.Graph.Initializers))
	}
}

func TestUniqueName(t *testing.T) {
	g, then := ifGraphs(t)
	for _, tc := range []struct {
		g            *graph.Graph
		prefix, want string
	}{
		{g, "fresh", "fresh"},
		{g, "a", "a_1"},
		{g, "t", "t_1"},    // used in a subgraph
		{then, "x", "x_1"}, // visible from the enclosing graph
		{then, "t", "t_1"},
		{then, "new", "new"},
	} {
		if got := tc.g.UniqueName(tc.prefix); got != tc.want {
			t.Errorf("graph %q: UniqueName(%q) = %q, want %q", tc.g.Name, tc.prefix, got, tc.want)
		}
	}
	if _, err := g.NewValue("a_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := then.NewValue("a_2"); err != nil {
		t.Fatal(err)
	}
	if got := g.UniqueName("a"); got != "a_3" {
		t.Errorf("UniqueName(a) = %q, want a_3", got)
	}
	// Every name UniqueName gives can be created.
	for range 3 {
		if _, err := then.NewValue(then.UniqueName("x")); err != nil {
			t.Fatal(err)
		}
	}
}

// diamond builds
//
//	n0: Relu(x) -> a;  n1: Neg(a) -> b;  n2: Abs(a) -> c
//	n3: Add(b, c) -> d;  n4: Sigmoid(d) -> y (output)
//	p1: Exp(x) -> e;  p2: Log(e) -> f (output)
func diamond(t *testing.T) *graph.Model {
	g := graph.NewGraph("diamond")
	m := newModel(g)
	v := map[string]*graph.Value{}
	for _, name := range []string{"x", "a", "b", "c", "d", "y", "e", "f"} {
		v[name] = mustValue(t, g, name)
	}
	v["x"].Type = graph.TensorType(graph.Float, graph.StaticShape(3))
	g.Inputs = []*graph.Value{v["x"]}
	for _, n := range []struct {
		name, op string
		ins      []string
		out      string
	}{
		{"n0", "Relu", []string{"x"}, "a"},
		{"n1", "Neg", []string{"a"}, "b"},
		{"n2", "Abs", []string{"a"}, "c"},
		{"n3", "Add", []string{"b", "c"}, "d"},
		{"n4", "Sigmoid", []string{"d"}, "y"},
		{"p1", "Exp", []string{"x"}, "e"},
		{"p2", "Log", []string{"e"}, "f"},
	} {
		var ins []*graph.Value
		for _, in := range n.ins {
			ins = append(ins, v[in])
		}
		mustNode(t, g, n.name, n.op, ins, []*graph.Value{v[n.out]})
	}
	g.Outputs = []*graph.Value{v["y"], v["f"]}
	mustVerify(t, m)
	return m
}

func reorder(g *graph.Graph, names ...string) {
	var nodes []*graph.Node
	for _, name := range names {
		nodes = append(nodes, findNode(g, name))
	}
	g.Nodes = nodes
}

func TestTopoSortRestoresOrder(t *testing.T) {
	m := diamond(t)
	g := m.Graph
	all := slices.Clone(g.Nodes)
	rng := rand.New(rand.NewPCG(1, 2))
	invalid := 0
	for range 50 {
		rng.Shuffle(len(g.Nodes), func(i, j int) { g.Nodes[i], g.Nodes[j] = g.Nodes[j], g.Nodes[i] })
		shuffled := nodeNames(g)
		if m.Verify() != nil {
			invalid++
		}
		if err := g.TopoSort(); err != nil {
			t.Fatalf("TopoSort of %q: %v", shuffled, err)
		}
		if err := m.Verify(); err != nil {
			t.Fatalf("after TopoSort of %q: %v", shuffled, err)
		}
		if len(g.Nodes) != len(all) {
			t.Fatalf("TopoSort changed the node count: %q", nodeNames(g))
		}
		for _, n := range all {
			if !slices.Contains(g.Nodes, n) {
				t.Fatalf("TopoSort lost node %s", n)
			}
		}
	}
	if invalid == 0 {
		t.Fatalf("no shuffle produced an invalid order; the test checks nothing")
	}

	// A valid order is kept as it is, independent chains included.
	for _, order := range [][]string{
		{"p1", "p2", "n0", "n1", "n2", "n3", "n4"},
		{"n0", "p1", "n2", "p2", "n1", "n3", "n4"},
		{"p1", "n0", "n1", "n2", "p2", "n3", "n4"},
	} {
		reorder(g, order...)
		if err := g.TopoSort(); err != nil {
			t.Fatal(err)
		}
		if got := nodeNames(g); !slices.Equal(got, order) {
			t.Errorf("TopoSort changed a valid order %q into %q", order, got)
		}
	}

	// Reversed: Verify names the offending node, TopoSort fixes it, and the
	// result survives save and reload.
	reorder(g, "p2", "p1", "n4", "n3", "n2", "n1", "n0")
	wantVerifyErr(t, m, `"p2"`, `"e"`, `"p1"`, "topological order")
	if err := g.TopoSort(); err != nil {
		t.Fatal(err)
	}
	r := saveReload(t, m)
	if got, want := nodeNames(r.Graph), nodeNames(g); !slices.Equal(got, want) {
		t.Errorf("reloaded order %q, want %q", got, want)
	}
}

func TestTopoSortSubgraphDependency(t *testing.T) {
	mp := ifModelProto()
	nodes := mp.Graph.Node
	mp.Graph.Node = []*onnxpb.NodeProto{nodes[2], nodes[0], nodes[1]} // if, relu, neg
	m := parseProto(t, mp)
	// The If node itself only reads cond; its branches read a and b.
	wantVerifyErr(t, m, `"if"`, `"relu"`, "topological order")
	if err := m.Graph.TopoSort(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, m)
	if got := nodeNames(m.Graph); got[2] != "if" {
		t.Errorf("after TopoSort: %q, want if last", got)
	}
}

func TestTopoSortCycle(t *testing.T) {
	for _, tc := range []struct {
		name string
		self bool
	}{{"two nodes", false}, {"self loop", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.NewGraph("cyclic")
			m := newModel(g)
			x := mustValue(t, g, "x")
			g.Inputs = []*graph.Value{x}
			p, q, z := mustValue(t, g, "p"), mustValue(t, g, "q"), mustValue(t, g, "z")
			mustNode(t, g, "free", "Relu", []*graph.Value{x}, []*graph.Value{z})
			if tc.self {
				mustNode(t, g, "c1", "Add", []*graph.Value{x, p}, []*graph.Value{p})
			} else {
				mustNode(t, g, "c1", "Add", []*graph.Value{x, q}, []*graph.Value{p})
				mustNode(t, g, "c2", "Relu", []*graph.Value{p}, []*graph.Value{q})
			}
			g.Outputs = []*graph.Value{z}
			before := slices.Clone(g.Nodes)
			wantErr(t, g.TopoSort(), "cycle", `"c`)
			if !slices.Equal(g.Nodes, before) {
				t.Errorf("failed TopoSort changed the order to %q", nodeNames(g))
			}
			wantUses(t, p, map[bool][]string{true: {"c1:1"}, false: {"c2:0"}}[tc.self]...)
			wantVerifyErr(t, m, "cycle", `"c1"`)
		})
	}
}

func TestSaveAfterMutations(t *testing.T) {
	s := newSimple(t)
	g := s.g
	// x -> Relu -> a -> Add(w) -> y   becomes
	// x -> Relu -> act -> Mul(scale) -> m -> Add(w) -> y
	if err := g.Rename(s.a, "act"); err != nil {
		t.Fatal(err)
	}
	scale := mustInit(t, g, mustF32(t, "scale", nil, []float32{0.5}))
	mv := mustValue(t, g, g.UniqueName("m"))
	mul, err := g.InsertNodeBefore(s.add, "Mul", []*graph.Value{s.a, scale}, []*graph.Value{mv})
	if err != nil {
		t.Fatal(err)
	}
	mul.Name = "mul"
	s.add.SetInput(0, mv)
	unused := mustInit(t, g, mustF32(t, "unused", []int64{2}, []float32{1, 1}))
	if err := g.RemoveInitializer(unused); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s.m)

	r := saveReload(t, s.m)
	rg := r.Graph
	if got, want := nodeNames(rg), []string{"relu", "mul", "add"}; !slices.Equal(got, want) {
		t.Fatalf("nodes = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		node string
		ins  []string
		out  string
	}{
		{"relu", []string{"x"}, "act"},
		{"mul", []string{"act", "scale"}, "m"},
		{"add", []string{"m", "w"}, "y"},
	} {
		n := findNode(rg, tc.node)
		if got := inputNames(n); !slices.Equal(got, tc.ins) {
			t.Errorf("%s inputs = %q, want %q", tc.node, got, tc.ins)
		}
		if got := n.Output(0).Name; got != tc.out {
			t.Errorf("%s output = %q, want %q", tc.node, got, tc.out)
		}
	}
	var inits []string
	for _, v := range rg.Initializers {
		inits = append(inits, v.Name)
	}
	if want := []string{"w", "scale"}; !slices.Equal(inits, want) {
		t.Errorf("initializers = %q, want %q", inits, want)
	}
	sv, err := rg.Value("scale").Const.Float32s()
	if err != nil || !slices.Equal(sv, []float32{0.5}) || len(rg.Value("scale").Const.Dims) != 0 {
		t.Errorf("scale = %v %v dims %v", sv, err, rg.Value("scale").Const.Dims)
	}
	if rg.Inputs[0].Type.String() != "float32[1,4]" || rg.Outputs[0].Type.String() != "float32[1,4]" {
		t.Errorf("interface types: %s -> %s", rg.Inputs[0].Type, rg.Outputs[0].Type)
	}
	// Saving the reloaded model again gives the same model.
	sameModel(t, mustMarshal(t, s.m), mustMarshal(t, r))
}
