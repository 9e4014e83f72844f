package placement

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
)

// CandidateDynamic is dynamic INT8 (quantize.ApplyDynamic): MatMul/Gemm
// weights int8, activations quantized at run time, nothing calibrated.
const CandidateDynamic = "dynamic-int8"

// An alternative is a whole-model candidate that is not a placement of the
// static regions: a model made another way from the float model, timed
// beside the others and confirmed like them. When one is chosen the
// regions' decisions are left as all-INT8 and do not describe the model
// (the file's chosen candidate does; Replay rebuilds it).
type alternative struct {
	name string
	// build makes the candidate from the float model with the
	// accuracy-valid settings, or returns a nil report when it does not
	// apply to this model.
	build func(float graph.Serialized, opts quantize.Options) (*graph.Model, *quantize.Report, error)
}

// alternatives is the table of whole-model candidates, in the order they
// are timed.
var alternatives = []alternative{
	{CandidateDynamic, buildDynamic},
}

// IsAlternative reports whether a chosen candidate is a whole-model
// alternative, whose model Build makes, rather than a placement of the
// static regions.
func IsAlternative(name string) bool {
	return slices.ContainsFunc(alternatives, func(a alternative) bool { return a.name == name })
}

// Build makes the model of alternative candidate name from float with
// opts: what a placement file that chose it replays to. The report is
// nil when the candidate does not apply to the model.
func Build(name string, float graph.Serialized, opts quantize.Options) (*graph.Model, *quantize.Report, error) {
	for _, a := range alternatives {
		if a.name == name {
			return a.build(float, opts)
		}
	}
	return nil, nil, fmt.Errorf("placement: %q is not a whole-model candidate", name)
}

// buildDynamic is dynamic INT8 on the layers static INT8 would quantize
// (the same exclusions; the layers accuracy control kept float stay
// float): it applies when some MatMul or Gemm has a constant weight.
func buildDynamic(float graph.Serialized, opts quantize.Options) (*graph.Model, *quantize.Report, error) {
	m, err := float.Parse()
	if err != nil {
		return nil, nil, err
	}
	opts.KeepFloat, opts.Format = nil, ""
	rep, err := quantize.ApplyDynamic(m, opts)
	if err != nil {
		return nil, nil, err
	}
	if len(rep.Quantized) == 0 {
		return nil, nil, nil
	}
	if err := m.Verify(); err != nil {
		return nil, nil, fmt.Errorf("dynamic INT8 model is invalid (a bug in optc): %w", err)
	}
	return m, rep, nil
}

// alternativeModel builds an alternative as a search candidate; nil when
// it does not apply.
func alternativeModel(a alternative, opts Options, all *quantized) (*quantized, error) {
	m, rep, err := a.build(opts.Float, opts.Quant)
	if err != nil || rep == nil {
		return nil, err
	}
	b, err := graph.MarshalReferencing(m)
	if err != nil {
		return nil, err
	}
	// The regions stay as all-INT8's (see alternative).
	what := fmt.Sprintf("dynamic INT8 (%d MatMul/Gemm layers, activations quantized at run time)", len(rep.Quantized))
	return &quantized{model: m, serialized: b, regions: all.regions, what: what}, nil
}
