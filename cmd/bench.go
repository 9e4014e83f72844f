package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/report"
)

// BenchOptions are the inputs of `optc bench`.
type BenchOptions struct {
	IO    *IO
	Bench bench.Options
	JSON  bool
	// Report, when set, is a folder to write report.json/.md/.html into.
	Report string
}

func newCmdBench(io *IO, g *globals, runF func(*BenchOptions) error) *cobra.Command {
	opts := &BenchOptions{IO: io}
	var sf sessionFlags
	var df dataFlags
	var batches string
	c := &cobra.Command{
		Use:   "bench MODEL --data PATH|random",
		Short: "Measure cold start, latency percentiles and throughput in ONNX Runtime",
		Long: `Measure a model in ONNX Runtime: cold start (library load, session creation,
first run), then warm latency after warm-up (min, p50, p90, p95, p99, max,
mean, stddev, CV) and throughput in samples/s for each batch size of --batch
(a sweep such as 1,2,4,8). --concurrency N sends N requests at a time to one
session. The harness floor is the same loop timed on a do-nothing model; it is
shown, not subtracted.`,
		Args: exactArgs(1, "one model file"),
		RunE: func(_ *cobra.Command, args []string) error {
			var err error
			o := &opts.Bench
			o.Model, o.ORTLib = args[0], g.ortLib
			if o.Session, err = sf.options(); err != nil {
				return err
			}
			if o.Batches, err = parseBatches(batches); err != nil {
				return err
			}
			df.batch = o.Batches[0]
			if o.DataOpts, err = df.options(); err != nil {
				return err
			}
			o.Data = df.spec
			if o.Iterations < 0 || o.Duration < 0 || o.Concurrency < 0 || o.Warmup < 0 {
				return usageError{fmt.Errorf("--iterations, --duration, --warmup and --concurrency must not be negative")}
			}
			if isTerminal(io.ErrOut) {
				o.Progress = io.ErrOut
			}
			return runOrHook(runF, benchRun, opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&batches, "batch", "1", "batch sizes to measure, comma-separated (e.g. 1,2,4,8,16,32)")
	fs.IntVar(&opts.Bench.Iterations, "iterations", 0, "timed runs per batch size (default: run for --duration)")
	fs.DurationVar(&opts.Bench.Duration, "duration", 2*time.Second, "time per batch size when --iterations is not given")
	fs.IntVar(&opts.Bench.Warmup, "warmup", 10, "untimed runs before timing")
	fs.IntVar(&opts.Bench.Concurrency, "concurrency", 1, "parallel requests")
	fs.BoolVar(&opts.JSON, "json", false, "print the result as one JSON object")
	fs.StringVar(&opts.Report, "report", "", "also write report.json, report.md and report.html into this folder (docs/report.md)")
	sf.register(fs)
	df.register(fs, false)
	return c
}

func parseBatches(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usageError{fmt.Errorf("--batch %q: want positive integers, comma-separated", s)}
		}
		out = append(out, n)
	}
	return out, nil
}

func benchRun(opts *BenchOptions) error {
	if err := checkOutputs(nil, []string{opts.Report}); err != nil {
		return err
	}
	res, err := bench.Run(opts.Bench)
	if err != nil {
		return err
	}
	if err := writeReport(opts.Report, func() (*report.Report, error) { return res.Report() }); err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.IO.Out, res)
	}
	out := opts.IO.Out
	threads := "default"
	if res.IntraOpThreads > 0 {
		threads = strconv.Itoa(res.IntraOpThreads)
	}
	fmt.Fprintf(out, "model %s\nORT %s, level %s, intra-op threads %s, concurrency %d, data %s\n\n",
		res.Model, res.ORTVersion, res.Level, threads, res.Concurrency, res.Data)
	cs := res.ColdStart
	for _, sk := range res.Skipped {
		fmt.Fprintf(out, "not timed: %s\n", sk)
	}
	fmt.Fprintf(out, "cold start %.1f ms: library %.1f ms, session %.1f ms, first run %.2f ms\n", cs.TotalMs, cs.LibraryInitMs, cs.SessionCreateMs, cs.FirstRunMs)
	fmt.Fprintf(out, "harness floor (do-nothing model): p50 %.3f ms, p99 %.3f ms (not subtracted)\n\n", res.Harness.P50, res.Harness.P99)
	fmt.Fprintf(out, "warm latency in ms:\n")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "batch\truns\tmin\tp50\tp90\tp95\tp99\tmax\tmean\tstddev\tCV\tsamples/s\t\n")
	for _, b := range res.Batches {
		l := b.Latency
		fmt.Fprintf(w, "%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f%%\t%.1f\t\n",
			b.Batch, l.N, l.Min, l.P50, l.P90, l.P95, l.P99, l.Max, l.Mean, l.Stddev, 100*l.CV, b.Throughput)
	}
	return w.Flush()
}
