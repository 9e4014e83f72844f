package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// prepared is a float model as ptq hands it over (passes run, opset 13)
// with ranges calibrated on random data.
func prepared(t testing.TB, m *graph.Model) (graph.Serialized, map[string][2]float64) {
	return preparedOn(t, m, data.Spec{})
}

// preparedOn is prepared with random data shaped by spec.
func preparedOn(t testing.TB, m *graph.Model, spec data.Spec) (graph.Serialized, map[string][2]float64) {
	t.Helper()
	pipeline, _ := passes.Select(2, nil, nil)
	if _, err := passes.Run(m, pipeline, passes.Options{Eval: &ort.NodeEvaluator{}}); err != nil {
		t.Fatal(err)
	}
	if m.OpsetVersion("") < 13 {
		if _, err := passes.UpgradeOpset(m, 13); err != nil {
			t.Fatal(err)
		}
	}
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		t.Fatal(err)
	}
	src, err := data.Open("random", data.GraphInputs(m.Graph), data.Options{Spec: spec, High: 1, Samples: 16, Batch: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	stats, err := calibrate.Collect(m, src, calibrate.DefaultTensors(m), calibrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := stats.Cache(calibrate.MinMax, calibrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string][2]float64{}
	for name, r := range cache.Ranges() {
		ranges[name] = [2]float64{r.Min, r.Max}
	}
	return float, ranges
}

func mnistOptions(t testing.TB) Options {
	m, err := graph.LoadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	float, ranges := prepared(t, m)
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	return Options{Float: float, Ranges: ranges, Quant: quantize.Options{Target: quantize.TargetORT}, Session: sess}
}

// run runs a model on one random batch at level disable (so that ORT's
// fusions cannot hide a difference between graphs).
func run(t *testing.T, model graph.Serialized, in []*graph.Tensor) []float32 {
	t.Helper()
	m, err := model.Parse()
	if err != nil {
		t.Fatal(err)
	}
	ins, outs := ort.Interface(m)
	return ortenv.RunFloat32(t, ort.SourceFrom(model, ins, outs), ort.Options{Level: ort.LevelDisable, IntraOpThreads: 1}, in)
}

// replaysTo replays the file f and fails the test with complaint unless
// that rebuilds model byte for byte: what every search's file must do.
func replaysTo(t *testing.T, opts Options, f *schema.Placement, model graph.Serialized, complaint string) {
	t.Helper()
	_, replayed, err := Replay(opts, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(replayed.Bytes, model.Bytes) {
		t.Error(complaint)
	}
}

// The regions are exactly the nodes quantize.Apply rewrites; all-int8 is
// byte for byte what Apply alone makes (today's output); every region
// float is the float model, output for output; one region float leaves
// exactly that node without Q/DQ.
func TestRegions(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	f, allBytes, err := AllINT8(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := opts.Float.Parse()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := quantize.Apply(m, opts.Ranges, opts.Quant)
	if err != nil {
		t.Fatal(err)
	}
	today, err := graph.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(allBytes.Bytes, today) {
		t.Error("all-int8 placement differs from quantize.Apply's model")
	}
	var ops []string
	for _, r := range f.Regions {
		ops = append(ops, r.Op)
		if r.Decision != schema.DecisionINT8 {
			t.Errorf("all-int8 region %s: decision %q", r.ID, r.Decision)
		}
	}
	if len(f.Regions) != len(rep.Quantized) || !slices.Equal(ops, []string{"Conv", "Conv", "Conv", "Flatten", "Gemm"}) {
		t.Errorf("regions %v, quantize report %v", f.Regions, rep.Quantized)
	}

	in, err := inputs(m, data.Spec{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	allFloat := withDecisions(f.Regions, indices(f.Regions, nil))
	fp, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, allFloat)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fp.model.Graph.Nodes {
		if n.OpType == "QuantizeLinear" || n.OpType == "DequantizeLinear" {
			t.Fatalf("every region float, yet %s remains", n)
		}
	}
	want, got := run(t, opts.Float, in), run(t, fp.serialized, in)
	if !slices.Equal(want, got) {
		t.Errorf("every region float: outputs %v, float model %v", got[:10], want[:10])
	}

	second := withDecisions(f.Regions, map[int]bool{f.Regions[1].Index: true})
	one, err := quantizeKeeping(opts.Float, opts.Ranges, opts.Quant, second)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range one.nodes {
		if readsDequantized(n) != (i != 1) {
			t.Errorf("region %s kept float: node %s reads a DequantizeLinear: %v", f.Regions[1].ID, n, readsDequantized(n))
		}
	}
}

// A search writes a complete placement.json, replaying it rebuilds the
// same model byte for byte without measuring, and a file made for another
// model is refused.
func TestSearchReplay(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	opts.Budget = 10 * time.Second
	opts.CPU = "test cpu"
	var lines []string
	opts.Progress = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	f, model, err := Search(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The search says what it does as it goes: a 60 s step with no line
	// looks like a hang.
	for _, want := range []string{"placement: profiling FP32 and all-INT8", "placement: timing fp32, all-int8"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no progress line %q in %q", want, lines)
		}
	}
	js, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", js)

	var generic map[string]any
	if err := json.Unmarshal(js, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "mode", "recommended", "chosen", "reason", "cpu", "ort_level", "threads", "regions", "timings", "search_seconds", "budget_seconds"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("placement.json has no %q", k)
		}
	}
	if f.Mode != schema.ModeAuto || !slices.Contains([]string{schema.RecommendINT8, schema.RecommendFP32}, f.Recommended) ||
		!slices.Contains([]string{schema.CandidateAllINT8, schema.CandidateGuided, schema.CandidateGreedy, CandidateDynamic, CandidateS8S8, CandidatePerTensor, CandidateQOperator, CandidateReduceRange}, f.Chosen) || f.Reason == "" || f.SearchSeconds <= 0 {
		t.Errorf("placement %+v", f)
	}
	for _, r := range f.Regions {
		if r.Decision != schema.DecisionINT8 && r.Decision != schema.DecisionFloat {
			t.Errorf("region %s: decision %q", r.ID, r.Decision)
		}
		// Every MNIST region is a named node ORT profiles under its name.
		if r.FP32Ms <= 0 || r.INT8Ms <= 0 {
			t.Errorf("region %s: profiled FP32 %.4f ms, INT8 %.4f ms; want both > 0", r.ID, r.FP32Ms, r.INT8Ms)
		}
	}
	// MNIST's kinds in graph order: its 3x3 convolutions, Flatten, Gemm;
	// the greedy search tries each that leaves a region int8.
	var kinds []string
	for _, st := range f.Greedy {
		kinds = append(kinds, st.Kind)
		if st.Regions <= 0 || len(st.Timings) == 0 {
			t.Errorf("greedy step %+v", st)
		}
		for _, tm := range st.Timings {
			if tm.BeforeMs <= 0 || tm.AfterMs <= 0 || tm.Runs <= 0 {
				t.Errorf("greedy step %s: timing %+v", st.Kind, tm)
			}
		}
	}
	if !f.BudgetExhausted && !slices.Equal(kinds, []string{"Conv 3x3", "Flatten", "Gemm"}) {
		t.Errorf("greedy steps over kinds %v, want Conv 3x3, Flatten, Gemm", kinds)
	}
	threads := map[int]bool{}
	for _, tm := range f.Timings {
		threads[tm.Threads] = true
		for c, ms := range tm.P50Ms {
			if ms <= 0 {
				t.Errorf("timing %+v: candidate %s has %v ms", tm, c, ms)
			}
		}
	}
	if !threads[1] || (!threads[0] && !f.BudgetExhausted) {
		t.Errorf("timed at threads %v, want 1 and all cores", threads)
	}

	path := filepath.Join(t.TempDir(), "placement.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	from, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		g, replayed, err := Replay(opts, from)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(replayed.Bytes, model.Bytes) || !slices.Equal(g.Regions, f.Regions) {
			t.Error("replay did not rebuild the searched model")
		}
		if again, err := g.Marshal(); err != nil || !bytes.Equal(again, js) {
			t.Errorf("the replayed file is not the file replayed, byte for byte (%v)", err)
		}
	}

	other := *from
	other.Regions = slices.Clone(from.Regions)
	other.Regions[0].ID = "renamed"
	if _, _, err := Replay(opts, &other); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("replaying a file for another model: %v", err)
	}
	other.Regions = from.Regions[1:]
	if _, _, err := Replay(opts, &other); err == nil || !strings.Contains(err.Error(), "lists 4 regions") {
		t.Errorf("replaying a file with a region missing: %v", err)
	}
}

// The search honours its budget: it ends within the budget plus one step
// (a step is started only when its predicted cost fits), says where it
// stopped, and recommends FP32 when the budget ends before an INT8 win
// was measured and confirmed.
func TestSearchBudget(t *testing.T) {
	ortenv.Require(t)
	opts := mnistOptions(t)
	for _, budget := range []time.Duration{time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
		opts.Budget = budget
		f, _, clk, err := search(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("budget %s: %.3f s, longest step %s, stopped before %q: %s", budget, f.SearchSeconds, clk.longest, f.StoppedBefore, f.Reason)
		if limit := (budget + clk.longest + 200*time.Millisecond).Seconds(); f.SearchSeconds > limit {
			t.Errorf("budget %s: the search took %.3f s, over the budget plus its longest step (%.3f s)", budget, f.SearchSeconds, limit)
		}
		if f.BudgetExhausted != (f.StoppedBefore != "") {
			t.Errorf("budget %s: budget_exhausted %v but stopped_before %q", budget, f.BudgetExhausted, f.StoppedBefore)
		}
		if f.Recommended == schema.RecommendINT8 {
			confirmed := 0
			for _, tm := range f.Timings {
				if tm.Confirmation {
					confirmed++
				}
			}
			if confirmed == 0 {
				t.Errorf("budget %s: INT8 recommended without a confirmation: %+v", budget, f.Timings)
			}
		}
		if budget == time.Millisecond {
			if !f.BudgetExhausted || f.Recommended != schema.RecommendFP32 || len(f.Timings) != 0 || !strings.Contains(f.Reason, "budget ended") {
				t.Errorf("a 1ms budget: exhausted %v, recommended %s, %d timings, reason %q; want exhausted, FP32, no timing, the reason saying so",
					f.BudgetExhausted, f.Recommended, len(f.Timings), f.Reason)
			}
		}
	}
}

// The greedy search's kinds: depthwise, 1x1 and kxk convolutions apart,
// other ops by type.
func TestRegionKind(t *testing.T) {
	b := testgraph.New(t, "kinds", 13)
	x := b.Value("x")
	// regionKind goes by the op and its weights, never by a node's name (left empty).
	conv := func(name string, dims []int64, group int64) *graph.Node {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		node := b.NodeTo("", "Conv", b.Value(name), x, b.Floats(name+"_w", dims, make([]float32, n)...))
		node.SetAttr(&graph.Attr{Name: "group", Type: graph.AttrInt, Int: group})
		return node
	}
	flatten := b.NodeTo("", "Flatten", b.Value("flat"), x)
	for n, want := range map[*graph.Node]string{
		conv("dw", []int64{16, 1, 3, 3}, 16):     "Conv depthwise",
		conv("pw", []int64{32, 16, 1, 1}, 1):     "Conv 1x1",
		conv("k5", []int64{32, 16, 5, 5}, 1):     "Conv 5x5",
		conv("grouped", []int64{32, 4, 3, 3}, 4): "Conv 3x3",
		flatten:                                  "Flatten",
	} {
		if got := regionKind(n); got != want {
			t.Errorf("%s: kind %q, want %q", n, got, want)
		}
	}
}

// An omitted optional input (an LSTM's sequence_lens) is nil: asking
// whether the node reads a DequantizeLinear must not crash (it did, in
// optc build of a torch LSTM).
func TestReadsDequantizedOmittedInput(t *testing.T) {
	g := graph.NewGraph("g")
	x, _ := g.NewValue("x")
	y, _ := g.NewValue("y")
	n, err := g.AddNode("LSTM", []*graph.Value{x, nil, nil, nil}, []*graph.Value{y})
	if err != nil {
		t.Fatal(err)
	}
	if readsDequantized(n) {
		t.Error("reads a DequantizeLinear")
	}
}
