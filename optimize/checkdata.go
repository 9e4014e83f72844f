package optimize

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
)

// zeroHazard returns a node of m (subgraphs included) that ONNX Runtime
// mishandles when an integer it reads is 0 and that integer comes from
// the check's random inputs, what happens then, and the inputs it comes
// from; nil when there is none. The check's default random integers, from
// [0, 1), are all 0 (and so are floats in [0, 1) cast to integers).
//   - Div and Mod on integers divide without a check: a zero divisor kills
//     the process with SIGFPE, which no error handling can catch (crash).
//   - ReverseSequence skips a batch entry whose sequence length is 0 and
//     leaves its output unwritten, so two runs differ.
func zeroHazard(m *graph.Model) (n *graph.Node, what string, crash bool, inputs []string) {
	fed := map[*graph.Value]bool{}
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			fed[v] = true
		}
	}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, x := range g.Nodes {
			if n != nil || x.Domain != "" && x.Domain != "ai.onnx" {
				continue
			}
			var from []string
			switch {
			case (x.OpType == "Div" || x.OpType == "Mod") && integer(x.Input(1)):
				if from = inputsBehind(x.Input(1), fed); from != nil {
					n, what, crash = x, "divides integers, and ONNX Runtime crashes on an integer division by zero", true
				}
			case x.OpType == "ReverseSequence" && x.Input(1) != nil:
				if from = inputsBehind(x.Input(1), fed); from != nil {
					n, what = x, "takes sequence lengths, and ONNX Runtime leaves the output of a length 0 unwritten"
				}
			}
			inputs = from
		}
	})
	return n, what, crash, inputs
}

// integer reports whether v may be an integer tensor (an undeclared type
// may be one).
func integer(v *graph.Value) bool {
	return v != nil && (v.Type == nil || v.Type.Kind != graph.KindTensor || v.Type.Elem == graph.Undefined || !v.Type.Elem.IsFloat())
}

// inputsBehind returns the fed inputs of the main graph whose values v is
// computed from, not counting paths through Shape or Size (a shape is not
// random data); nil when there are none. A value of a subgraph that no
// node makes (a Loop or Scan body input) counts as fed by every input.
func inputsBehind(v *graph.Value, fed map[*graph.Value]bool) []string {
	seen := map[*graph.Value]bool{}
	found := map[string]bool{}
	var walk func(v *graph.Value)
	walk = func(v *graph.Value) {
		if v == nil || seen[v] || v.Const != nil {
			return
		}
		seen[v] = true
		if fed[v] {
			found[v.Name] = true
			return
		}
		p := v.Producer()
		if p == nil {
			if v.Graph() != nil && v.Graph().Parent != nil {
				for f := range fed {
					found[f.Name] = true
				}
			}
			return
		}
		if p.OpType == "Shape" || p.OpType == "Size" {
			return
		}
		for _, in := range p.Inputs() {
			walk(in)
		}
	}
	walk(v)
	if len(found) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(found))
}

// zeroSafeRange returns the data options for the check's random inputs of
// m. When a zero hazard reads an input that the default range [0, 1)
// would make 0, that input gets [1, 2) instead, with a note; an input the
// user gave a range or value holding 0 is an error where 0 would crash the
// process.
func zeroSafeRange(m *graph.Model, dopts data.Options) (data.Options, string, error) {
	n, what, crash, inputs := zeroHazard(m)
	if n == nil {
		return dopts, "", nil
	}
	var moved []string
	for _, name := range inputs {
		// Integers are drawn from the integers in [lo, hi); floats may be
		// cast to integers, which truncates (-1, 1) to 0.
		holdsZero := func(lo, hi float64) bool { return lo < 1 && hi > -1 }
		if in := inputNamed(m, name); in != nil && integer(in) {
			holdsZero = func(lo, hi float64) bool { return math.Ceil(lo) <= 0 && 0 < hi }
		}
		var zero, given bool
		if v, ok := dopts.Values[name]; ok {
			zero, given = math.Trunc(v) == 0, true
		} else if r, ok := dopts.Ranges[name]; ok {
			zero, given = holdsZero(r[0], r[1]), true
		} else {
			zero, given = holdsZero(dopts.Low, dopts.High), !(dopts.Low == 0 && dopts.High == 1)
		}
		switch {
		case !zero:
		case given && crash:
			return dopts, "", fmt.Errorf("%s %s, and input %q, which it reads, gets the integer 0 from the range or value given; give it a range without 0 (--range %s:1,10)", n, what, name, name)
		case !given:
			moved = append(moved, name)
		}
	}
	if len(moved) == 0 {
		return dopts, "", nil
	}
	ranges := maps.Clone(dopts.Ranges)
	if ranges == nil {
		ranges = map[string][2]float64{}
	}
	for _, name := range moved {
		ranges[name] = [2]float64{1, 2}
	}
	dopts.Ranges = ranges
	quoted := make([]string, len(moved))
	for i, name := range moved {
		quoted[i] = strconv.Quote(name)
	}
	return dopts, fmt.Sprintf("random values of %s drawn from [1, 2) instead of [0, 1): %s %s", strings.Join(quoted, ", "), n, what), nil
}

func inputNamed(m *graph.Model, name string) *graph.Value {
	for _, v := range m.Graph.Inputs {
		if v.Name == name {
			return v
		}
	}
	return nil
}
