package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task/tasks"
	"github.com/optc-dev/optc/weightonly"
)

// BuildOptions are the inputs of `optc build`.
type BuildOptions struct {
	IO          *IO
	Config      config.Config // the effective configuration: defaults, file, flags
	PrintConfig bool
	JSON        bool
	Quiet       bool // no stage lines on stderr
	// Context cancels the build (tests); Ctrl-C and SIGTERM end the process
	// through ExitOnSignal instead.
	Context context.Context
}

func newCmdBuild(io *IO, g *globals, runF func(*BuildOptions) error) *cobra.Command {
	opts := &BuildOptions{IO: io}
	var configPath string
	var img imageFlags
	flagged := config.Default()
	c := &cobra.Command{
		Use:   "build MODEL [-o DIR] [--int8 --calib-data P] [--target " + strings.Join(config.TargetChoices(), "|") + "] [--config optc.yaml]",
		Short: "Optimize, quantize and export a model into a folder of checked deployable artifacts",
		Long: `Build runs everything: load and verify MODEL, the optimization passes,
(with --int8) calibration and INT8 quantization, export for each target,
then checks every artifact against MODEL in ONNX Runtime (accuracy or
agreement on the eval data, latency percentiles and throughput) and writes
manifest.json and report.json. The folder appears only when everything
succeeded.

Targets (--target, repeatable; all: every one):
` + targetHelp() + `
Every flag has a key in the YAML --config file (docs/config.md); flags
override the file; --print-config prints the effective configuration.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("build: expects at most one model, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			eff := config.Default()
			if configPath != "" {
				var err error
				if eff, err = config.Load(configPath); err != nil {
					return err
				}
			}
			if err := overrideWithFlags(cmd.Flags(), &eff); err != nil {
				return usageError{err}
			}
			if err := overrideImage(cmd.Flags(), &img, &eff.Image); err != nil {
				return err
			}
			if len(args) == 1 {
				eff.Model = args[0]
			}
			if g.ortLib != "" {
				eff.Runtime.ORTLib = g.ortLib
			}
			if !opts.PrintConfig {
				switch {
				case eff.Model == "":
					return usageError{fmt.Errorf("build: give MODEL (or model: in a --config file)")}
				case eff.Output == "":
					return usageError{fmt.Errorf("build: -o DIR is required (or output: in a --config file)")}
				}
			}
			if err := checkBuildConfig(cmd.Flags(), configPath, eff); err != nil {
				return err
			}

			opts.Config = eff
			return runOrHook(runF, buildRun, opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&configPath, "config", "", "YAML configuration file (see docs/config.md)")
	fs.BoolVar(&opts.PrintConfig, "print-config", false, "print the effective configuration as YAML and exit")
	fs.BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	fs.BoolVarP(&opts.Quiet, "quiet", "q", false, "print no stage lines on stderr (errors still are)")
	bindBuildFlags(fs, &flagged)
	img.register(fs)
	return c
}

// buildFlagKeys are the config keys build's flags set: docs/config.md's
// reference table, which TestBuildFlagKeys holds to the flags.
var buildFlagKeys = map[string]string{
	"output": "output", "force": "force", "target": "targets", "opt-level": "opt_level", "budget": "budget", "replay": "replay",
	"shape": "shapes", "value": "values", "batch-axis": "batch_axes", "range": "ranges", "int8": "int8",
	"image-resize": "image.resize", "image-size": "image.size", "image-layout": "image.layout",
	"image-color": "image.color", "image-scale": "image.scale", "image-mean": "image.mean", "image-std": "image.std",
	"calib-data": "calibration.data", "calib-samples": "calibration.samples", "calib-batch": "calibration.batch",
	"technique": "quantize.techniques", "smoothquant-alpha": "quantize.smoothquant_alpha", "seed": "calibration.seed", "method": "calibration.method", "percentile": "calibration.percentile",
	"moving-average": "calibration.moving_average", "calib-cache": "calibration.cache",
	"prune": "prune.methods", "prune-reconstruct": "prune.reconstruct",
	"reduce-range": "quantize.reduce_range", "format": "quantize.format", "per-channel": "quantize.per_channel",
	"exclude": "quantize.exclude", "keep-first-last": "quantize.keep_first_last",
	"max-accuracy-drop": "quantize.max_accuracy_drop", "min-cosine": "quantize.min_cosine",
	"max-rel-error": "quantize.max_rel_error", "no-guard": "quantize.no_guard",
	"allow-accuracy-loss": "quantize.allow_accuracy_loss", "placement": "quantize.placement",
	"placement-budget": "quantize.placement_budget", "weights": "quantize.weights", "block-size": "quantize.block_size",
	"weight-rounding": "quantize.weight_rounding", "dynamic": "quantize.dynamic",
	"eval-data": "eval.data", "eval-labels": "eval.labels", "eval-samples": "eval.samples", "eval-batch": "eval.batch",
	"eval-task": "eval.task", "eval-dict": "eval.dict", "eval-output": "eval.output", "eval-param": "eval.params", "eval-logits": "eval.logits", "max-perplexity-increase": "quantize.max_perplexity_increase",
	"level": "runtime.level", "threads": "runtime.threads", "ort-lib": "runtime.ort_lib", "nchwc": "runtime.nchwc",
	"latency-batches": "latency.batches", "latency-seq-lengths": "latency.seq_lengths", "latency-duration": "latency.duration", "p99-budget-ms": "latency.p99_budget_ms",
}

// The targets' own flags and keys (target.Flagged) join build's.
func init() {
	for k, v := range targetFlags(pflag.NewFlagSet("keys", pflag.ContinueOnError), &config.Config{}) {
		buildFlagKeys[k] = v
	}
}

// targetFlags registers every target's own flags on fs, bound to c.
func targetFlags(fs *pflag.FlagSet, c *config.Config) map[string]string {
	keys := map[string]string{}
	for _, t := range target.All() {
		if f, ok := t.(target.Flagged); ok {
			maps.Copy(keys, f.Flags(fs, c))
		}
	}
	return keys
}

// evalFlags are the flags of the eval data's ground truth and task, the
// same in build and quantize.
func evalFlags(fs *pflag.FlagSet, e *config.Eval) {
	fs.StringVar(&e.Labels, "eval-labels", e.Labels, "ground truth of --eval-data, one entry a sample: class ids (.npy) by default; with --eval-task, its own format")
	fs.StringVar(&e.Task, "eval-task", e.Task, "what the eval data measure: "+choice.Or(tasks.Names())+" ("+tasks.Help()+")")
	fs.StringVar(&e.Dict, "eval-dict", e.Dict, "--eval-task "+choice.Or(tasks.WithDict())+": the model's character dictionary, one character a line")
	fs.StringToStringVar(&e.Params, "eval-param", e.Params, "--eval-task "+choice.Or(tasks.WithParams())+": a parameter of its decoding, name=value (repeatable; text-detection: "+strings.Join(tasks.Params("text-detection"), ", ")+", with PaddleOCR's defaults)")
	fs.StringVar(&e.Output, "eval-output", e.Output, "--eval-task "+choice.Or(tasks.Plugins())+": the output to score (default: the only one of the task's shape)")
}

// checkBuildConfig validates the effective configuration. A problem with a
// value given by a flag is a usage error (exit 2) naming the flag; one
// that only the config file explains is an error of that file (exit 1).
func checkBuildConfig(set *pflag.FlagSet, configPath string, c config.Config) error {
	var ps config.Problems
	if err := c.Validate(); err == nil {
		return nil
	} else if !errors.As(err, &ps) {
		return err
	}
	byFlag := false
	for i, p := range ps {
		set.Visit(func(f *pflag.Flag) {
			key, ok := buildFlagKeys[f.Name]
			if !ok || !mentionsKey(p, key) {
				return
			}
			byFlag = true
			if strings.HasPrefix(p, key) {
				ps[i] = "--" + f.Name + strings.TrimPrefix(p, key)
			}
		})
	}
	if byFlag || configPath == "" {
		return usageError{fmt.Errorf("build: %w", ps)}
	}
	return fmt.Errorf("config %s: %w", configPath, ps)
}

// mentionsKey reports whether msg names the config key (or a key under
// it, such as ranges.x) as a whole word.
func mentionsKey(msg, key string) bool {
	word := func(b byte) bool { return b == '_' || b == '.' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	for i := 0; ; {
		j := strings.Index(msg[i:], key)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(key)
		if (j == 0 || !word(msg[j-1])) && (end == len(msg) || msg[end] == '.' || !word(msg[end])) {
			return true
		}
		i = j + 1
	}
}

// overrideImage sets the image keys whose --image-* flag was given.
func overrideImage(set *pflag.FlagSet, f *imageFlags, c *config.Image) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	set.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "image-resize":
			c.Resize = o.Resize
		case "image-size":
			c.Size = []int{o.Height, o.Width}
		case "image-layout":
			c.Layout = o.Layout
		case "image-color":
			c.Color = o.Color
		case "image-scale":
			c.Scale = o.Scale
		case "image-mean":
			c.Mean = o.Mean
		case "image-std":
			c.Std = o.Std
		}
	})
	return nil
}

// bindBuildFlags defines the flags that have a config key, writing into
// c. The same definitions serve twice: cobra parses into a scratch config,
// and the flags the user set are replayed onto the effective one.
func bindBuildFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVarP(&c.Output, "output", "o", c.Output, "output folder (must not exist unless --force)")
	fs.BoolVar(&c.Force, "force", c.Force, "replace an existing output folder")
	fs.StringSliceVar(&c.Targets, "target", c.Targets, "targets: "+choice.Or(config.TargetChoices())+" (repeatable, comma-separated)")
	fs.IntVarP(&c.OptLevel, "opt-level", "O", c.OptLevel, "optimization passes level: "+choice.Or(config.OptLevels))
	fs.DurationVar(&c.Budget.Duration, "budget", c.Budget.Duration, "time budget of the build, split across placement, timing and the Triton sweep (0: none)")
	fs.StringVar(&c.Replay, "replay", c.Replay, "apply an earlier build's decisions.json (its folder or the file) instead of timing: the INT8 placement, nchwc and the Triton profiles, so that the artifacts are the same")
	fs.Var(&shapesFlag{&c.Shapes}, "shape", "fix an input's dynamic dims for random data and timing: name:d0,d1,... (? keeps a dim dynamic; a dynamic batch is never pinned) (repeatable)")
	fs.Var(&mapFlag[float64]{m: &c.Values, parse: data.ParseValueFlag, kind: "name=V"}, "value", "feed an input a constant in random data: name=V (repeatable)")
	fs.Var(&mapFlag[int]{m: &c.BatchAxes, parse: data.ParseBatchAxisFlag, kind: "name:K"}, "batch-axis", "where an input's batch is: name:K, or name:none (default: inferred) (repeatable)")
	fs.Var(&mapFlag[[]float64]{m: &c.Ranges, parse: parseRange, kind: "name:LO,HI"}, "range", "value range of an input's random data: name:LO,HI (token ids: ids:0,30522) (repeatable)")
	fs.BoolVar(&c.INT8, "int8", c.INT8, "calibrate and quantize to INT8")

	fs.StringVar(&c.Calibration.Data, "calib-data", c.Calibration.Data, "calibration data: .npy, .npz, .pb folder(s), an image folder")
	fs.IntVar(&c.Calibration.Samples, "calib-samples", c.Calibration.Samples, "calibrate on N samples drawn at random (seeded) from --calib-data (0: all)")
	fs.IntVar(&c.Calibration.Batch, "calib-batch", c.Calibration.Batch, "calibration batch size")
	fs.Int64Var(&c.Calibration.Seed, "seed", c.Calibration.Seed, "seed for sample draws and random data")
	fs.StringVar(&c.Calibration.Method, "method", c.Calibration.Method, "range method: "+calibrate.MethodNames())
	fs.Float64Var(&c.Calibration.Percentile, "percentile", c.Calibration.Percentile, "percentile for --method percentile")
	fs.StringSliceVar(&c.Quantize.Techniques, "technique", c.Quantize.Techniques, "INT8 post-training techniques, comma-separated: "+choice.Or(quantize.Techniques)+" (see optc quantize --help)")
	fs.Float64Var(&c.Quantize.SmoothAlpha, "smoothquant-alpha", c.Quantize.SmoothAlpha, "--technique smoothquant: migration strength in [0, 1] (0: 0.5)")
	fs.Float64Var(&c.Calibration.MovingAverage, "moving-average", c.Calibration.MovingAverage, "minmax: blend per-batch ranges with this weight")
	fs.StringVar(&c.Calibration.Cache, "calib-cache", c.Calibration.Cache, "an existing calibration file to reuse (skips collection when it matches)")

	fs.StringArrayVar(&c.Prune.Methods, "prune", c.Prune.Methods, "prune after the passes: magnitude:S, 2:4, channels:R or channels:auto (repeatable); data-driven on --calib-data")
	fs.BoolVar(&c.Prune.Reconstruct, "prune-reconstruct", c.Prune.Reconstruct, "data-driven pruning on --calib-data (--prune-reconstruct=false: by magnitude alone)")

	fs.StringVar(&c.Quantize.ReduceRange, "reduce-range", c.Quantize.ReduceRange, "7-bit weights: "+choice.Or(quantize.ReduceRangeModes)+" (auto: on for x86 without VNNI)")
	fs.StringVar(&c.Quantize.Format, "format", c.Quantize.Format, "ORT INT8 format: "+choice.Or(quantize.Formats)+" (QLinearConv/QLinearMatMul)")
	fs.BoolVar(&c.Quantize.PerChannel, "per-channel", c.Quantize.PerChannel, "per-output-channel weight scales (--per-channel=false: one per tensor)")
	fs.StringArrayVar(&c.Quantize.Exclude, "exclude", c.Quantize.Exclude, "keep nodes float: a regexp on node name or op type (repeatable)")
	fs.BoolVar(&c.Quantize.KeepFirstLast, "keep-first-last", c.Quantize.KeepFirstLast, "keep the first and last weighted layers float")
	fs.Float64Var(&c.Quantize.MaxAccuracyDrop, "max-accuracy-drop", c.Quantize.MaxAccuracyDrop, "accuracy guard in points (needs --eval-labels; 0: the default 1)")
	fs.Float64Var(&c.Quantize.MinCosine, "min-cosine", c.Quantize.MinCosine, fmt.Sprintf("accuracy guard: lowest cosine to float of the worst sample, every output (0: %g)", ptq.GuardMinCosine))
	fs.Float64Var(&c.Quantize.MaxRelError, "max-rel-error", c.Quantize.MaxRelError, fmt.Sprintf("accuracy guard: largest relative error to float, every output (0: %g)", ptq.GuardMaxRelError))
	fs.BoolVar(&c.Quantize.NoGuard, "no-guard", c.Quantize.NoGuard, "turn the accuracy guard off: its figures are reported, no INT8 artifact is refused for them")
	fs.Float64Var(&c.Quantize.MaxPerplexityIncrease, "max-perplexity-increase", c.Quantize.MaxPerplexityIncrease, fmt.Sprintf("--eval-task lm: the most the weight-only model's perplexity may rise over float's, in percent (0: %g)", config.DefaultMaxPerplexityIncrease))
	fs.BoolVar(&c.Quantize.AllowAccuracyLoss, "allow-accuracy-loss", c.Quantize.AllowAccuracyLoss, "keep the INT8 artifacts when they miss the accuracy guard (the ORT artifact is then FP32)")
	fs.StringVar(&c.Quantize.Placement, "placement", c.Quantize.Placement, "where INT8 goes for ort: auto (measured), all-int8, or a placement.json to replay")
	fs.DurationVar(&c.Quantize.PlacementBudget.Duration, "placement-budget", c.Quantize.PlacementBudget.Duration, "time bound of --placement auto's measurements")
	fs.StringVar(&c.Quantize.Weights, "weights", c.Quantize.Weights, "ORT/Triton artifact with weight-only "+choice.Or(weightonly.Types)+" MatMul/Gemm weights (MatMulNBits) instead of INT8")
	fs.BoolVar(&c.Quantize.Dynamic, "dynamic", c.Quantize.Dynamic, "ORT/Triton artifact with dynamic INT8 instead of static: MatMul/Gemm weights int8, activations quantized at run time (no calibration needed)")
	fs.IntVar(&c.Quantize.BlockSize, "block-size", c.Quantize.BlockSize, "--weights: weights per block along K: "+choice.Or(weightonly.BlockSizeNames()))
	fs.StringVar(&c.Quantize.WeightRounding, "weight-rounding", c.Quantize.WeightRounding, "--weights: "+choice.Or(weightonly.Roundings)+" (gptq needs --calib-data)")

	fs.StringVar(&c.Eval.Data, "eval-data", c.Eval.Data, "evaluation data the artifacts are checked on (default: the calibration data)")
	evalFlags(fs, &c.Eval)
	fs.StringVar(&c.Eval.Logits, "eval-logits", c.Eval.Logits, "--eval-task lm: the logits output (default: the only float output of rank 3)")
	fs.IntVar(&c.Eval.Samples, "eval-samples", c.Eval.Samples, "check on at most N evaluation samples (0: all)")
	fs.IntVar(&c.Eval.Batch, "eval-batch", c.Eval.Batch, "evaluation batch size")

	fs.StringVar(&c.Runtime.Level, "level", c.Runtime.Level, "ORT graph optimization level the artifacts run at: "+choice.Or(ort.Levels))
	fs.IntVar(&c.Runtime.Threads, "threads", c.Runtime.Threads, "ORT intra-op threads (0: one per core)")
	fs.StringVar(&c.Runtime.NCHWc, "nchwc", c.Runtime.NCHWc, "shape the ORT artifact's FP32 model for ORT's blocked CPU layout and deploy it when measured faster: "+choice.Or(build.NCHWcChoices)+" (auto: this CPU's block)")
	fs.IntSliceVar(&c.Latency.Batches, "latency-batches", c.Latency.Batches, "the deployment's batch sizes: artifacts are timed at them, and INT8 ships only where it is faster at each")
	fs.IntSliceVar(&c.Latency.SeqLengths, "latency-seq-lengths", c.Latency.SeqLengths, "--eval-task lm: also time every model at batch 1 at these sequence lengths")
	fs.DurationVar(&c.Latency.Duration.Duration, "latency-duration", c.Latency.Duration.Duration, "timing per batch size")
	fs.Float64Var(&c.Latency.P99BudgetMs, "p99-budget-ms", c.Latency.P99BudgetMs, "p99 bound for the high-throughput profile (0: none)")
	targetFlags(fs, c)
}

// overrideWithFlags replays the flags the user set onto c.
func overrideWithFlags(set *pflag.FlagSet, c *config.Config) error {
	onto := pflag.NewFlagSet("build", pflag.ContinueOnError)
	bindBuildFlags(onto, c)
	var err error
	set.Visit(func(f *pflag.Flag) {
		dst := onto.Lookup(f.Name)
		if dst == nil || err != nil {
			return // not a config flag (--config, --json)
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			err = dst.Value.(pflag.SliceValue).Replace(sv.GetSlice())
			return
		}
		err = dst.Value.Set(f.Value.String())
	})
	return err
}

// mapFlag is a repeatable name:value flag into a map of the config.
type mapFlag[V any] struct {
	m     *map[string]V
	parse func(string) (string, V, error)
	kind  string
	set   []string
}

func (f *mapFlag[V]) String() string { return strings.Join(f.set, " ") }

func (f *mapFlag[V]) Set(s string) error {
	name, v, err := f.parse(s)
	if err != nil {
		return err
	}
	if *f.m == nil {
		*f.m = map[string]V{}
	}
	(*f.m)[name] = v
	f.set = append(f.set, s)
	return nil
}

func (f *mapFlag[V]) Type() string { return f.kind }

func (f *mapFlag[V]) Append(s string) error { return f.Set(s) }

func (f *mapFlag[V]) Replace(vs []string) error {
	*f.m, f.set = nil, nil
	for _, v := range vs {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}

func (f *mapFlag[V]) GetSlice() []string { return f.set }

// parseRange is --range name:LO,HI for the config's ranges.
func parseRange(s string) (string, []float64, error) {
	name, lo, hi, err := data.ParseRangeFlag(s)
	if err == nil && name == "" {
		err = fmt.Errorf("--range %q: name the input (name:LO,HI)", s)
	}
	return name, []float64{lo, hi}, err
}

// shapesFlag is --shape name:dims, repeatable, into a map.
type shapesFlag struct{ m *map[string][]int64 }

func (s *shapesFlag) String() string {
	if s.m == nil {
		return ""
	}
	return strings.Join(s.GetSlice(), " ")
}

func (s *shapesFlag) Set(v string) error {
	name, dims, err := data.ParseShapeFlag(v)
	if err != nil {
		return err
	}
	if *s.m == nil {
		*s.m = map[string][]int64{}
	}
	(*s.m)[name] = dims
	return nil
}

func (s *shapesFlag) Type() string { return "name:dims" }

func (s *shapesFlag) Append(v string) error { return s.Set(v) }

func (s *shapesFlag) Replace(vs []string) error {
	*s.m = nil
	for _, v := range vs {
		if err := s.Set(v); err != nil {
			return err
		}
	}
	return nil
}

func (s *shapesFlag) GetSlice() []string {
	var out []string
	for name, dims := range *s.m {
		parts := make([]string, len(dims))
		for i, d := range dims {
			parts[i] = fmt.Sprint(d)
		}
		out = append(out, name+":"+strings.Join(parts, ","))
	}
	slices.Sort(out)
	return out
}

func buildRun(opts *BuildOptions) error {
	if opts.PrintConfig {
		b, err := config.Marshal(opts.Config)
		if err != nil {
			return err
		}
		_, err = opts.IO.Out.Write(b)
		return err
	}
	if err := opts.Config.CheckPaths(); err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		// Ctrl-C and SIGTERM end the process (ExitOnSignal), which removes
		// the working folder.
		ctx = context.Background()
	}
	bo := build.Options{Config: opts.Config, Version: ReadBuildInfo().Version}
	if !opts.Quiet {
		bo.Progress = opts.IO.Progress
	}
	res, err := build.Run(ctx, bo)
	if errors.Is(err, optimize.ErrCheck) && !errors.Is(err, ort.ErrNotExpressible) {
		err = fmt.Errorf("%w; -O 1 (no fusions) or -O 0 (no passes) builds without the pass that changed the outputs", err)
	}
	if err != nil {
		return fmt.Errorf("build %s: %w", opts.Config.Model, err)
	}
	if opts.JSON {
		if err := writeJSON(opts.IO.Out, res); err != nil {
			return err
		}
		return refusals(res)
	}
	if err := build.WriteTable(opts.IO.Out, res); err != nil {
		return err
	}
	if _, err = fmt.Fprintf(opts.IO.Out, "report: %s (and report.html, report.json)\n", filepath.Join(res.Output, "report.md")); err != nil {
		return err
	}
	return refusals(res)
}

// refusals is the build's error when the accuracy guard refused an INT8
// model (exit 3), nil otherwise: per refusal what missed and how the
// accuracy control ended, as quantize's refusal says it.
func refusals(res *build.Result) error {
	if len(res.Refused) == 0 && len(res.NotRecommended) == 0 {
		return nil
	}
	var what []string
	for _, r := range res.Refused {
		what = append(what, fmt.Sprintf("%s: %s not written (%s; %s)", r.Scheme, r.Artifact, schema.FailedChecks(r.Guard.Checks), ptq.FallbackWords(r.Guard)))
	}
	if len(res.NotRecommended) > 0 {
		what = append(what, "not recommended: "+strings.Join(res.NotRecommended, ", "))
	}
	return refusedError{what}
}

// targetHelp is one line per registered target: its name and what it
// deploys to.
func targetHelp() string {
	var b strings.Builder
	for _, t := range target.All() {
		fmt.Fprintf(&b, "  %-9s %s\n", t.Name(), t.Doc())
	}
	return b.String()
}
