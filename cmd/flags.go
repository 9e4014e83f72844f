package cmd

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ort"
)

// globals are the flags every command accepts.
type globals struct {
	ortLib string
}

// sessionFlags choose how ONNX Runtime runs a model.
type sessionFlags struct {
	level        string
	threads      int
	interThreads int
	provider     string
}

func (f *sessionFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.level, "level", "all", "ORT graph optimization level: "+choice.Or(ort.Levels))
	fs.IntVar(&f.threads, "threads", 0, "ORT intra-op threads (0: ORT's default, one per core)")
	fs.IntVar(&f.interThreads, "inter-threads", 0, "ORT inter-op threads (0: ORT's default)")
	fs.StringVar(&f.provider, "provider", "cpu", "execution provider: "+choice.Or(ort.Providers))
}

func (f *sessionFlags) options() (ort.Options, error) {
	level, err := ort.ParseLevel(f.level)
	if err != nil {
		return ort.Options{}, usageError{err}
	}
	if f.threads < 0 || f.interThreads < 0 {
		return ort.Options{}, usageError{fmt.Errorf("thread counts must not be negative")}
	}
	if !slices.Contains(ort.Providers, f.provider) {
		return ort.Options{}, usageError{fmt.Errorf("unknown --provider %q (want %s)", f.provider, choice.Or(ort.Providers))}
	}
	return ort.Options{Level: level, IntraOpThreads: f.threads, InterOpThreads: f.interThreads, Provider: f.provider}, nil
}

// dataFlags choose the input data.
type dataFlags struct {
	spec    string
	batch   int
	shapes  []string
	seed    int64
	ranges  []string
	values  []string
	axes    []string
	samples int
	image   imageFlags
	// batchFlag is the flag that sets batch: a batch size the user gave
	// is strict, a default only a preference (a static batch wins).
	batchFlag *pflag.Flag
	// judges says the data calibrates or judges accuracy: random floats
	// are then standard normal (data.Options.Normal) unless --range gives
	// a range for every input; for timing and the passes' exactness check
	// they stay uniform in [0, 1).
	judges bool
}

// batchVar adds the batch size flag.
func (f *dataFlags) batchVar(fs *pflag.FlagSet, name string, def int, usage string) {
	fs.IntVar(&f.batch, name, def, usage)
	f.batchFlag = fs.Lookup(name)
}

// register adds the data flags; withBatch false leaves --batch to the
// command (bench takes a list of sizes).
func (f *dataFlags) register(fs *pflag.FlagSet, withBatch bool) {
	fs.StringVar(&f.spec, "data", "", "input data: .npy, .npz, .pb, a folder of input_N.pb (or of such folders), a folder of PNG/JPEG images, or random")
	if withBatch {
		f.batchVar(fs, "batch", 0, "samples per run for .npy/.npz/random data (default: the model's static batch, else the --shape batch, else 1)")
	}
	f.registerSpec(fs)
	fs.Int64Var(&f.seed, "seed", 1, "seed for --data random")
	fs.IntVar(&f.samples, "samples", 0, "use at most this many samples (random: how many to make; default one batch, 64 for compare)")
	f.image.register(fs)
}

// registerSpec adds the flags of the input specification.
func (f *dataFlags) registerSpec(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.shapes, "shape", nil, "fix an input's dynamic dims: name:d0,d1,... (? keeps a dim dynamic; a dynamic batch is never pinned) (repeatable)")
	fs.StringArrayVar(&f.ranges, "range", nil, "value range of random data, drawn uniformly: LO,HI for every input, or name:LO,HI for one (token ids: ids:0,30522) (repeatable; default: floats standard normal, integers 0)")
	fs.StringArrayVar(&f.values, "value", nil, "feed an input a constant in random data: name=V (a sample rate: sr=16000) (repeatable)")
	fs.StringArrayVar(&f.axes, "batch-axis", nil, "where an input's batch is: name:K, or name:none for an input fed the same in every run (default: inferred) (repeatable)")
}

// inherit takes the input specification and seed of other (a second data
// source of the same command).
func (f *dataFlags) inherit(other *dataFlags) {
	f.shapes, f.seed, f.ranges, f.values, f.axes = other.shapes, other.seed, other.ranges, other.values, other.axes
}

// inputSpec parses the input specification flags.
func (f *dataFlags) inputSpec() (data.Spec, float64, float64, error) {
	var s data.Spec
	lo, hi := 0.0, 1.0
	if err := parseNamed(&s.Shapes, f.shapes, data.ParseShapeFlag); err != nil {
		return s, 0, 0, err
	}
	for _, v := range f.ranges {
		name, a, b, err := data.ParseRangeFlag(v)
		if err != nil {
			return s, 0, 0, usageError{err}
		}
		if name == "" {
			lo, hi = a, b
			continue
		}
		if s.Ranges == nil {
			s.Ranges = map[string][2]float64{}
		}
		s.Ranges[name] = [2]float64{a, b}
	}
	if err := parseNamed(&s.Values, f.values, data.ParseValueFlag); err != nil {
		return s, 0, 0, err
	}
	if err := parseNamed(&s.BatchAxes, f.axes, data.ParseBatchAxisFlag); err != nil {
		return s, 0, 0, err
	}
	return s, lo, hi, nil
}

// parseNamed adds each flag value that names an input, as parse reads it,
// to *dst, making the map only when there is something to add (a flag not
// given leaves its field nil). --shape, --value and --batch-axis all read
// this way.
func parseNamed[V any](dst *map[string]V, vals []string, parse func(string) (string, V, error)) error {
	for _, v := range vals {
		name, x, err := parse(v)
		if err != nil {
			return usageError{err}
		}
		if *dst == nil {
			*dst = map[string]V{}
		}
		(*dst)[name] = x
	}
	return nil
}

func (f *dataFlags) options() (data.Options, error) {
	if f.spec == "" {
		return data.Options{}, usageError{fmt.Errorf("--data is required (a data file or folder, or random for synthetic inputs)")}
	}
	if f.batch < 0 {
		name := "batch"
		if f.batchFlag != nil {
			name = f.batchFlag.Name
		}
		return data.Options{}, usageError{fmt.Errorf("--%s %d must not be negative", name, f.batch)}
	}
	if f.samples < 0 {
		name := "samples"
		if f.batchFlag != nil && f.batchFlag.Name != "batch" {
			name = strings.TrimSuffix(f.batchFlag.Name, "batch") + "samples" // calib-samples, eval-samples
		}
		return data.Options{}, usageError{fmt.Errorf("--%s %d must not be negative", name, f.samples)}
	}
	img, err := f.image.options()
	if err != nil {
		return data.Options{}, err
	}
	spec, lo, hi, err := f.inputSpec()
	if err != nil {
		return data.Options{}, err
	}
	samples := f.samples
	if f.judges && f.spec == "random" && samples == 0 {
		samples = data.RandomSamples
	}
	return data.Options{Batch: f.batch, StrictBatch: f.batchFlag != nil && f.batchFlag.Changed, Seed: f.seed, Samples: samples, Image: img, Spec: spec, Low: lo, High: hi,
		Normal: f.judges && !f.globalRange()}, nil
}

// globalRange reports whether --range gave every input's range (LO,HI
// without a name): random floats are then uniform in it, else standard
// normal.
func (f *dataFlags) globalRange() bool {
	for _, v := range f.ranges {
		if name, _, _, err := data.ParseRangeFlag(v); err == nil && name == "" {
			return true
		}
	}
	return false
}

// imageFlags say how the files of an image folder become an input tensor
// (--image-*); other data ignores them.
type imageFlags struct {
	resize                                int
	size, layout, color, scale, mean, std string
}

func (f *imageFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.resize, "image-resize", 0, "image folders: resize the shorter side to N pixels, then center-crop (0: resize straight to the crop size)")
	fs.StringVar(&f.size, "image-size", "", "image folders: crop size HxW, or N for NxN (default: the input's static dims)")
	fs.StringVar(&f.layout, "image-layout", data.ImageLayouts[0], "image folders: "+choice.Or(data.ImageLayouts))
	fs.StringVar(&f.color, "image-color", data.ImageColors[0], "image folders: "+choice.Or(data.ImageColors))
	fs.StringVar(&f.scale, "image-scale", "1/255", "image folders: pixel values (0..255) are multiplied by this first; a number or a fraction")
	fs.StringVar(&f.mean, "image-mean", "", "image folders: per-channel mean a,b,c subtracted after scaling (default 0)")
	fs.StringVar(&f.std, "image-std", "", "image folders: per-channel std a,b,c divided by after the mean (default 1)")
}

func (f *imageFlags) options() (data.ImageOptions, error) {
	o := data.ImageOptions{Resize: f.resize, Layout: f.layout, Color: f.color}
	var err error
	if f.size != "" {
		h, w, square := strings.Cut(f.size, "x")
		if !square {
			w = h
		}
		var err1, err2 error
		o.Height, err1 = strconv.Atoi(strings.TrimSpace(h))
		o.Width, err2 = strconv.Atoi(strings.TrimSpace(w))
		if err1 != nil || err2 != nil || o.Height < 1 || o.Width < 1 {
			return o, usageError{fmt.Errorf("--image-size %q: want HxW (e.g. 224x224) or N", f.size)}
		}
	}
	if f.scale != "" { // unset where a command does not register the flags
		if o.Scale, err = parseFraction(f.scale); err != nil || o.Scale == 0 {
			return o, usageError{fmt.Errorf("--image-scale %q: want a non-zero number or fraction (e.g. 1/255, 0.0078125)", f.scale)}
		}
	}
	if o.Mean, err = parseFloats("--image-mean", f.mean); err != nil {
		return o, err
	}
	if o.Std, err = parseFloats("--image-std", f.std); err != nil {
		return o, err
	}
	if err := o.Validate(); err != nil {
		return o, usageError{fmt.Errorf("--image-*: %w", err)}
	}
	return o, nil
}

// parseFraction parses a number or a fraction a/b.
func parseFraction(s string) (float64, error) {
	num, den, isFrac := strings.Cut(s, "/")
	a, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !isFrac {
		return a, err
	}
	b, err := strconv.ParseFloat(strings.TrimSpace(den), 64)
	if err != nil || b == 0 {
		return 0, fmt.Errorf("bad denominator in %q", s)
	}
	return a / b, nil
}

// parseFloats parses a comma-separated list of numbers; "" is none.
func parseFloats(flag, s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s %q: %q is not a number (want a,b,c)", flag, s, strings.TrimSpace(f))}
		}
		out = append(out, v)
	}
	return out, nil
}

// isTerminal reports whether w is an interactive terminal, where progress
// is shown.
func isTerminal(w any) bool {
	if g, ok := w.(gatedWriter); ok {
		w = g.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
