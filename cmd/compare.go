package cmd

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/task"
	"github.com/optc-dev/optc/task/tasks"
)

// CompareOptions are the inputs of `optc compare`.
type CompareOptions struct {
	IO      *IO
	Compare compare.Options
	JSON    bool
}

func newCmdCompare(io *IO, g *globals, runF func(*CompareOptions) error) *cobra.Command {
	opts := &CompareOptions{IO: io}
	var sf sessionFlags
	df := dataFlags{judges: true}
	var atol, rtol []string
	var check, taskName, dict string
	var taskParams map[string]string
	c := &cobra.Command{
		Use:   "compare A B --data PATH",
		Short: "Run two models on the same inputs and compare their outputs",
		Long: `Run models A (the reference) and B on the same inputs in ONNX Runtime and
compare every output they share: max/mean/p99 absolute error, max relative
error, cosine similarity and SNR; top-1 and top-5 agreement for outputs shaped
[N, classes]; with --labels (a .npy of int64 class ids) the accuracy of each
model and the drop in points; with --task lm (a causal language model on
token ids [N, T]) the held-out perplexity of each model and their
next-token agreement.

An output passes when the --check statistic (max, mean or p99) of the
per-element excess max(|a-b| - rtol*|a|, 0) is at most atol; with --check max
this is numpy's allclose. Tolerances apply to all outputs (--atol 1e-3) or to
one (--atol logits:1e-3). Exits 1 when an output is out of tolerance and shows
the smallest tolerance that would have passed.

NaN and Inf are counted per output and side; the statistics are over the
finite pairs only. NaN or Inf in B where A is finite, or an output with no
finite pair, fails like a tolerance does.`,
		Args: exactArgs(2, "two model files"),
		RunE: func(_ *cobra.Command, args []string) error {
			var err error
			o := &opts.Compare
			o.ModelA, o.ModelB, o.ORTLib = args[0], args[1], g.ortLib
			if o.Session, err = sf.options(); err != nil {
				return err
			}
			if o.DataOpts, err = df.options(); err != nil {
				return err
			}
			o.Data = df.spec
			if o.Atol, err = parseTolerances("--atol", atol); err != nil {
				return err
			}
			if o.Rtol, err = parseTolerances("--rtol", rtol); err != nil {
				return err
			}
			if o.Check, err = compare.ParseStat(check); err != nil {
				return usageError{err}
			}
			if err := compareTask(o, taskName, dict, taskParams); err != nil {
				return usageError{err}
			}
			if o.Task == compare.TaskLM && o.Data == "random" {
				return usageError{fmt.Errorf("--task lm needs --data token ids, not random data")}
			}
			if o.Logits != "" && o.Task != compare.TaskLM {
				return usageError{fmt.Errorf("--logits needs --task lm")}
			}
			return runOrHook(runF, compareRun, opts)
		},
	}
	c.Flags().StringVar(&opts.Compare.Labels, "labels", "", "ground truth, one entry per sample: a .npy of int64 class ids; with --task, its own format")
	c.Flags().StringVar(&opts.Compare.LabelsOutput, "labels-output", "", "the output the labels score (default: the first [N, classes] output, or the only one of the task's shape)")
	c.Flags().StringVar(&taskName, "task", "", "what the data measure: "+choice.Or(tasks.Names())+" ("+tasks.Help()+")")
	c.Flags().StringToStringVar(&taskParams, "task-param", nil, "--task "+choice.Or(tasks.WithParams())+": a parameter of its decoding, name=value (repeatable)")
	c.Flags().StringVar(&dict, "dict", "", "--task "+choice.Or(tasks.WithDict())+": the model's character dictionary, one character a line")
	c.Flags().StringVar(&opts.Compare.Logits, "logits", "", "--task lm: the logits output (default: the only float output of rank 3)")
	c.Flags().StringArrayVar(&atol, "atol", nil, fmt.Sprintf("absolute tolerance, X or OUTPUT:X (default %g)", compare.DefaultAtol))
	c.Flags().StringArrayVar(&rtol, "rtol", nil, fmt.Sprintf("relative tolerance, X or OUTPUT:X (default %g)", compare.DefaultRtol))
	c.Flags().StringVar(&check, "check", "max", "statistic the tolerance judges: "+choice.Or(compare.Stats))
	c.Flags().BoolVar(&opts.JSON, "json", false, "print the result as one JSON object")
	sf.register(c.Flags())
	// A comparison is throughput over the data: see compare.Options.Workers.
	c.Flags().Lookup("threads").Usage = fmt.Sprintf("ORT intra-op threads of one session per model (0: one single-threaded session per core, at most %d, running batches side by side)", compare.MaxWorkers)
	df.register(c.Flags(), true)
	return c
}

// compareTask checks the task flags and gives a task plug-in the labels.
func compareTask(o *compare.Options, name, dict string, params map[string]string) error {
	if name != "" && !slices.Contains(tasks.Names(), name) {
		return fmt.Errorf("--task: unknown task %q (want %s)", name, choice.Or(tasks.Names()))
	}
	o.Task = compare.Task(name)
	if tasks.TakesDict(name) != (dict != "") {
		if dict == "" {
			return fmt.Errorf("--task %s needs --dict: the model's character dictionary, one character a line", name)
		}
		return fmt.Errorf("--dict needs --task %s", choice.Or(tasks.WithDict()))
	}
	if !tasks.IsPlugin(name) {
		return nil
	}
	if o.Labels == "" && tasks.NeedsLabels(name) {
		return fmt.Errorf("--task %s needs --labels: %s", name, tasks.Labels(name))
	}
	spec := task.Spec{Name: name, Labels: o.Labels, Dict: dict, Output: o.LabelsOutput, Params: params}
	if ps := tasks.Validate(spec); len(ps) > 0 {
		return errors.New(strings.NewReplacer("eval.params", "--task-param", "eval.task", "--task").Replace(ps[0]))
	}
	o.Labels, o.Scorer = tasks.Scoring(spec)
	o.LabelsOutput = ""
	return nil
}

// parseTolerances reads repeated X or NAME:X values into a map whose ""
// key is the default.
func parseTolerances(flag string, vals []string) (map[string]float64, error) {
	m := map[string]float64{}
	for _, v := range vals {
		name, num := "", v
		if i := strings.LastIndex(v, ":"); i >= 0 {
			name, num = v[:i], v[i+1:]
		}
		x, err := strconv.ParseFloat(num, 64)
		if err != nil || x < 0 || math.IsNaN(x) {
			return nil, usageError{fmt.Errorf("%s %q: want a non-negative number, or OUTPUT:number", flag, v)}
		}
		m[name] = x
	}
	return m, nil
}

func compareRun(opts *CompareOptions) error {
	res, err := compare.Models(opts.Compare)
	if err != nil {
		return err
	}
	if opts.JSON {
		if err := writeJSON(opts.IO.Out, res); err != nil {
			return err
		}
	} else {
		printComparison(opts.IO, res)
	}
	if !res.Pass {
		var failed []string
		for _, s := range res.Outputs {
			if !s.Pass {
				failed = append(failed, fmt.Sprintf("%s (%s)", s.Name, s.Failure()))
			}
		}
		return fmt.Errorf("out of tolerance: %s", strings.Join(failed, ", "))
	}
	return nil
}

func printComparison(io *IO, r *compare.Result) {
	fmt.Fprintf(io.Out, "A %s\nB %s\n%d samples in %d runs of %s\n", r.ModelA, r.ModelB, r.Samples, r.Batches, r.Data)
	fmt.Fprintf(io.Out, "errors, cosine and SNR are over the finite pairs (A and B both finite); NaN and Inf are counted as A/B\n\n")
	w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "output\tfinite pairs\tNaN A/B\tInf A/B\tmax abs\tmean abs\tp99 abs\tmax rel\tcosine\tmin sample cosine\trel error\tSNR dB\ttop-1 (clear rows)\ttop-5\tcheck\tresult\n")
	for _, s := range r.Outputs {
		top1, top5 := "-", "-"
		if s.Top1 != nil {
			top1 = s.Top1.Text()
		}
		if s.Classifier {
			top5 = fmt.Sprintf("%.2f%%", 100*s.Top5Agree)
		}
		verdict := "pass"
		if !s.Pass {
			verdict = "FAIL"
		}
		if s.NewNonFinite > 0 {
			verdict = "FAIL: NaN/Inf in B"
		}
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s %s <= %.3g\t%s\n",
			s.Name, s.FinitePairs(), s.NaN.A, s.NaN.B, s.Inf.A, s.Inf.B, s.MaxAbs.Text("%.3g"), s.MeanAbs.Text("%.3g"),
			s.P99Abs.Text("%.3g"), s.MaxRel.Text("%.3g"), s.Cosine.Text("%.6f"), s.SampleCosineText(), s.RelErrorText(), s.SNRdB.Text("%.1f"), top1, top5,
			s.Check, s.Value.Text("%.3g"), s.Atol, verdict)
	}
	w.Flush()
	for _, s := range r.Outputs {
		if !s.Pass && (s.Mismatch > 0 || s.Elements == 0 || s.ShapeMismatches > 0) {
			fmt.Fprintf(io.Out, "FAIL %s: %s\n", s.Name, s.Failure())
		}
	}
	fmt.Fprintln(io.Out)
	w = tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "output\tatol\trtol\tsmallest passing atol (at this rtol)\tsmallest passing rtol (at this atol)\n")
	for _, s := range r.Outputs {
		minRtol := "-"
		if s.MinRtol >= 0 || !s.MinRtol.Finite() {
			minRtol = s.MinRtol.Text("%.3g")
		}
		fmt.Fprintf(w, "%s\t%.3g\t%.3g\t%s\t%s\n", s.Name, s.Atol, s.Rtol, s.MinAtol.Text("%.3g"), minRtol)
	}
	w.Flush()
	if a := r.Accuracy; a != nil {
		drop := a.DropPoints
		if drop == 0 {
			drop = 0 // no "-0.00"
		}
		fmt.Fprintf(io.Out, "\naccuracy on %d labels (%s): A %.2f%%, B %.2f%%, drop %.2f points\n", a.Labels, a.Output, a.A, a.B, drop)
	}
	if t := r.Task; t != nil {
		fmt.Fprintf(io.Out, "\n%s\n", t.Text())
	}
	if l := r.LM; l != nil {
		fmt.Fprintf(io.Out, "\nlanguage model on %d next tokens (%s from %s): perplexity A %.4g, B %.4g (%+.2f%%); next-token agreement %.2f%%; top-1 A %.2f%%, B %.2f%%\n",
			l.Tokens, l.Output, l.Input, float64(l.PerplexityA), float64(l.PerplexityB), float64(l.IncreasePercent), 100*l.Agreement, 100*l.AccuracyA, 100*l.AccuracyB)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(io.Out, "not compared: %s\n", s)
	}
}
