// Package optimize is what `optc optimize` does: load a model, run the
// pass pipeline, check the result against the original in ONNX Runtime,
// and write it only when it computes the same.
package optimize

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/prune"
)

// Options say what to optimize and how to check it.
type Options struct {
	Input, Output string
	Level         int      // -O level: 0, 1 or 2
	Passes        []string // run exactly these (in table order) instead of a level
	Disable       []string
	VerifyEach    bool
	DumpAfter     string // write the model after this pass to DumpPath
	DumpPath      string
	FusedConv     bool
	ORTContrib    bool // transformer fusions may emit ORT-only operators (passes.Context.ORTContrib)
	// NCHWcBlock, when not 0, shapes the result for ONNX Runtime's NCHWc
	// CPU kernels of that channel block after the passes
	// (passes.ORTCPULayout; ort.NCHWcBlock is this CPU's). Not with Prune.
	NCHWcBlock    int
	FoldSizeLimit int64
	// Check runs original and result in ORT on CheckSamples random inputs
	// (or on CheckData, when given: models that need valid values, such
	// as a shape or an index input, cannot run on random ones) and
	// refuses to write a result that differs.
	Check        bool
	CheckSamples int
	CheckAtol    float64
	CheckRtol    float64
	DataOpts     data.Options // --shape and --seed for the check inputs
	// CheckData and CheckDataOpts are the user's data for the check
	// (all its samples, or CheckDataOpts.Samples).
	CheckData     string
	CheckDataOpts data.Options
	Save          graph.SaveOptions
	ORTLib        string

	// Prune applies these methods after the passes and the check (they
	// change what the model computes, so the cost is measured instead:
	// against the unpruned result on PruneData/PruneLabels, else on the
	// check's random inputs).
	Prune           []prune.Method
	PruneOpts       prune.Options
	PruneData       string
	PruneDataOpts   data.Options
	PruneLabels     string
	MaxAccuracyDrop float64 // in points; spares the most sensitive layers until met
	// MinCosine is the lowest cosine to the unpruned model allowed on
	// every output; with MaxAccuracyDrop, the budget channels:auto keeps.
	MinCosine float64
	// Progress, when set, receives a line per model the channels:auto
	// search measures (it can take many minutes).
	Progress io.Writer
}

// Default check tolerances: what onnxsim checks a simplified model with.
const (
	DefaultCheckAtol = 1e-5
	DefaultCheckRtol = 1e-4
)

// Result is what `optc optimize` reports; docs/optimize.md describes it.
type Result struct {
	Input    string         `json:"input"`
	Output   string         `json:"output"`
	Before   *graph.Summary `json:"before"`
	After    *graph.Summary `json:"after"`
	Pipeline []string       `json:"pipeline"`
	Passes   *passes.Report `json:"passes"`
	Check    *CheckResult   `json:"check,omitempty"`
	Prune    *PruneResult   `json:"prune,omitempty"`
}

// CheckResult is the verdict of the ORT check.
type CheckResult struct {
	// Data is the user's data the check ran on ("": random inputs).
	Data    string                 `json:"data,omitempty"`
	Samples int                    `json:"samples"`
	Atol    float64                `json:"atol"`
	Rtol    float64                `json:"rtol"`
	Pass    bool                   `json:"pass"`
	Outputs []*compare.OutputStats `json:"outputs"`
	// Scaled lists the outputs that passed only with atol scaled by the
	// output's magnitude (max |a|): float rounding in deep models grows
	// with the size of the values.
	Scaled []string `json:"scaled_atol,omitempty"`
	// NonFiniteOnly lists the outputs that are NaN/Inf at the same places
	// in both models and finite nowhere: unchanged, with nothing to measure.
	NonFiniteOnly []string `json:"nonfinite_only,omitempty"`
	// Notes say how the check departed from its defaults, and why.
	Notes []string `json:"notes,omitempty"`
	// Skipped lists, one line each, the outputs the check left out:
	// values optc cannot fetch through the ORT binding.
	Skipped []string `json:"skipped,omitempty"`
	// NotExpressible, when set, says why the check could compare nothing
	// (an input it cannot feed, or no output it can fetch); Pass is then
	// false and nothing is written.
	NotExpressible string `json:"not_expressible,omitempty"`
}

// Run optimizes opts.Input into opts.Output.
func Run(opts Options) (*Result, error) {
	pipeline, err := passes.Select(opts.Level, opts.Passes, opts.Disable)
	if err != nil {
		return nil, err
	}
	m, err := graph.LoadValid(opts.Input)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	res := &Result{Input: opts.Input, Output: opts.Output, Before: graph.Summarize(m)}
	for _, p := range pipeline {
		res.Pipeline = append(res.Pipeline, p.Name)
	}
	popts := passes.Options{VerifyEach: opts.VerifyEach, DumpAfter: opts.DumpAfter, DumpPath: opts.DumpPath,
		FusedConv: opts.FusedConv, ORTContrib: opts.ORTContrib, FoldSizeLimit: opts.FoldSizeLimit}
	if opts.Check || opts.FusedConv || opts.ORTContrib {
		if _, err := ort.Init(opts.ORTLib); err != nil {
			return nil, err
		}
	}
	// Without a check the runtime is optional: folding then uses the Go
	// kernels alone.
	if _, err := ort.InitLocal(opts.ORTLib); err == nil {
		popts.Eval = &ort.NodeEvaluator{}
	}
	if res.Passes, err = passes.Run(m, pipeline, popts); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	if opts.NCHWcBlock != 0 {
		if len(opts.Prune) > 0 {
			return nil, fmt.Errorf("an NCHWc layout and pruning do not go together: prune first, then shape the pruned model")
		}
		layout := passes.Pipeline(passes.ORTCPULayout)
		lr, err := passes.Run(m, layout, passes.Options{VerifyEach: opts.VerifyEach, ChannelBlock: opts.NCHWcBlock})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Input, err)
		}
		for _, p := range layout {
			res.Pipeline = append(res.Pipeline, p.Name)
		}
		res.Passes.Passes = append(res.Passes.Passes, lr.Passes...)
	}
	if opts.Check {
		b, err := graph.MarshalReferencing(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Input, err)
		}
		if res.Check, err = check(opts, m, b); err != nil {
			return nil, err
		}
		if res.Check.NotExpressible != "" {
			return res, notExpressibleError(fmt.Sprintf("%s: the check cannot run: %s; nothing was written",
				opts.Input, res.Check.NotExpressible))
		}
		if !res.Check.Pass {
			err := fmt.Errorf("the optimized model differs from the original: %s; nothing was written (see the table)", firstFailure(res.Check))
			return res, checkError{err}
		}
	}
	if len(opts.Prune) > 0 {
		if opts.MaxAccuracyDrop > 0 && opts.PruneLabels == "" {
			return nil, fmt.Errorf("--max-accuracy-drop needs --labels (and --data) to measure accuracy")
		}
		if hasAuto(opts.Prune) && opts.MaxAccuracyDrop <= 0 && opts.MinCosine <= 0 {
			return nil, fmt.Errorf("channels:auto needs a budget: --max-accuracy-drop (with --data and --labels) or --min-cosine")
		}
		if _, err := ort.Init(opts.ORTLib); err != nil {
			return nil, err
		}
		unpruned, err := graph.Marshal(m)
		if err != nil {
			return nil, err
		}
		var pruned []byte
		if res.Prune, pruned, err = applyPruning(opts, unpruned); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Input, err)
		}
		if m, err = graph.Parse(pruned, ""); err != nil {
			return nil, err
		}
	}
	if err := graph.Save(m, opts.Output, opts.Save); err != nil {
		return nil, err
	}
	out, err := graph.LoadFile(opts.Output)
	if err != nil {
		return nil, fmt.Errorf("reading back %s: %w", opts.Output, err)
	}
	defer out.Close()
	res.After = graph.Summarize(out)
	return res, nil
}

// ErrCheck marks errors of the check in ORT; the command says how to skip
// it.
var ErrCheck = errors.New("the check of the passes failed")

// checkError is an error of the check: its message, and Is(ErrCheck).
type checkError struct{ err error }

func (e checkError) Error() string        { return e.err.Error() }
func (e checkError) Unwrap() error        { return e.err }
func (e checkError) Is(target error) bool { return target == ErrCheck }

// check compares the original file with the optimized bytes (of m) in ORT
// at level disable, so that ORT's own rewrites hide nothing.
func check(opts Options, m *graph.Model, optimized graph.Serialized) (*CheckResult, error) {
	c := &CheckResult{Samples: opts.CheckSamples, Atol: opts.CheckAtol, Rtol: opts.CheckRtol}
	if c.Samples <= 0 {
		c.Samples = 4
	}
	if c.Atol == 0 && c.Rtol == 0 {
		c.Atol, c.Rtol = DefaultCheckAtol, DefaultCheckRtol
	}
	spec, dopts := "random", opts.DataOpts
	if opts.CheckData != "" {
		spec, dopts = opts.CheckData, opts.CheckDataOpts
		c.Data = opts.CheckData
	} else {
		dopts.Samples, dopts.Batch = c.Samples, 1
		if dopts.High == 0 && dopts.Low == 0 {
			dopts.High = 1
		}
		var note string
		var err error
		if dopts, note, err = zeroSafeRange(m, dopts); err != nil {
			return nil, checkError{fmt.Errorf("checking the result: %w", err)}
		}
		if note != "" {
			c.Notes = append(c.Notes, note)
		}
	}
	sess := ort.DefaultOptions()
	sess.Level = ort.LevelDisable
	r, err := compare.Models(compare.Options{
		ModelA: opts.Input, ModelB: opts.Output + " (optimized, not yet written)", BInMemory: optimized,
		Data: spec, DataOpts: dopts,
		Atol: map[string]float64{"": c.Atol}, Rtol: map[string]float64{"": c.Rtol},
		Check: compare.StatMax, Session: sess, ORTLib: opts.ORTLib,
	})
	var nx *compare.NotExpressibleError
	if errors.As(err, &nx) {
		c.NotExpressible = strings.Join(nx.Reasons, "; ")
		return c, nil
	}
	if err != nil && spec == "random" && errors.Is(err, ort.ErrRun) {
		// ORT rejected a random value (a shape, an index, a length):
		// say what the check ran on and what to give instead.
		return nil, checkError{fmt.Errorf("checking the result on random inputs: %w; if the model needs valid input values, give them with --data (a .npy, .npz or a folder of .pb tensors)", err)}
	}
	if err != nil {
		return nil, checkError{fmt.Errorf("checking the result: %w", err)}
	}
	c.Outputs, c.Skipped, c.Pass, c.Samples = r.Outputs, r.Skipped, true, int(r.Samples) // a static batch rounds the samples up to whole runs
	for _, s := range r.Outputs {
		if s.Pass {
			continue
		}
		if s.Mismatch == 0 && s.Elements == 0 {
			// Both models are NaN/Inf at the same places and nothing
			// else: the rewrite changed nothing that can be measured.
			c.NonFiniteOnly = append(c.NonFiniteOnly, s.Name)
			continue
		}
		if scale := math.Max(1, float64(s.MaxRef)); s.Mismatch == 0 && float64(s.Value) <= c.Atol*scale {
			c.Scaled = append(c.Scaled, fmt.Sprintf("%s (atol x %.3g)", s.Name, scale))
			continue
		}
		c.Pass = false
	}
	return c, nil
}

// notExpressibleError is a check that could compare nothing: Is(ErrCheck)
// and ort.ErrNotExpressible, without repeating the latter's text.
type notExpressibleError string

func (e notExpressibleError) Error() string        { return string(e) }
func (e notExpressibleError) Unwrap() error        { return ort.ErrNotExpressible }
func (e notExpressibleError) Is(target error) bool { return target == ErrCheck }

func firstFailure(c *CheckResult) string {
	for _, s := range c.Outputs {
		if !s.Pass && !scaledPass(c, s.Name) && !slices.Contains(c.NonFiniteOnly, s.Name) {
			return fmt.Sprintf("output %q max abs error %.3g (max |a| %.3g, atol %.3g, rtol %.3g)", s.Name, s.MaxAbs, s.MaxRef, c.Atol, c.Rtol)
		}
	}
	return "an output differs"
}

func scaledPass(c *CheckResult, name string) bool {
	for _, s := range c.Scaled {
		if strings.HasPrefix(s, name+" ") {
			return true
		}
	}
	return false
}
