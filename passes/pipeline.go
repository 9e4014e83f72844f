package passes

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/optc-dev/optc/graph"
)

// registry is every pass in the order the pipeline runs them.
var registry = []*Pass{
	constantsToInitializers,
	foldConstants,
	eliminateIdentity,
	eliminateNoop,
	mergeTransposes,
	mergeReshapes,
	mergeSqueezeUnsqueeze,
	eliminateCSE,
	dedupInitializers,
	fusePadIntoConv,
	matmulAddToGemm,
	fuseBiasAdd,
	fuseConvBN,
	fuseHardSwish,
	fuseLayerNorm,
	fuseGelu,
	fuseSkipLayerNorm,
	fuseAttention,
	fuseConvActivation,
	deadCode,
	inferShapes,
	upgradeOpset,          // on request only
	padConvChannels,       // on request only (ORT CPU layout)
	hardSigmoidConvBridge, // on request only (ORT CPU layout)
}

// Named is a pipeline a stage asks the driver for by what it is for,
// never by counting levels itself.
type Named int

const (
	// Cleanups are the exact cleanups and folding of -O1: after pruning
	// rewrote weights, and before weight-only quantization.
	Cleanups Named = iota
	// Quantization is what optc quantize runs before quantizing: -O2, so
	// that BatchNormalization is folded into the convs and they quantize
	// as one.
	Quantization
	// ORTCPULayout shapes an optimized model for ONNX Runtime's NCHWc CPU
	// kernels (Options.ChannelBlock): zero-padded conv channels, then
	// HardSigmoid given a conv to fuse into.
	ORTCPULayout
	// ORTInt8Layout pads a float model's conv channels
	// (Options.ChannelBlock) before it is quantized for ONNX Runtime's CPU
	// provider, whose symmetric INT8 conv kernels need aligned channels
	// (see ort.Int8ChannelAlign).
	ORTInt8Layout
)

// Pipeline is the named pipeline's passes, in table order.
func Pipeline(n Named) []*Pass {
	switch n {
	case Cleanups:
		return atLevel(1)
	case Quantization:
		return atLevel(2)
	case ORTCPULayout:
		return []*Pass{padConvChannels, hardSigmoidConvBridge}
	case ORTInt8Layout:
		return []*Pass{inferShapes, padConvChannels}
	}
	panic(fmt.Sprintf("passes: no pipeline %d", n))
}

// atLevel is the -O level's pipeline (1 or 2).
func atLevel(level int) []*Pass {
	p, _ := Select(level, nil, nil)
	return p
}

// All returns every pass in pipeline order.
func All() []*Pass { return slices.Clone(registry) }

// Lookup returns the pass called name.
func Lookup(name string) (*Pass, error) {
	for _, p := range registry {
		if p.Name == name {
			return p, nil
		}
	}
	var names []string
	for _, p := range registry {
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("unknown pass %q (passes: %s)", name, strings.Join(names, ", "))
}

// Select returns the pipeline for an -O level (0, 1 or 2: the passes of
// that level or lower, never OnRequest ones), or exactly the named passes
// in table order when only is not empty, minus disabled.
func Select(level int, only, disabled []string) ([]*Pass, error) {
	if level < 0 || level > 2 {
		return nil, fmt.Errorf("optimization level -O%d: want 0, 1 or 2", level)
	}
	for _, n := range append(slices.Clone(only), disabled...) {
		if _, err := Lookup(n); err != nil {
			return nil, err
		}
	}
	var out []*Pass
	for _, p := range registry {
		chosen := p.Level <= level && level > 0
		if len(only) > 0 {
			chosen = slices.Contains(only, p.Name)
		}
		if chosen && !slices.Contains(disabled, p.Name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Options control a pipeline run.
type Options struct {
	// VerifyEach runs Verify after every pass and stops at the first pass
	// that breaks the model.
	VerifyEach bool
	// DumpAfter names a pass after whose first run the model is written to
	// DumpPath.
	DumpAfter, DumpPath string
	// MaxRounds bounds the fixed-point iteration (default 8).
	MaxRounds     int
	Eval          Evaluator
	FoldSizeLimit int64
	FusedConv     bool
	ORTContrib    bool  // see Context.ORTContrib
	Opset         int64 // see Context.Opset
	ChannelBlock  int   // see Context.ChannelBlock
}

// PassReport is what one pass did over all rounds.
type PassReport struct {
	Name  string        `json:"name"`
	Runs  int           `json:"runs"`
	Stats Stats         `json:"stats"`
	Time  time.Duration `json:"time_ns"`
}

// Report is what a pipeline run did.
type Report struct {
	Rounds int           `json:"rounds"`
	Passes []*PassReport `json:"passes"`
}

// runs counts pipeline runs in this process: a build runs its passes
// once, and its tests hold it to that.
var runs atomic.Int64

// Runs is the number of pipeline runs (Run calls) so far in this process.
func Runs() int64 { return runs.Load() }

// Run applies the passes to m in order, round after round until a round
// changes nothing (or MaxRounds). The model must pass Verify first.
func Run(m *graph.Model, pipeline []*Pass, opts Options) (*Report, error) {
	runs.Add(1)
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("the model is invalid before any pass: %w", err)
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = 8
	}
	if opts.FoldSizeLimit <= 0 {
		opts.FoldSizeLimit = DefaultFoldSizeLimit
	}
	ctx := &Context{Model: m, Eval: opts.Eval, FoldSizeLimit: opts.FoldSizeLimit, FusedConv: opts.FusedConv, ORTContrib: opts.ORTContrib, Opset: opts.Opset, ChannelBlock: opts.ChannelBlock}
	rep := &Report{}
	for _, p := range pipeline {
		rep.Passes = append(rep.Passes, &PassReport{Name: p.Name})
	}
	dumped := false
	// changes counts the pass runs that changed the model; shapesAt is its
	// value after each shape-providing pass's last run, settledAt after
	// each pass's last run when that run changed nothing.
	changes := 0
	shapesAt := make([]int, len(pipeline))
	settledAt := make([]int, len(pipeline))
	for i := range shapesAt {
		shapesAt[i], settledAt[i] = -1, -1
	}
	for round := 0; round < opts.MaxRounds && len(pipeline) > 0; round++ {
		rep.Rounds++
		changed := false
		for i, p := range pipeline {
			if p.ProvidesShapes && shapesAt[i] == changes {
				// Nothing changed since it wrote every type the
				// inference knows: a run now would find nothing to add
				// (the round that confirms the fixed point, on a large
				// model the costliest pass of it).
				continue
			}
			if settledAt[i] == changes {
				// Its last run changed nothing and no pass has changed
				// the model since: a run would find the same nothing (a
				// pass is a function of the model), and on a large model
				// even finding nothing is a walk of every node.
				continue
			}
			start := time.Now()
			st, err := ctx.runPass(p)
			pr := rep.Passes[i]
			pr.Time += time.Since(start)
			pr.Runs++
			if err != nil {
				return nil, err
			}
			pr.Stats.add(st)
			if st.Changed() {
				ctx.shapesChanged()
				changes++
			}
			if p.ProvidesShapes {
				shapesAt[i] = changes
			}
			settledAt[i] = -1
			if !st.Changed() {
				settledAt[i] = changes
			}
			changed = changed || st.Changed()
			if opts.VerifyEach {
				if err := m.Verify(); err != nil {
					return nil, fmt.Errorf("pass %s broke the model (a bug in optc): %w", p.Name, err)
				}
			}
			if p.Name == opts.DumpAfter && !dumped {
				if err := graph.Save(m, opts.DumpPath, graph.SaveOptions{}); err != nil {
					return nil, fmt.Errorf("dump after %s: %w", p.Name, err)
				}
				dumped = true
			}
		}
		if !changed {
			break
		}
	}
	return rep, nil
}

// DumpPathFor is the default --dump-after file next to out.
func DumpPathFor(out, pass string) string {
	ext := filepath.Ext(out)
	return strings.TrimSuffix(out, ext) + ".after-" + pass + ext
}
