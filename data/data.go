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

	"optc/graph"
)

// Input describes one model input a Source feeds (graph inputs that are not
// initializers).
type Input struct {
	Name  string
	DType graph.DataType
	Shape graph.Shape // nil: rank unknown
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
	return out
}

// Options controls how a Source reads or makes data.
type Options struct {
	// Batch is the number of samples per batch for sample-axis formats
	// (.npy, .npz, image folders, random); 0 means the model's static
	// batch size, else 1.
	// .pb data sets are fed as they are and ignore it.
	Batch int
	// Shapes fixes dynamic dims (from --shape name:d0,d1,...); each must
	// agree with the input's static dims and with the data.
	Shapes map[string][]int64
	// Seed makes random data reproducible.
	Seed int64
	// Low and High bound random data: [Low, High), [0,1) when both are zero.
	Low, High float64
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
	switch strings.ToLower(filepath.Ext(spec)) {
	case ".npy":
		return openNpy(spec, inputs, opts)
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
		return openNpy(spec, inputs, opts)
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
	return openImages(dir, files, inputs, opts)
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
	names := make([]string, 0, len(opts.Shapes))
	for name := range opts.Shapes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !seen[name] {
			return fmt.Errorf("input data %s: --shape %s: the model has no input %q (inputs: %s)", spec, name, name, inputNames(inputs))
		}
	}
	for _, in := range inputs {
		if _, _, err := effectiveShape(in, opts); err != nil {
			return fmt.Errorf("input data %s: %w", spec, err)
		}
	}
	return nil
}

// ParseShapeFlag parses a --shape value, "name:d0,d1,...". The name is
// everything before the last colon, so names such as "input:0" work.
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
		d, perr := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if perr != nil || d < 0 {
			return "", nil, fmt.Errorf("--shape %q: dim %q is not a non-negative integer", s, strings.TrimSpace(f))
		}
		dims = append(dims, d)
	}
	return name, dims, nil
}

// effectiveShape is the input's shape with its --shape override applied:
// the override's dims become static. It reports whether an override was
// given and checks that it agrees with the input's rank and static dims.
func effectiveShape(in Input, opts Options) (graph.Shape, bool, error) {
	dims, ok := opts.Shapes[in.Name]
	if !ok {
		return in.Shape, false, nil
	}
	flag := shapeFlag(in.Name, dims)
	if in.Shape != nil {
		if len(dims) != len(in.Shape) {
			return nil, false, fmt.Errorf("--shape %s does not fit input %q %s: rank %d, want %d", flag, in.Name, in, len(dims), len(in.Shape))
		}
		for i, d := range in.Shape {
			if d.Kind == graph.DimStatic && d.Value != dims[i] {
				return nil, false, fmt.Errorf("--shape %s does not fit input %q %s: dim %d is %d, want %d", flag, in.Name, in, i, dims[i], d.Value)
			}
		}
	}
	s := graph.StaticShape(dims...)
	for i := range s {
		if i < len(in.Shape) {
			s[i].Denotation = in.Shape[i].Denotation
		}
	}
	return s, true, nil
}

// ResolveShape returns the static shape of one batch of random data for in:
// its static dims and --shape overrides, with a dynamic axis 0 taken as the
// batch size (Options.Batch, default 1). Any other dynamic dim is an error
// naming the input and the dim.
func ResolveShape(in Input, opts Options) ([]int64, error) {
	eff, overridden, err := effectiveShape(in, opts)
	if err != nil {
		return nil, err
	}
	if eff == nil {
		return nil, fmt.Errorf("input %q %s: the rank is unknown; give the shape with --shape %s:d0,d1,...", in.Name, in, in.Name)
	}
	if opts.Batch < 0 {
		return nil, fmt.Errorf("input %q: batch size %d is negative", in.Name, opts.Batch)
	}
	out := make([]int64, len(eff))
	for i, d := range eff {
		switch {
		case d.Kind == graph.DimStatic:
			out[i] = d.Value
			if i == 0 && opts.Batch != 0 && int64(opts.Batch) != d.Value {
				return nil, fmt.Errorf("input %q %s has a static batch size of %d%s; batch size %d does not fit", in.Name, in, d.Value, overrideNote(in, eff, overridden), opts.Batch)
			}
		case i == 0:
			out[i] = int64(max(opts.Batch, 1))
		default:
			return nil, fmt.Errorf("input %q %s: dim %d (%s) is dynamic; fix it with --shape %s", in.Name, in, i, d, shapeHint(in, eff))
		}
	}
	return out, nil
}

// shapeHint suggests a --shape value: the known dims, the names of the
// others in angle brackets.
func shapeHint(in Input, s graph.Shape) string {
	parts := make([]string, len(s))
	for i, d := range s {
		switch {
		case d.Kind == graph.DimStatic:
			parts[i] = strconv.FormatInt(d.Value, 10)
		case i == 0:
			parts[i] = "1"
		default:
			parts[i] = "<" + d.String() + ">"
		}
	}
	return in.Name + ":" + strings.Join(parts, ",")
}

func shapeFlag(name string, dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return name + ":" + strings.Join(parts, ",")
}

// overrideNote says, for messages, that the expected shape comes from a
// --shape flag.
func overrideNote(in Input, eff graph.Shape, overridden bool) string {
	if !overridden {
		return ""
	}
	return " (fixed to " + eff.String() + " by --shape " + shapeFlag(in.Name, eff.Dims()) + ")"
}

// expects describes what an input wants: float32[N,3,48,192], plus the
// --shape override when there is one.
func expects(in Input, eff graph.Shape, overridden bool) string {
	return in.String() + overrideNote(in, eff, overridden)
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
		return fmt.Errorf("%s: input %q expects %s, the data is %s: %s", where, in.Name, expects(in, eff, overridden), given, fmt.Sprintf(why, args...))
	}
	if in.DType != graph.Undefined && dt != in.DType {
		return fail("element type %s, want %s", dt, in.DType)
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

// batchSize returns the batch size for sample-axis data: a static axis 0
// (from the model or --shape) fixes it, and Options.Batch must then agree;
// otherwise Options.Batch, default 1. fixedBy describes the input whose
// static axis 0 fixed it, "" when none did.
func batchSize(where string, inputs []Input, opts Options) (batch int, fixedBy string, err error) {
	fixed := 0
	var first Input
	for _, in := range inputs {
		eff, overridden, err := effectiveShape(in, opts)
		if err != nil {
			return 0, "", err
		}
		if len(eff) == 0 || eff[0].Kind != graph.DimStatic {
			continue
		}
		b := eff[0].Value
		desc := fmt.Sprintf("input %q %s", in.Name, expects(in, eff, overridden))
		switch {
		case b <= 0 || b > 1<<31:
			return 0, "", fmt.Errorf("%s: %s has a static batch size of %d; cannot feed it from a sample axis", where, desc, b)
		case fixed != 0 && int64(fixed) != b:
			return 0, "", fmt.Errorf("%s: inputs %q %s and %q %s have different static batch sizes (%d and %d)", where, first.Name, first, in.Name, in, fixed, b)
		case opts.Batch != 0 && int64(opts.Batch) != b:
			return 0, "", fmt.Errorf("%s: %s has a static batch size of %d; batch size %d does not fit", where, desc, b, opts.Batch)
		}
		if fixed == 0 {
			fixed, first, fixedBy = int(b), in, desc
		}
	}
	if fixed != 0 {
		return fixed, fixedBy, nil
	}
	return max(opts.Batch, 1), "", nil
}

// checkSampleCount checks that a static batch size divides the samples.
func checkSampleCount(where string, samples, batch int, fixedBy string) error {
	if fixedBy != "" && samples%batch != 0 {
		return fmt.Errorf("%s: %d samples do not split into batches of %d, the static batch size of %s; limit the samples to a multiple of %d", where, samples, batch, fixedBy, batch)
	}
	return nil
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

// unwrapPathError drops the *PathError wrapper when the message already
// names the file.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
