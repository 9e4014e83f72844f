package cmd

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/optimize"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/prune"
)

// OptimizeOptions are the inputs of `optc optimize`.
type OptimizeOptions struct {
	IO       *IO
	Optimize optimize.Options
	JSON     bool
}

func newCmdOptimize(io *IO, g *globals, runF func(*OptimizeOptions) error) *cobra.Command {
	opts := &OptimizeOptions{IO: io}
	o := &opts.Optimize
	var df dataFlags
	var only, disable string
	var noCheck, external bool
	var pf pruneFlags
	var nchwc string
	c := &cobra.Command{
		Use:   "optimize IN -o OUT",
		Short: "Run the pass pipeline and write the optimized model, checked against the original in ORT",
		Long: `Run optc's graph passes over a model (-O1: exact cleanups and constant
folding; -O2, the default: also the fusions; --passes: exactly the named ones;
see optc passes) and write the result. Before writing, the result and the
original run in ONNX Runtime (level disable) on --check random inputs, or
on --data when given (a model whose inputs must hold valid shapes, indices
or lengths cannot run on random ones); a result whose outputs differ
beyond the tolerance is not written. Ends with a
before/after table and per-pass statistics.`,
		Args: exactArgs(1, "one input model"),
		RunE: func(_ *cobra.Command, args []string) error {
			o.Input, o.ORTLib = args[0], g.ortLib
			if o.Output == "" {
				return usageError{fmt.Errorf("optimize: -o OUT is required")}
			}
			if data.SameFile(o.Input, o.Output) {
				return fmt.Errorf("optimize: refusing to overwrite the input %s; choose another -o", o.Input)
			}
			if only != "" {
				o.Passes = strings.Split(only, ",")
			}
			block, err := parseNCHWcBlock(nchwc)
			if err != nil {
				return usageError{err}
			}
			o.NCHWcBlock = block
			if o.NCHWcBlock != 0 && len(pf.specs) > 0 {
				return usageError{fmt.Errorf("--nchwc-block and --prune do not go together: prune first, then shape the pruned model with a second optc optimize -O0 --nchwc-block")}
			}
			if disable != "" {
				o.Disable = strings.Split(disable, ",")
			}
			if _, err := passes.Select(o.Level, o.Passes, o.Disable); err != nil {
				return usageError{err}
			}
			if o.DumpAfter != "" {
				if _, err := passes.Lookup(o.DumpAfter); err != nil {
					return usageError{err}
				}
				o.DumpPath = passes.DumpPathFor(o.Output, o.DumpAfter)
			}
			o.Check = !noCheck
			df.spec = "random"
			if o.DataOpts, err = df.options(); err != nil {
				return err
			}
			if external {
				o.Save.External = graph.ExternalAlways
			}
			if err := pf.apply(o, &df, g); err != nil {
				return err
			}
			return runOrHook(runF, optimizeRun, opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&o.Output, "output", "o", "", "where to write the optimized model (required)")
	fs.IntVarP(&o.Level, "opt-level", "O", 2, "optimization level: 0 none, 1 exact cleanups and folding, 2 also fusions")
	fs.StringVar(&only, "passes", "", "run exactly these passes, comma-separated (see optc passes)")
	fs.StringVar(&disable, "disable-pass", "", "passes to leave out, comma-separated")
	fs.BoolVar(&o.VerifyEach, "verify-each", false, "verify the graph after every pass")
	fs.StringVar(&o.DumpAfter, "dump-after", "", "write the model after this pass to OUT.after-PASS.onnx")
	fs.BoolVar(&o.FusedConv, "fused-conv", false, "emit com.microsoft FusedConv for Conv+activation (ONNX Runtime only)")
	fs.BoolVar(&o.ORTContrib, "ort-contrib", false, "let the transformer fusions emit ONNX Runtime's own operators (com.microsoft Gelu, FastGelu, SkipLayerNormalization, MultiHeadAttention; LayerNormalization below opset 17): ONNX Runtime only")
	fs.StringVar(&nchwc, "nchwc-block", "", "shape the result for ONNX Runtime's CPU kernels (NCHWc layout) of this channel block: 8, 16, or auto (this CPU's); exact, ONNX Runtime CPU only (docs/optimize.md)")
	fs.Int64Var(&o.FoldSizeLimit, "fold-size-limit", passes.DefaultFoldSizeLimit, "largest tensor in bytes constant folding may create")
	fs.IntVar(&o.CheckSamples, "check", 4, "random inputs to check the result on in ORT")
	fs.BoolVar(&noCheck, "no-check", false, "write the result without checking it in ORT")
	fs.Float64Var(&o.CheckAtol, "check-atol", optimize.DefaultCheckAtol, "absolute tolerance of the check")
	fs.Float64Var(&o.CheckRtol, "check-rtol", optimize.DefaultCheckRtol, "relative tolerance of the check")
	fs.BoolVar(&external, "external-data", false, "write tensors of 1 KiB or more to OUT.data")
	fs.BoolVar(&opts.JSON, "json", false, "print the result as one JSON object")
	fs.StringArrayVar(&pf.specs, "prune", nil, "prune after optimizing: magnitude:S, 2:4, channels:R or channels:auto (repeatable); data-driven with --calib-data")
	fs.StringVar(&o.PruneOpts.Scope, "prune-scope", prune.ScopeLayer, choice.Or(prune.Scopes)+": magnitude:S with one global threshold; channels:R with --calib-data: R's parameters allocated across channel groups by what each costs")
	fs.StringVar(&pf.exclude, "prune-exclude", "", "nodes (or weights) not to prune, comma-separated")
	fs.Int64Var(&o.PruneOpts.MinElements, "prune-min-elements", 0, "leave weights with fewer elements alone (0: 1024 for magnitude and 2:4, no minimum for channels)")
	fs.Int64Var(&o.PruneOpts.ChannelMultiple, "prune-channel-multiple", 8, "channels:R keeps a multiple of this many channels per layer (ORT's kernels block by 8; 1 for exact counts)")
	fs.StringVar(&pf.calib.spec, "calib-data", "", "calibration data for data-driven pruning (channels: least-squares reconstruction; 2:4, magnitude: OBS updates): .npy, .npz, .pb folder(s), an image folder")
	pf.calib.batchVar(fs, "calib-batch", 32, "batch size for --calib-data")
	fs.IntVar(&pf.calib.samples, "calib-samples", 0, "prune on N samples drawn at random (seeded by --seed) from --calib-data (0: all)")
	fs.StringVar(&pf.damp, "prune-damp", strconv.FormatFloat(prune.DefaultDamp, 'g', -1, 64), "data-driven pruning: fraction of the input Gram's mean diagonal added before solving, or auto: per layer (2:4, magnitude) the one of 0.001, 0.003, 0.01, 0.03, 0.1 with the least output error on a quarter of the calibration samples held out of the solve")
	pf.calib.image.register(fs)
	fs.StringVar(&pf.cost.spec, "data", "", "data the check runs on, and what pruning costs is measured on (default: --check random inputs)")
	pf.cost.batchVar(fs, "batch", 64, "batch size for --data")
	fs.IntVar(&pf.cost.samples, "samples", 0, "use at most this many samples of --data")
	fs.StringVar(&o.PruneLabels, "labels", "", "a .npy of class ids for --data: measures the accuracy drop of pruning")
	fs.Float64Var(&o.MaxAccuracyDrop, "max-accuracy-drop", 0, "accuracy budget in points: spare the most sensitive layers until pruning costs no more")
	fs.Float64Var(&o.MinCosine, "min-cosine", 0, "channels:auto: lowest cosine to the unpruned model allowed on every output")
	df.registerSpec(fs)
	fs.Int64Var(&df.seed, "seed", 1, "seed of the check's random inputs")
	return c
}

// optimizePruneKeys are the build config keys optc optimize's pruning
// flags set, for the rules they share (prune/config.go).
var optimizePruneKeys = map[string]string{
	"prune": "prune.methods", "prune-scope": "prune.scope", "min-cosine": "prune.min_cosine",
	"max-accuracy-drop": "prune.max_accuracy_drop", "labels": "eval.labels", "calib-data": "calibration.data",
}

// pruneFlags are optimize's flags of pruning and of the data it is
// measured and reconstructed on.
type pruneFlags struct {
	specs         []string
	exclude, damp string
	cost, calib   dataFlags
}

// apply checks the pruning flags and sets o's pruning from them; df is
// the check's data flags, which the data flags inherit.
func (f *pruneFlags) apply(o *optimize.Options, df *dataFlags, g *globals) error {
	var err error
	for _, p := range f.specs {
		meth, err := prune.ParseMethod(p)
		if err != nil {
			return usageError{err}
		}
		o.Prune = append(o.Prune, meth)
	}
	// The build config's prune rules, on the same struct: one home for
	// each (prune/config.go).
	pc := config.Default()
	pc.Prune.Methods, pc.Prune.Scope, pc.Prune.MinCosine, pc.Prune.MaxAccuracyDrop = f.specs, o.PruneOpts.Scope, o.MinCosine, o.MaxAccuracyDrop
	pc.Calibration.Data, pc.Eval.Labels = f.calib.spec, o.PruneLabels
	if err := pc.ValidateSections(true, "prune"); err != nil {
		return usageError{errors.New(byFlagKeys(optimizePruneKeys, err))}
	}
	if o.PruneOpts.Scope == prune.ScopeGlobal && f.calib.spec == "" && slices.ContainsFunc(o.Prune, func(m prune.Method) bool { return m.Kind == "channels" }) {
		return usageError{fmt.Errorf("--prune-scope global for channels:R allocates by measured cost: give --calib-data")}
	}
	if f.exclude != "" {
		o.PruneOpts.Exclude = strings.Split(f.exclude, ",")
	}
	if f.cost.spec != "" {
		f.cost.inherit(df)
		if o.PruneDataOpts, err = f.cost.options(); err != nil {
			return err
		}
		o.PruneData = f.cost.spec
		o.CheckData, o.CheckDataOpts = f.cost.spec, o.PruneDataOpts
	}
	if f.calib.spec != "" {
		if len(o.Prune) == 0 {
			return usageError{fmt.Errorf("--calib-data makes pruning data-driven: give --prune too")}
		}
		if f.calib.spec == "random" {
			return usageError{fmt.Errorf("--calib-data random: reconstruction fits the weights to the data, so it needs real samples")}
		}
		f.calib.inherit(df)
		d := &prune.Data{Spec: f.calib.spec, ORTLib: g.ortLib, Session: ort.DefaultOptions()}
		if f.damp == "auto" {
			d.AutoDamp = true
		} else if d.Damp, err = strconv.ParseFloat(f.damp, 64); err != nil || d.Damp < 0 || math.IsNaN(d.Damp) {
			return usageError{fmt.Errorf("--prune-damp %q: want a number >= 0 or auto", f.damp)}
		}
		if d.Opts, err = f.calib.options(); err != nil {
			return err
		}
		d.Opts.Shapes = nil // data files carry their own shapes
		d.Opts.Shuffle = f.calib.samples > 0
		o.PruneOpts.Data = d
	}
	if (o.PruneLabels != "" || o.MaxAccuracyDrop > 0 || o.MinCosine > 0) && len(o.Prune) == 0 {
		return usageError{fmt.Errorf("--labels and --max-accuracy-drop measure pruning: give --prune too")}
	}
	if o.MaxAccuracyDrop > 0 && (o.PruneLabels == "" || f.cost.spec == "") {
		return usageError{fmt.Errorf("--max-accuracy-drop needs --labels (and --data) to measure accuracy")}
	}
	if o.CheckSamples < 0 {
		return usageError{fmt.Errorf("--check must not be negative")}
	}
	return nil
}

func optimizeRun(opts *OptimizeOptions) error {
	if err := checkOutputs([]string{opts.Optimize.Output}, nil); err != nil {
		return err
	}
	opts.Optimize.Progress = opts.IO.Progress
	res, err := optimize.Run(opts.Optimize)
	if errors.Is(err, optimize.ErrCheck) {
		err = fmt.Errorf("%w; --no-check writes the model without it", err)
	}
	if res != nil && (err == nil || res.Check != nil) {
		if opts.JSON {
			if jerr := writeJSON(opts.IO.Out, res); jerr != nil {
				return jerr
			}
		} else {
			printOptimize(opts.IO.Out, res)
		}
	}
	return err
}

func printOptimize(out io.Writer, r *optimize.Result) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	after := r.After
	fmt.Fprintf(w, "\tbefore\tafter\t\n")
	row := func(name string, b, a string) { fmt.Fprintf(w, "%s\t%s\t%s\t\n", name, b, a) }
	if after == nil {
		after = &graph.Summary{}
		row("file", r.Input, "(not written)")
	} else {
		row("file", r.Input, r.Output)
		row("bytes", thousands(r.Before.FileBytes), thousands(after.FileBytes))
	}
	row("nodes", fmt.Sprint(r.Before.NodesTotal), fmt.Sprint(after.NodesTotal))
	row("parameter bytes", thousands(r.Before.Parameters.Bytes), thousands(after.Parameters.Bytes))
	counts := map[string][2]int{}
	for _, o := range r.Before.OpTypes {
		c := counts[o.Op]
		c[0] = o.Count
		counts[o.Op] = c
	}
	for _, o := range after.OpTypes {
		c := counts[o.Op]
		c[1] = o.Count
		counts[o.Op] = c
	}
	var ops []string
	for op := range counts {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		if c := counts[op]; c[0] != c[1] {
			row("  "+op, fmt.Sprint(c[0]), fmt.Sprint(c[1]))
		}
	}
	w.Flush()
	fmt.Fprintf(out, "\npipeline rounds: %d\n", r.Passes.Rounds)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "pass\truns\tremoved\tadded\trewritten\ttime\t\n")
	for _, p := range r.Passes.Passes {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t\n", p.Name, p.Runs, p.Stats.Removed, p.Stats.Added, p.Stats.Rewritten, p.Time.Round(time.Microsecond))
	}
	w.Flush()
	if p := r.Prune; p != nil {
		printPrune(out, p)
	}
	if c := r.Check; c != nil {
		verdict := "same outputs"
		switch {
		case c.NotExpressible != "":
			verdict = "NOT EXPRESSIBLE (nothing compared): " + c.NotExpressible
		case !c.Pass:
			verdict = "DIFFERENT outputs"
		}
		on := fmt.Sprintf("%d random inputs", c.Samples)
		if c.Data != "" {
			on = fmt.Sprintf("%d samples of %s", c.Samples, c.Data)
		}
		fmt.Fprintf(out, "\ncheck of the passes in ORT (level disable, %s, atol %.3g, rtol %.3g): %s\n", on, c.Atol, c.Rtol, verdict)
		for _, s := range c.Outputs {
			fmt.Fprintf(out, "  %s: max abs error %s, max |a| %s, cosine %s (over %s finite pairs)\n", s.Name, s.MaxAbs.Text("%.3g"),
				s.MaxRef.Text("%.3g"), s.Cosine.Text("%.6f"), s.FinitePairs())
		}
		for _, s := range c.Scaled {
			fmt.Fprintf(out, "  passed with atol scaled to the output's magnitude: %s\n", s)
		}
		for _, s := range c.NonFiniteOnly {
			fmt.Fprintf(out, "  %s: NaN/Inf at the same places in both models and finite nowhere: unchanged, nothing to measure\n", s)
		}
		for _, s := range c.Skipped {
			fmt.Fprintf(out, "  not compared: %s\n", s)
		}
		for _, s := range c.Notes {
			fmt.Fprintf(out, "  note: %s\n", s)
		}
	}
}

func newCmdPasses(io *IO) *cobra.Command {
	return &cobra.Command{
		Use:   "passes",
		Short: "List optc's passes in pipeline order with their level and what they do",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "pass\tlevel\twhat it does\n")
			for _, p := range passes.All() {
				level := fmt.Sprintf("-O%d", p.Level)
				if p.Level == passes.OnRequest {
					level = "named"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, level, p.Doc)
			}
			return w.Flush()
		},
	}
}

// printSearch lists what a budget search measured.
func printSearch(out io.Writer, steps []optimize.SearchStep) {
	if len(steps) == 0 {
		return
	}
	verdict := func(s optimize.SearchStep) string {
		if s.Within {
			return "within the budget"
		}
		return "over the budget"
	}
	if steps[0].Layer == "" && steps[0].Level == 0 {
		fmt.Fprintf(out, "accuracy budget search (most sensitive layers spared first):\n")
		for _, s := range steps {
			fmt.Fprintf(out, "  sparing %s: drop %.2f points\n", strings.Join(s.Spared, ", "), s.DropPoints)
		}
		return
	}
	fmt.Fprintf(out, "channels:auto: each channel group alone at each ratio, then the largest allocation of the cheapest probes that keeps the budget (bisection):\n")
	for _, s := range steps {
		switch {
		case s.Layer != "":
			fmt.Fprintf(out, "  probe %s at %g: drop %.2f points, min cosine %.4f: %s\n", s.Layer, s.Ratio, s.DropPoints, s.MinCosine, verdict(s))
		default:
			fmt.Fprintf(out, "  the %d cheapest of %d probes: drop %.2f points, min cosine %.4f: %s\n", s.Level, s.Levels, s.DropPoints, s.MinCosine, verdict(s))
		}
	}
}

func printPrune(out io.Writer, p *optimize.PruneResult) {
	for _, r := range p.Reports {
		pruned, skipped := 0, 0
		for _, l := range r.Layers {
			if l.Skipped == "" {
				pruned++
			} else {
				skipped++
			}
		}
		fmt.Fprintf(out, "\nprune %s: %d layers pruned, %d left alone; sparsity of the pruned weights %.1f%%; parameters %s -> %s\n",
			r.Method, pruned, skipped, 100*r.Sparsity, thousands(r.ParamsBefore), thousands(r.ParamsAfter))
		// channels:auto chose a ratio per group: show it.
		auto := strings.HasSuffix(r.Method, ":auto")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		ratioHead := ""
		if auto {
			ratioHead = "ratio\t"
		}
		fmt.Fprintf(w, "  layer\top\tparams\t%ssparsity\tchannels removed\trefit\tnote\t\n", ratioHead)
		for _, l := range r.Layers {
			refit := l.Refit
			if refit == "" {
				refit = "-"
			} else if l.Damp > 0 {
				refit += fmt.Sprintf(", damp %g", l.Damp)
			}
			ratio := ""
			if auto {
				ratio = fmt.Sprintf("%g\t", l.Ratio)
			}
			fmt.Fprintf(w, "  %s\t%s\t%d\t%s%.1f%% -> %.1f%%\t%d\t%s\t%s\t\n", l.Node, l.Op, l.Params, ratio, 100*l.Before, 100*l.After, l.Removed, refit, l.Skipped)
		}
		w.Flush()
	}
	printSearch(out, p.Search)
	if c := p.Cost; c != nil {
		fmt.Fprintf(out, "cost of pruning (pruned vs unpruned, %d samples of %s):\n", c.Samples, c.Data)
		for _, s := range c.Outputs {
			top := ""
			if s.Classifier {
				top = fmt.Sprintf(", top-1 agreement %.2f%%", 100*s.Top1Agree)
			}
			fmt.Fprintf(out, "  %s: cosine %s, max abs error %s%s\n", s.Name, s.Cosine.Text("%.6f"), s.MaxAbs.Text("%.3g"), top)
		}
		if a := c.Accuracy; a != nil {
			fmt.Fprintf(out, "  accuracy %.2f%% -> %.2f%% (drop %.2f points)\n", a.A, a.B, a.DropPoints)
		}
	}
	if l := p.Latency; l != nil {
		fmt.Fprintf(out, "ORT latency (level all, batch %d): p50 %.3f ms -> %.3f ms (%.2fx)\n", l.Batch, l.BeforeP50, l.AfterP50, l.AfterP50/l.BeforeP50)
	}
}

// parseNCHWcBlock reads --nchwc-block: "" (off), auto (this CPU's) or a
// power of two from 2 to 64.
func parseNCHWcBlock(s string) (int, error) {
	switch s {
	case "":
		return 0, nil
	case "auto":
		if b := ort.NCHWcBlock(); b > 0 {
			return b, nil
		}
		return 0, fmt.Errorf("--nchwc-block auto: ONNX Runtime has no NCHWc layout on this CPU; give the deployment CPU's block (8 or 16)")
	}
	b, err := strconv.Atoi(s)
	if err != nil || b < 2 || b > 64 || b&(b-1) != 0 {
		return 0, fmt.Errorf("--nchwc-block %q: want auto, 8 or 16 (a power of two from 2 to 64)", s)
	}
	return b, nil
}
