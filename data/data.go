// Package data reads model input data for every optc command that runs a
// model (run, compare, bench, calibration): .npy and .npz files, ONNX test
// data sets (.pb tensors), folders of PNG/JPEG images, and synthetic random
// data.
//
// .npy and .npz files have a sample axis: axis 0 of the array is the
// model's batch axis, and Open groups the samples into batches of
// Options.Batch. They are streamed: one batch is in memory at a time. Image
// folders are batched the same way, one image a sample, decoded and
// preprocessed (Options.Image) a batch at a time. ONNX
// test data sets (input_0.pb, input_1.pb, ...) are fed as they are, one run
// per set. Every format is checked against the model's inputs (element type,
// rank, static dims, --shape overrides) before the first batch, and errors
// name the input, the expected and the given type and shape, and the file.
package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/graph"
)

// Input describes one model input a Source feeds (graph inputs that are not
// initializers).
type Input struct {
	Name  string
	DType graph.DataType
	Shape graph.Shape // nil: rank unknown
	// BatchAxis is the axis that holds samples: 0 for most inputs, 1 for
	// recurrent state [layers, batch, hidden], NoBatchAxis for inputs fed
	// the same in every run (scalars). GraphInputs infers it.
	BatchAxis int
	// Feed is what synthetic data puts in the input (random, or zeros for
	// state, ones for masks); GraphInputs infers it.
	Feed Feed
	// Range, when set, bounds random values (integer ids into an
	// embedding of V rows: [0, V)).
	Range *[2]float64
	// Divisor says the input divides in an integer Div or Mod: ONNX
	// Runtime's integer kernels fault (SIGFPE) on a zero divisor, which
	// ends the process, so random data draws it from [1, 10) and every
	// source refuses a batch that holds a zero there.
	Divisor bool
}

// String returns the input's type as optc prints it: float32[N,3,48,192].
func (in Input) String() string { return in.DType.String() + in.Shape.String() }

// GraphInputs returns the inputs of g that a Source feeds: the graph inputs
// that are not initializers, in order.
func GraphInputs(g *graph.Graph) []Input {
	var out []Input
	for _, v := range g.Inputs {
		if v.Const != nil || v.Sparse != nil {
			continue
		}
		in := Input{Name: v.Name}
		if v.Type != nil {
			in.DType = v.Type.Elem
			in.Shape = append(graph.Shape(nil), v.Type.Shape...)
			if v.Type.Shape != nil && in.Shape == nil {
				in.Shape = graph.Shape{}
			}
		}
		out = append(out, in)
	}
	inferInputs(g, out)
	return out
}

// Options controls how a Source reads or makes data.
type Options struct {
	// Batch is the preferred number of samples per batch for sample-axis
	// formats (.npy, .npz, image folders, random); 0 means the batch given
	// by --shape, else 1. A model with a static batch size gets runs of
	// that size instead, unless StrictBatch.
	// .pb data sets are fed as they are and ignore it.
	Batch int
	// StrictBatch makes a static batch size that differs from Batch an
	// error (the user asked for that batch size with --batch).
	StrictBatch bool
	// Spec is what the user said about the inputs: shapes, batch axes,
	// constant values, ranges.
	Spec
	// Seed makes random data reproducible.
	Seed int64
	// Low and High bound random data: [Low, High), [0,1) when both are zero.
	Low, High float64
	// Normal draws random float inputs from the standard normal
	// distribution instead of [Low, High), unless the input has a range
	// of its own (Spec.Ranges, or an id range GraphInputs inferred):
	// normalized images, audio and embeddings are centred on zero, and
	// ranges calibrated on one-sided data do not cover them.
	Normal bool
	// Samples is, for random data, the total number of samples (default
	// one batch); for .npy, .npz and image folders, at most this many
	// samples are read (0: all). .pb data sets ignore it.
	Samples int
	// Shuffle reads .npy (and uncompressed .npz) samples, or the files of
	// an image folder, in an order drawn from Seed, so that Samples takes a
	// random subset rather than the first ones (calibration sets are often
	// sorted by class).
	Shuffle bool
	// Skip leaves out the first Skip samples of .npy, .npz and image
	// folders (of the drawn order with Shuffle): with the same Seed, a
	// source with Skip N reads what one with Samples N left out, so
	// calibration and a held-out check can share one file.
	Skip int
	// Image says how image files become an input tensor (image folders
	// only; other formats ignore it).
	Image ImageOptions
}

// Spec is what the user says about a model's inputs (--shape,
// --batch-axis, --value, --range), resolved against the model by every
// reader; one Spec is handed to every stage of a build.
type Spec struct {
	// Shapes fixes dynamic dims (from --shape name:d0,d1,...); each must
	// agree with the input's static dims and with the data. A negative dim
	// (written ? in the flag) stays dynamic. On a dynamic batch axis the
	// value is the default batch size, not a pin: stages still run their
	// own batch sizes there.
	Shapes map[string][]int64
	// BatchAxes overrides the inferred batch axis of inputs (--batch-axis
	// name:K or name:none).
	BatchAxes map[string]int
	// Values feeds inputs a constant in synthetic data (--value name=V:
	// a sample rate, a flag).
	Values map[string]float64
	// Ranges bounds random values per input (--range name:LO,HI: token
	// ids within the vocabulary).
	Ranges map[string][2]float64
}

// Batch is one run's worth of input tensors.
type Batch struct {
	Tensors []*graph.Tensor // one per Input, in the order of the inputs passed to Open
	Samples int             // samples in this batch (size of axis 0 for sample-axis formats; 1 for .pb sets)
}

// Source yields batches of input data. A Source is not safe for concurrent
// use. The tensors of each batch are freshly allocated and belong to the
// caller.
type Source interface {
	Next() (*Batch, error) // io.EOF after the last batch
	Close() error
}

// Open opens spec: a .npy file, a .npz file, a .pb file, a folder holding
// input_*.pb files (one ONNX test data set), a folder of such folders (e.g.
// test_data_set_0, test_data_set_1, each one run), a folder of .png, .jpg
// and .jpeg images (sub-folders included; see ImageOptions), or the word
// "random" (synthetic data, only when explicitly asked). Files without a known
// extension are recognised by their first bytes.
func Open(spec string, inputs []Input, opts Options) (Source, error) {
	if err := checkOpen(spec, inputs, opts); err != nil {
		return nil, err
	}
	src, err := open(spec, inputs, opts)
	if err != nil || !slices.ContainsFunc(inputs, func(in Input) bool { return in.Divisor }) {
		return src, err
	}
	return &nonZeroDivisors{Source: src, where: spec, inputs: inputs}, nil
}

func open(spec string, inputs []Input, opts Options) (Source, error) {
	if spec == "random" {
		return openRandom(inputs, opts)
	}
	st, err := os.Stat(spec)
	if err != nil {
		return nil, fmt.Errorf("input data %s: %w", spec, unwrapPathError(err))
	}
	if st.IsDir() {
		return openDir(spec, inputs, opts)
	}
	npy := func() (Source, error) {
		return withFill(spec, inputs, splitFed(inputs, opts), opts, func(fed []Input) (Source, error) { return openNpy(spec, fed, opts) })
	}
	switch strings.ToLower(filepath.Ext(spec)) {
	case ".npy":
		return npy()
	case ".npz":
		return openNpz(spec, inputs, opts)
	case ".pb":
		return openPBFile(spec, inputs, opts)
	}
	magic, err := readPrefix(spec, 6)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(magic, npyMagic):
		return npy()
	case strings.HasPrefix(magic, "PK\x03\x04"), strings.HasPrefix(magic, "PK\x05\x06"):
		return openNpz(spec, inputs, opts)
	}
	return nil, fmt.Errorf("input data %s: unknown format: want a .npy or .npz file, a .pb tensor, a folder of input_*.pb files (or of such folders), a folder of images, or \"random\"", spec)
}

// openDir opens a folder: ONNX test data sets when it holds input_<i>.pb
// files (or folders of them), else the images under it.
func openDir(dir string, inputs []Input, opts Options) (Source, error) {
	sets, err := pbSets(dir)
	if err != nil {
		return nil, err
	}
	if len(sets) > 0 {
		return newPBSource(inputs, opts, sets)
	}
	files, err := imageFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no input_<i>.pb files, no folders holding them, and no images (%s) under it", dir, imageExtList)
	}
	return withFill(dir, inputs, splitFed(inputs, opts), opts, func(fed []Input) (Source, error) { return openImages(dir, files, fed, opts) })
}

// checkOpen validates what every format needs: inputs, options, --shape
// names.
func checkOpen(spec string, inputs []Input, opts Options) error {
	if len(inputs) == 0 {
		return fmt.Errorf("input data %s: the model has no inputs to feed", spec)
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		if seen[in.Name] {
			return fmt.Errorf("input data %s: input %q is listed twice", spec, in.Name)
		}
		seen[in.Name] = true
	}
	if opts.Batch < 0 {
		return fmt.Errorf("input data %s: batch size %d is negative", spec, opts.Batch)
	}
	if opts.Samples < 0 || opts.Skip < 0 {
		return fmt.Errorf("input data %s: sample count %d and skip %d must not be negative", spec, opts.Samples, opts.Skip)
	}
	for _, flag := range []struct {
		name string
		keys []string
	}{{"--shape", mapKeys(opts.Shapes)}, {"--batch-axis", mapKeys(opts.BatchAxes)}, {"--value", mapKeys(opts.Values)}, {"--range", mapKeys(opts.Ranges)}} {
		for _, name := range flag.keys {
			if !seen[name] {
				return fmt.Errorf("input data %s: %s %s: the model has no input %q (inputs: %s)", spec, flag.name, name, name, inputNames(inputs))
			}
		}
	}
	for _, in := range inputs {
		if _, _, err := effectiveShape(in, opts); err != nil {
			return fmt.Errorf("input data %s: %w", spec, err)
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ParseShapeFlag parses a --shape value, "name:d0,d1,...". The name is
// everything before the last colon, so names such as "input:0" work. A dim
// written ? (or N, or -1) stays dynamic; it comes back as -1.
func ParseShapeFlag(s string) (name string, dims []int64, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", nil, fmt.Errorf("--shape %q: want name:d0,d1,... (e.g. x:1,3,224,224)", s)
	}
	name, list := s[:i], strings.TrimSpace(s[i+1:])
	if name == "" {
		return "", nil, fmt.Errorf("--shape %q: the input name is empty (want name:d0,d1,...)", s)
	}
	if list == "" {
		return "", nil, fmt.Errorf("--shape %q: no dims after the colon (want name:d0,d1,...)", s)
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "?" || f == "N" || f == "-1" {
			dims = append(dims, -1)
			continue
		}
		d, perr := strconv.ParseInt(f, 10, 64)
		if perr != nil || d < 0 {
			return "", nil, fmt.Errorf("--shape %q: dim %q is not a non-negative integer or ? (dynamic)", s, f)
		}
		dims = append(dims, d)
	}
	return name, dims, nil
}

// effectiveShape is the input's shape with its --shape override applied:
// the override's dims become static, except the ones written ? and a
// dynamic batch axis, which stay dynamic (the override's value there is
// only the default batch size, see batchHint). It reports whether an
// override was given and checks that it agrees with the input's rank and
// static dims.
func effectiveShape(in Input, opts Options) (graph.Shape, bool, error) {
	dims, ok := opts.Shapes[in.Name]
	if !ok {
		return in.Shape, false, nil
	}
	flag := ShapeFlag(in.Name, dims)
	if in.Shape != nil {
		if len(dims) != len(in.Shape) {
			return nil, false, fmt.Errorf("--shape %s does not fit input %q %s: rank %d, want %d", flag, in.Name, in, len(dims), len(in.Shape))
		}
		for i, d := range in.Shape {
			if d.Kind == graph.DimStatic && dims[i] >= 0 && d.Value != dims[i] {
				return nil, false, fmt.Errorf("--shape %s does not fit input %q %s: dim %d is %d, want %d", flag, in.Name, in, i, dims[i], d.Value)
			}
		}
	}
	k := batchAxis(in, opts)
	s := make(graph.Shape, len(dims))
	for i, d := range dims {
		var model graph.Dim
		if i < len(in.Shape) {
			model = in.Shape[i]
		}
		switch {
		case d < 0 || (i == k && model.Kind != graph.DimStatic && in.Shape != nil):
			s[i] = model
		default:
			s[i] = graph.StaticDim(d)
			s[i].Denotation = model.Denotation
		}
	}
	return s, true, nil
}

// batchHint is the batch size a --shape gives on a dynamic batch axis, or 0.
func batchHint(inputs []Input, opts Options) int {
	for _, in := range inputs {
		dims, ok := opts.Shapes[in.Name]
		k := batchAxis(in, opts)
		if ok && k >= 0 && k < len(dims) && dims[k] > 0 && k < len(in.Shape) && in.Shape[k].Kind != graph.DimStatic {
			return int(dims[k])
		}
	}
	return 0
}

// ResolveShape returns the static shape of one batch of random data for in:
// its static dims and --shape overrides, with a dynamic batch axis taken as
// the batch size (Options.Batch, default 1) and named dims fixed on another
// input taking the same value (bind, from symbolBindings; may be nil). Any
// other dynamic dim is an error naming the input and the dim. A static
// batch axis keeps its size: the caller decides the batch (batchSize).
func ResolveShape(in Input, opts Options) ([]int64, error) {
	return resolveShape(in, opts, nil)
}

func resolveShape(in Input, opts Options, bind map[string]int64) ([]int64, error) {
	eff, _, err := effectiveShape(in, opts)
	if err != nil {
		return nil, err
	}
	if eff == nil {
		return nil, fmt.Errorf("input %q %s: the rank is unknown; give the shape with --shape %s:d0,d1,...", in.Name, in, in.Name)
	}
	if opts.Batch < 0 {
		return nil, fmt.Errorf("input %q: batch size %d is negative", in.Name, opts.Batch)
	}
	k := batchAxis(in, opts)
	out := make([]int64, len(eff))
	for i, d := range eff {
		switch {
		case d.Kind == graph.DimStatic:
			out[i] = d.Value
		case i == k:
			out[i] = int64(max(opts.Batch, 1))
		case d.Kind == graph.DimSymbolic:
			v, ok := symbolValue(d.Param, bind)
			if !ok {
				return nil, fmt.Errorf("input %q %s: dim %d (%s) is dynamic; fix it with --shape %s", in.Name, in, i, d, shapeHint(in, eff, k))
			}
			out[i] = v
		default:
			return nil, fmt.Errorf("input %q %s: dim %d (%s) is dynamic; fix it with --shape %s", in.Name, in, i, d, shapeHint(in, eff, k))
		}
	}
	return out, nil
}

// shapeHint suggests a --shape value: the known dims, the names of the
// others in angle brackets.
func shapeHint(in Input, s graph.Shape, batch int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		switch {
		case d.Kind == graph.DimStatic:
			parts[i] = strconv.FormatInt(d.Value, 10)
		case i == batch:
			parts[i] = "?"
		default:
			parts[i] = "<" + d.String() + ">"
		}
	}
	return in.Name + ":" + strings.Join(parts, ",")
}

// ShapeFlag is dims as a --shape value for input name (? for a dynamic
// dim).
func ShapeFlag(name string, dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
		if d < 0 {
			parts[i] = "?"
		}
	}
	return name + ":" + strings.Join(parts, ",")
}

// overrideNote says, for messages, that the expected shape comes from a
// --shape flag.
func overrideNote(in Input, eff graph.Shape, overridden bool, opts Options) string {
	if !overridden {
		return ""
	}
	return " (fixed to " + eff.String() + " by --shape " + ShapeFlag(in.Name, opts.Shapes[in.Name]) + ")"
}

// expects describes what an input wants: float32[N,3,48,192], plus the
// --shape override when there is one.
func expects(in Input, eff graph.Shape, overridden bool, opts Options) string {
	return in.String() + overrideNote(in, eff, overridden, opts)
}

func inputNames(inputs []Input) string {
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = strconv.Quote(in.Name)
	}
	return strings.Join(names, ", ")
}

func dimsString(dt graph.DataType, dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return dt.String() + "[" + strings.Join(parts, ",") + "]"
}

// checkData checks data of type dt and shape dims, read from where, against
// in. With sampleAxis, dim 0 is the sample axis and is not compared (the
// batch size is checked separately); otherwise every static dim is.
func checkData(where string, in Input, opts Options, dt graph.DataType, dims []int64, sampleAxis bool) error {
	eff, overridden, err := effectiveShape(in, opts)
	if err != nil {
		return err
	}
	given := dimsString(dt, dims)
	if sampleAxis && len(dims) > 0 {
		given += fmt.Sprintf(" (%d samples)", dims[0])
	}
	fail := func(why string, args ...any) error {
		return fmt.Errorf("%s: input %q expects %s, the data is %s: %s", where, in.Name, expects(in, eff, overridden, opts), given, fmt.Sprintf(why, args...))
	}
	if in.DType != graph.Undefined && dt != in.DType {
		return fail("element type %s, want %s", dt, in.DType)
	}
	if k := batchAxis(in, opts); sampleAxis && k != 0 {
		return fail("its batch is on axis %d (set with --batch-axis), but the file holds samples on axis 0; leave the input out of the data (it is filled with %s) or give it in a .pb data set", k, in.Feed)
	}
	if sampleAxis && len(dims) == 0 {
		if eff != nil && len(eff) == 0 {
			return fail("a scalar input has no sample axis; feed it from a .pb data set")
		}
		return fail("a scalar has no sample axis (axis 0 holds the samples)")
	}
	if eff == nil {
		return nil
	}
	if len(dims) != len(eff) {
		return fail("rank %d, want %d", len(dims), len(eff))
	}
	for i, d := range eff {
		if i == 0 && sampleAxis {
			continue
		}
		if d.Kind == graph.DimStatic && d.Value != dims[i] {
			return fail("dim %d is %d, want %d", i, dims[i], d.Value)
		}
	}
	return nil
}

// batchSize returns the batch size for sample-axis data: a static batch
// axis (from the model or --shape) fixes it, whatever Options.Batch
// prefers (with StrictBatch they must agree); otherwise Options.Batch, else
// the --shape batch hint, else 1. fixedBy describes the input whose static
// batch axis fixed it, "" when none did. Inputs that disagree on a static
// batch are an error for files; random data (lenient) feeds each of them
// its own static shape.
func batchSize(where string, inputs []Input, opts Options, lenient bool) (batch int, fixedBy string, err error) {
	fixed := 0
	var first Input
	for _, in := range inputs {
		eff, overridden, err := effectiveShape(in, opts)
		if err != nil {
			return 0, "", err
		}
		k := batchAxis(in, opts)
		if k < 0 || k >= len(eff) || eff[k].Kind != graph.DimStatic {
			continue
		}
		b := eff[k].Value
		desc := fmt.Sprintf("input %q %s", in.Name, expects(in, eff, overridden, opts))
		switch {
		case b <= 0 || b > 1<<31:
			if lenient {
				continue
			}
			return 0, "", fmt.Errorf("%s: %s has a static batch size of %d; cannot feed it from a sample axis", where, desc, b)
		case fixed != 0 && int64(fixed) != b:
			if lenient {
				continue
			}
			return 0, "", fmt.Errorf("%s: inputs %q %s and %q %s have different static batch sizes (%d and %d)", where, first.Name, first, in.Name, in, fixed, b)
		case opts.StrictBatch && opts.Batch != 0 && int64(opts.Batch) != b:
			return 0, "", fmt.Errorf("%s: %s has a static batch size of %d; batch size %d does not fit", where, desc, b, opts.Batch)
		}
		if fixed == 0 {
			fixed, first, fixedBy = int(b), in, desc
		}
	}
	if fixed != 0 {
		return fixed, fixedBy, nil
	}
	if opts.Batch == 0 {
		if h := batchHint(inputs, opts); h > 0 {
			return h, "", nil
		}
	}
	return max(opts.Batch, 1), "", nil
}

// fitSampleCount is how many of samples a source delivers in batches of a
// static batch size: the largest multiple of batch, at least one batch.
func fitSampleCount(where string, samples, batch int, fixedBy string) (int, error) {
	if fixedBy == "" || samples%batch == 0 {
		return samples, nil
	}
	if samples < batch {
		return 0, fmt.Errorf("%s: %d samples do not fill one batch of %d, the static batch size of %s", where, samples, batch, fixedBy)
	}
	return samples - samples%batch, nil
}

func readPrefix(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("input data %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("input data %s: %w", path, unwrapPathError(err))
	}
	return string(b[:m]), nil
}

// openSized opens path for reading and returns its size. Its errors are
// the bare cause (see unwrapPathError), for the caller to name the file in.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, unwrapPathError(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, unwrapPathError(err)
	}
	return f, st.Size(), nil
}

// unwrapPathError drops the *PathError wrapper when the message already
// names the file.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// nonZeroDivisors refuses a batch with a zero in an input that divides
// integers (Input.Divisor), before ONNX Runtime faults on it.
type nonZeroDivisors struct {
	Source
	where  string
	inputs []Input
}

func (s *nonZeroDivisors) Next() (*Batch, error) {
	b, err := s.Source.Next()
	if err != nil {
		return b, err
	}
	for i, in := range s.inputs {
		if !in.Divisor || i >= len(b.Tensors) {
			continue
		}
		if k, ok := firstZero(b.Tensors[i]); ok {
			return nil, fmt.Errorf("%s: input %q holds 0 at element %d: it divides in an integer Div or Mod, and ONNX Runtime's integer division by zero crashes the process", s.where, in.Name, k)
		}
	}
	return b, nil
}

// firstZero is the index of the first zero element of an integer tensor.
func firstZero(t *graph.Tensor) (int, bool) {
	b, err := t.Bytes()
	size := t.DType.BitSize() / 8
	if err != nil || size == 0 {
		return 0, false
	}
	for i := 0; i+size <= len(b); i += size {
		if !slices.ContainsFunc(b[i:i+size], func(c byte) bool { return c != 0 }) {
			return i / size, true
		}
	}
	return 0, false
}

// RandomSamples is how many samples random data draws when it calibrates
// or judges accuracy and no count is given: one run of a model with a
// static batch of 1 is one sample, not a sample set.
const RandomSamples = 64

// MinSplit is the fewest samples a data source must hold for a check to
// be held out of it: HeldOut of them are, the rest calibrate.
const MinSplit = 4

// HeldOut is how many of n samples a split keeps out of calibration for
// the checks: a quarter, rounded up.
func HeldOut(n int) int { return (n + 3) / 4 }

// CountSamples reads a source to the end and counts its samples.
func CountSamples(spec string, inputs []Input, opts Options) (int, error) {
	src, err := Open(spec, inputs, opts)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	n := 0
	for {
		b, err := src.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		n += b.Samples
	}
}

// Split is how a source of at least MinSplit samples divides between
// calibration and a held-out check: calibration reads the first keep
// samples of the order opts.Seed draws (shuffle), or of the file order
// when the format cannot be drawn from, and the check the rest (Skip
// keep), held samples. ok is false when the source is too small or cannot
// be split.
func Split(spec string, inputs []Input, opts Options) (keep, held int, shuffle, ok bool) {
	opts.Samples, opts.Skip = 0, 0
	n, err := CountSamples(spec, inputs, opts)
	if err != nil || n < MinSplit {
		return 0, 0, false, false
	}
	keep = n - HeldOut(n)
	for _, shuffle := range []bool{true, false} {
		opts.Shuffle, opts.Skip = shuffle, keep
		if m, err := CountSamples(spec, inputs, opts); err == nil && m == n-keep {
			return keep, n - keep, shuffle, true
		}
	}
	return 0, 0, false, false
}
