package data

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/optc-dev/optc/graph"
)

// This file is the input specification: what each model input is (per
// sample or not, where its batch axis is, what synthetic data suits it),
// resolved once from the model and the options and used by every reader.
//
// Real models declare inputs many ways: a static batch of 1 (the default of
// torch.onnx.export), a dynamic batch, dynamic spatial dims, dims shared by
// name across inputs (BERT's batch and seq), integer ids into an embedding,
// attention masks, recurrent state whose batch is on axis 1, scalars such as
// a sample rate. A stage asks for n samples at its preferred batch size and
// gets runs of a batch size that fits: a static batch is used as it is.

// NoBatchAxis marks an input that is not per sample (a scalar, a config
// value): it is fed the same in every run.
const NoBatchAxis = -1

// Feed says what synthetic data goes into an input.
type Feed uint8

const (
	// FeedRandom draws uniform values in the input's range.
	FeedRandom Feed = iota
	// FeedZeros is for recurrent state and scalars: zeros are the natural
	// first step.
	FeedZeros
	// FeedOnes is for attention masks: nothing masked.
	FeedOnes
)

func (f Feed) String() string {
	switch f {
	case FeedZeros:
		return "zeros"
	case FeedOnes:
		return "ones"
	}
	return "random"
}

// inferInputs fills in BatchAxis, Feed and Range of the inputs of g.
//
// The batch axis: axis 0, unless the input's axis 0 is static while the
// batch of the other inputs (their symbolic axis 0) appears on another of
// its axes, by name or, for unnamed dynamic dims, as its first dynamic axis
// (LSTM/GRU state [layers, batch, hidden]). Scalars have none.
//
// The feed: zeros for state inputs (batch not on axis 0) and scalars, ones
// for integer inputs named like a mask, random otherwise; integer inputs
// that index an embedding (Gather data with a static first dim V) get the
// range [0, V).
func inferInputs(g *graph.Graph, inputs []Input) {
	batchSym := batchSymbol(inputs)
	dynBatch := batchSym != ""
	if !dynBatch {
		for _, in := range inputs {
			if len(in.Shape) > 0 && in.Shape[0].Kind != graph.DimStatic {
				dynBatch = true
				break
			}
		}
	}
	for i := range inputs {
		in := &inputs[i]
		switch {
		case in.Shape == nil:
		case len(in.Shape) == 0:
			in.BatchAxis, in.Feed = NoBatchAxis, FeedZeros
		case batchSym != "" && in.Shape[0].Param != batchSym:
			if k := slices.IndexFunc(in.Shape, func(d graph.Dim) bool { return d.Param == batchSym }); k > 0 {
				in.BatchAxis = k
				if in.Shape[0].Kind == graph.DimStatic {
					in.Feed = FeedZeros // state: [layers, batch, hidden]
				}
			}
		case in.Shape[0].Kind == graph.DimStatic && dynBatch:
			if k := stateBatchAxis(in.Shape, batchSym); k > 0 {
				in.BatchAxis, in.Feed = k, FeedZeros
			}
		}
		if in.Feed == FeedRandom && isInt(in.DType) {
			if strings.Contains(strings.ToLower(in.Name), "mask") {
				in.Feed = FeedOnes
			} else if v := embeddingRows(g, in.Name); v > 0 {
				in.Range = &[2]float64{0, float64(v)}
			}
		}
		if isInt(in.DType) && dividesIntegers(g, in.Name) {
			in.Divisor = true
			if in.Range == nil {
				in.Range = &[2]float64{1, 10}
			}
		}
	}
}

// batchSymbol is the name of the batch dim: the symbol every input with
// named dims shares (the earliest axis of the first such input when several
// are shared, as BERT's batch and seq), or "" when they share none. A
// sequence model's x [seq, batch, 8] and h0 [2, batch, 16] share batch.
func batchSymbol(inputs []Input) string {
	var common []string
	first := true
	for _, in := range inputs {
		var syms []string
		for _, d := range in.Shape {
			if d.Kind == graph.DimSymbolic && d.Param != "" {
				syms = append(syms, d.Param)
			}
		}
		if len(syms) == 0 {
			continue
		}
		if first {
			common, first = syms, false
			continue
		}
		common = slices.DeleteFunc(common, func(s string) bool { return !slices.Contains(syms, s) })
	}
	if len(common) == 0 {
		return ""
	}
	return common[0]
}

// stateBatchAxis is the axis of shape that holds the batch named sym (the
// first dynamic axis when sym is empty), or 0 when there is none.
func stateBatchAxis(shape graph.Shape, sym string) int {
	for k, d := range shape {
		if k == 0 || d.Kind == graph.DimStatic {
			continue
		}
		if sym == "" || d.Param == sym || d.Param == "" {
			return k
		}
	}
	return 0
}

// embeddingRows is the number of rows of the embedding table the graph
// input name indexes (a Gather on axis 0 of a constant), or 0.
func embeddingRows(g *graph.Graph, name string) int64 {
	var v *graph.Value
	for _, in := range g.Inputs {
		if in.Name == name {
			v = in
		}
	}
	if v == nil {
		return 0
	}
	for _, use := range v.Uses() {
		n := use.Node
		if n.OpType != "Gather" || use.Index != 1 || n.AttrInt("axis", 0) != 0 {
			continue
		}
		if t := n.Input(0).ConstantTensor(); t != nil && len(t.Dims) > 0 {
			return t.Dims[0]
		}
	}
	return 0
}

func isInt(dt graph.DataType) bool {
	_, ok := intRanges[dt]
	return ok
}

// batchAxis is the batch axis of in under opts (--batch-axis overrides the
// inferred one); NoBatchAxis for inputs that are not per sample.
func batchAxis(in Input, opts Options) int {
	if k, ok := opts.BatchAxes[in.Name]; ok {
		return k
	}
	if in.Shape != nil && in.BatchAxis >= len(in.Shape) {
		return NoBatchAxis
	}
	return in.BatchAxis
}

// feed is what synthetic data fills in with under opts: a --value makes it a
// constant.
func feed(in Input, opts Options) (Feed, *float64) {
	if v, ok := opts.Values[in.Name]; ok {
		return FeedRandom, &v
	}
	if _, ok := opts.Ranges[in.Name]; ok {
		// A range named for this input asks for random values in it: a
		// mask with --range attention_mask:0,2 is padded at random.
		return FeedRandom, nil
	}
	if k, ok := opts.BatchAxes[in.Name]; ok && k != in.BatchAxis && in.Feed == FeedZeros && k == 0 {
		return FeedRandom, nil
	}
	return in.Feed, nil
}

// valueRange is the range of random values for in: --range name:LO,HI, the
// inferred id range, or the options' range.
func valueRange(in Input, opts Options) (lo, hi float64) {
	if r, ok := opts.Ranges[in.Name]; ok {
		return r[0], r[1]
	}
	if in.Range != nil && opts.Low == 0 && opts.High <= 1 {
		return in.Range[0], in.Range[1]
	}
	lo, hi = opts.Low, opts.High
	if lo == 0 && hi == 0 {
		hi = 1
	}
	return lo, hi
}

// fillable reports whether synthetic data can stand in for in when the data
// does not give it: state, masks, scalars and inputs with a --value.
func fillable(in Input, opts Options) bool {
	f, v := feed(in, opts)
	return v != nil || f != FeedRandom || batchAxis(in, opts) == NoBatchAxis
}

// Describe says, in one line for a table, how synthetic data fills each
// input that is not plain random: "state: zeros, batch on axis 1".
func Describe(inputs []Input, opts Options) []string {
	var out []string
	for _, in := range inputs {
		f, v := feed(in, opts)
		k := batchAxis(in, opts)
		var parts []string
		switch {
		case v != nil:
			parts = append(parts, "the value "+strconv.FormatFloat(*v, 'g', -1, 64))
		case f != FeedRandom:
			parts = append(parts, f.String())
		}
		if lo, hi := valueRange(in, opts); f == FeedRandom && v == nil && (in.Range != nil || opts.Ranges[in.Name] != [2]float64{}) {
			parts = append(parts, fmt.Sprintf("integers in [%g, %g)", lo, hi))
		}
		switch {
		case k == NoBatchAxis:
			parts = append(parts, "the same in every run")
		case k > 0:
			parts = append(parts, fmt.Sprintf("batch on axis %d", k))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("input %q %s: %s", in.Name, in, strings.Join(parts, ", ")))
		}
	}
	return out
}

// ParseValueFlag parses a --value flag, "name=V".
func ParseValueFlag(s string) (string, float64, error) {
	name, val, ok := strings.Cut(s, "=")
	v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if !ok || name == "" || err != nil {
		return "", 0, fmt.Errorf("--value %q: want name=number (e.g. sr=16000)", s)
	}
	return name, v, nil
}

// ParseBatchAxisFlag parses a --batch-axis flag, "name:K" or "name:none".
func ParseBatchAxisFlag(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("--batch-axis %q: want name:K or name:none (e.g. state:1)", s)
	}
	name, v := s[:i], strings.TrimSpace(s[i+1:])
	if v == "none" {
		return name, NoBatchAxis, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return "", 0, fmt.Errorf("--batch-axis %q: %q is not an axis (a non-negative integer) or none", s, v)
	}
	return name, k, nil
}

// ParseRangeFlag parses a --range flag: "LO,HI" for every input, or
// "name:LO,HI" for one (the name is everything before the last colon).
func ParseRangeFlag(s string) (name string, lo, hi float64, err error) {
	list := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		name, list = s[:i], s[i+1:]
		if name == "" {
			return "", 0, 0, fmt.Errorf("--range %q: the input name is empty (want LO,HI or name:LO,HI)", s)
		}
	}
	a, b, ok := strings.Cut(list, ",")
	var err1, err2 error
	lo, err1 = strconv.ParseFloat(strings.TrimSpace(a), 64)
	hi, err2 = strconv.ParseFloat(strings.TrimSpace(b), 64)
	if !ok || err1 != nil || err2 != nil || !(lo < hi) {
		return "", 0, 0, fmt.Errorf("--range must be LO,HI or name:LO,HI with LO < HI, got %q", s)
	}
	return name, lo, hi, nil
}

// symbolBindings are the values of named dims fixed by --shape on any
// input: a dim shared by name (BERT's seq) takes one value on every input.
func symbolBindings(inputs []Input, opts Options) map[string]int64 {
	out := map[string]int64{}
	for _, in := range inputs {
		dims, ok := opts.Shapes[in.Name]
		if !ok || len(dims) != len(in.Shape) {
			continue
		}
		k := batchAxis(in, opts)
		for i, d := range in.Shape {
			if d.Kind == graph.DimSymbolic && i != k && dims[i] >= 0 {
				if _, seen := out[d.Param]; !seen {
					out[d.Param] = dims[i]
				}
			}
		}
	}
	return out
}

// StaticBatch is the batch size the model fixes on its inputs' batch axes
// (1 for most exports without dynamic axes), or 0 when the batch is
// dynamic: a stage times and runs at this size when it is not 0.
func StaticBatch(inputs []Input, spec Spec) int {
	b, fixedBy, err := batchSize("", inputs, Options{Spec: spec}, true)
	if err != nil || fixedBy == "" {
		return 0
	}
	return b
}

// ResolveShapes is the shape of each input in one run of opts.Batch
// samples: static dims, --shape, a dynamic batch axis at opts.Batch, and
// dims shared by name across inputs resolved once. It is what a runtime
// profile (TensorRT min/opt/max) is made of.
func ResolveShapes(inputs []Input, opts Options) ([][]int64, error) {
	bind := symbolBindings(inputs, opts)
	out := make([][]int64, len(inputs))
	for i, in := range inputs {
		s, err := resolveShape(in, opts, bind)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// symbolValue is the size of a symbolic dim: its binding from --shape; 0
// for an unbound past length (past_sequence_length, past_seq: the first
// step of a KV cache, which has no past); or a sum of such terms and
// integers, as exporters write the length of a mask over past and new
// tokens ("past_sequence_length + sequence_length").
func symbolValue(param string, bind map[string]int64) (int64, bool) {
	if param == "" {
		return 0, false
	}
	var sum int64
	for _, term := range strings.Split(param, "+") {
		term = strings.TrimSpace(term)
		if n, err := strconv.ParseInt(term, 10, 64); err == nil && n >= 0 {
			sum += n
			continue
		}
		if v, ok := bind[term]; ok {
			sum += v
			continue
		}
		if isPastLength(term) {
			continue
		}
		return 0, false
	}
	return sum, true
}

// isPastLength says whether a symbol names the cached length of a KV
// cache: an identifier with "past" in it.
func isPastLength(sym string) bool {
	if !strings.Contains(strings.ToLower(sym), "past") {
		return false
	}
	return !strings.ContainsFunc(sym, func(r rune) bool {
		return !(r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r))
	})
}

// dividesIntegers says whether the graph input name is the divisor
// (input 1) of a Div or Mod in g or in any of its subgraphs.
func dividesIntegers(g *graph.Graph, name string) bool {
	found := false
	g.Walk(func(sg *graph.Graph) {
		for _, n := range sg.Nodes {
			if (n.OpType == "Div" || n.OpType == "Mod") && n.Domain == "" && len(n.Inputs()) == 2 &&
				n.Input(1) != nil && n.Input(1).Name == name {
				found = true
			}
		}
	})
	return found
}
