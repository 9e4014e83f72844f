package cmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"optc/data"
	"optc/ort"
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
	fs.StringVar(&f.level, "level", "all", "ORT graph optimization level: disable, basic, extended or all")
	fs.IntVar(&f.threads, "threads", 0, "ORT intra-op threads (0: ORT's default, one per core)")
	fs.IntVar(&f.interThreads, "inter-threads", 0, "ORT inter-op threads (0: ORT's default)")
	fs.StringVar(&f.provider, "provider", "cpu", "execution provider: cpu, cuda or tensorrt")
}

func (f *sessionFlags) options() (ort.Options, error) {
	level, err := ort.ParseLevel(f.level)
	if err != nil {
		return ort.Options{}, usageError{err}
	}
	if f.threads < 0 || f.interThreads < 0 {
		return ort.Options{}, usageError{fmt.Errorf("thread counts must not be negative")}
	}
	switch f.provider {
	case "cpu", "cuda", "tensorrt":
	default:
		return ort.Options{}, usageError{fmt.Errorf("unknown --provider %q (want cpu, cuda or tensorrt)", f.provider)}
	}
	return ort.Options{Level: level, IntraOpThreads: f.threads, InterOpThreads: f.interThreads, Provider: f.provider}, nil
}

// dataFlags choose the input data.
type dataFlags struct {
	spec    string
	batch   int
	shapes  []string
	seed    int64
	rng     string
	samples int
}

// register adds the data flags; withBatch false leaves --batch to the
// command (bench takes a list of sizes).
func (f *dataFlags) register(fs *pflag.FlagSet, withBatch bool) {
	fs.StringVar(&f.spec, "data", "", "input data: .npy, .npz, .pb, a folder of input_N.pb (or of such folders), or random")
	if withBatch {
		fs.IntVar(&f.batch, "batch", 1, "samples per run for .npy/.npz/random data (axis 0 is the sample axis)")
	}
	fs.StringArrayVar(&f.shapes, "shape", nil, "fix an input's dynamic dims: name:d0,d1,... (repeatable)")
	fs.Int64Var(&f.seed, "seed", 1, "seed for --data random")
	fs.StringVar(&f.rng, "range", "0,1", "value range LO,HI for --data random")
	fs.IntVar(&f.samples, "samples", 0, "use at most this many samples (random: how many to make; default one batch)")
}

func (f *dataFlags) options() (data.Options, error) {
	if f.spec == "" {
		return data.Options{}, usageError{fmt.Errorf("--data is required (a data file or folder, or random for synthetic inputs)")}
	}
	if f.batch < 1 || f.samples < 0 {
		return data.Options{}, usageError{fmt.Errorf("--batch must be at least 1 and --samples not negative")}
	}
	opts := data.Options{Batch: f.batch, Seed: f.seed, Samples: f.samples, Shapes: map[string][]int64{}}
	for _, s := range f.shapes {
		name, dims, err := data.ParseShapeFlag(s)
		if err != nil {
			return data.Options{}, usageError{err}
		}
		opts.Shapes[name] = dims
	}
	lo, hi, ok := strings.Cut(f.rng, ",")
	var err1, err2 error
	opts.Low, err1 = strconv.ParseFloat(strings.TrimSpace(lo), 64)
	opts.High, err2 = strconv.ParseFloat(strings.TrimSpace(hi), 64)
	if !ok || err1 != nil || err2 != nil || opts.High <= opts.Low {
		return data.Options{}, usageError{fmt.Errorf("--range must be LO,HI with LO < HI, got %q", f.rng)}
	}
	return opts, nil
}

// isTerminal reports whether w is an interactive terminal, where progress
// is shown.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
