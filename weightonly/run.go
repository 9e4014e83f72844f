package weightonly

import (
	"fmt"
	"os"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
)

// RunOptions are what `optc quantize --weights` does: which model, which
// quantization, which data to measure on.
type RunOptions struct {
	Input, Output string
	Weights       Options
	// EvalData measures the result against float; without it the
	// calibration data is used (and the result says it is not held out).
	EvalData string
	EvalOpts data.Options
	// Task and Logits say how to score the result (compare.TaskLM: a
	// causal LM's perplexity and next-token agreement).
	Task   compare.Task
	Logits string
	// Session is how both models run for the measurement (default level
	// all, where ORT packs the MatMulNBits weights for its kernels).
	Session ort.Options
	ORTLib  string
}

// Result is the report of Run.
type Result struct {
	Input   string          `json:"input"`
	Output  string          `json:"output"`
	Weights *Report         `json:"weights"`
	Compare *compare.Result `json:"accuracy"` // A float, B low-bit
	HeldOut bool            `json:"eval_data_held_out"`
	// FloatBytes and OutputBytes are the sizes of the input and output
	// model files.
	FloatBytes  int64 `json:"float_bytes"`
	OutputBytes int64 `json:"output_bytes"`
}

// Run quantizes opts.Input's weights into opts.Output and measures the
// result against the float model in ORT. Nothing is written when a step
// fails.
func Run(opts RunOptions) (*Result, error) {
	if err := opts.Weights.Validate(); err != nil {
		return nil, err
	}
	m, err := ort.LoadModel(opts.ORTLib, opts.Input)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		return nil, err
	}
	// The exact -O1 cleanups first: weights held in Constant nodes become
	// initializers, folded shape arithmetic leaves MatMuls plain.
	pipeline := passes.Pipeline(passes.Cleanups)
	if _, err := passes.Run(m, pipeline, passes.Options{Eval: &ort.NodeEvaluator{}}); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	rep, err := Quantize(m, opts.Weights)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	if rep.Quantized == 0 {
		if len(rep.Layers) == 0 {
			return nil, fmt.Errorf("%s: no MatMul or Gemm with a constant weight to quantize to %s", opts.Input, opts.Weights.Type)
		}
		l := rep.Layers[0]
		return nil, fmt.Errorf("%s: no MatMul or Gemm weight could be quantized to %s: %d skipped (%s: %s)", opts.Input, opts.Weights.Type, len(rep.Layers), l.Node, l.Skipped)
	}
	if err := m.Verify(); err != nil {
		return nil, fmt.Errorf("the %s model is not valid (a bug in optc): %w", opts.Weights.Type, err)
	}
	low, err := graph.MarshalReferencing(m)
	if err != nil {
		return nil, err
	}
	res := &Result{Input: opts.Input, Output: opts.Output, Weights: rep}
	eval, evalOpts := opts.EvalData, opts.EvalOpts
	res.HeldOut = eval != ""
	if eval == "" && opts.Weights.Data != nil {
		eval, evalOpts = opts.Weights.Data.Spec, opts.Weights.Data.Opts
	}
	if eval != "" {
		res.Compare, err = compare.Models(compare.Options{
			ModelA: "float", ModelB: string(opts.Weights.Type), AInMemory: float, BInMemory: low,
			Data: eval, DataOpts: evalOpts, Atol: map[string]float64{"": 1e9}, Task: opts.Task, Logits: opts.Logits,
			Session: opts.Session, ORTLib: opts.ORTLib,
		})
		if err != nil {
			return nil, fmt.Errorf("evaluating the %s model: %w", opts.Weights.Type, err)
		}
	}
	if err := graph.Save(m, opts.Output, graph.SaveOptions{}); err != nil {
		return nil, err
	}
	if st, err := os.Stat(opts.Input); err == nil {
		res.FloatBytes = st.Size()
	}
	if st, err := os.Stat(opts.Output); err == nil {
		res.OutputBytes = st.Size()
	}
	return res, nil
}
