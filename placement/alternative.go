package placement

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// CandidateDynamic is dynamic INT8 (quantize.ApplyDynamic): MatMul/Gemm
// weights int8, activations quantized at run time, nothing calibrated.
const CandidateDynamic = "dynamic-int8"

// The scheme variants: static INT8 on every region from the same
// calibration ranges, one quantization choice changed from the default.
// Which is fastest depends on the CPU's integer kernels, so it is timed,
// not ruled. Each applies only where that choice holds its default value
// (per-channel, QDQ, reduce-range auto: a command line cannot tell an
// explicit default from none); a user who chose otherwise
// (--per-channel=false, --format qoperator, --reduce-range on|off) keeps
// the choice.
const (
	CandidateS8S8        = "s8s8"         // activations int8 symmetric, not uint8
	CandidatePerTensor   = "per-tensor"   // one weight scale per tensor
	CandidateReduceRange = "reduce-range" // 7-bit weights where auto chose 8
	CandidateQOperator   = "qoperator"    // QLinearConv/QLinearMatMul, not QDQ
)

// An alternative is a whole-model candidate that is not a placement of the
// static regions: a model made another way from the float model, timed
// beside the others and confirmed like them. When one is chosen the
// regions' decisions are left as all-INT8 and do not describe the model
// (the file's chosen candidate does; Replay rebuilds it).
type alternative struct {
	name string
	// build makes the candidate from the float model, the calibration
	// ranges and the accuracy-valid settings, or returns a nil report when
	// it does not apply to this model or these settings.
	build func(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, *quantize.Report, error)
}

// alternatives is the table of whole-model candidates, in the order they
// are built and, when the budget allows, timed (the budget may leave the
// last out): dynamic INT8, then qoperator, which computes what the QDQ
// model does and so always keeps the accuracy budget, then the variants
// that change the numbers.
var alternatives = []alternative{
	{CandidateDynamic, buildDynamic},
	{CandidateQOperator, variant(func(o *quantize.Options) bool {
		if o.Format != "" && o.Format != quantize.FormatQDQ {
			return false
		}
		o.Format = quantize.FormatQOperator
		return true
	})},
	{CandidateS8S8, variant(func(o *quantize.Options) bool {
		o.SignedActivations = true
		return true
	})},
	{CandidatePerTensor, variant(func(o *quantize.Options) bool {
		if o.PerChannel != nil && !*o.PerChannel {
			return false
		}
		o.PerChannel = new(bool)
		return true
	})},
	// Only towards 7 bits: where auto chose full-range weights (a VNNI
	// CPU) 7-bit ones are a valid if less precise choice; where it chose 7
	// bits, full range would saturate in ORT's u8s8 kernels (int8-cpu.md).
	{CandidateReduceRange, variant(func(o *quantize.Options) bool {
		if o.ReduceRange != nil || quantize.AutoReduceRange() {
			return false
		}
		on := true
		o.ReduceRange = &on
		return true
	})},
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
func Build(name string, float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, *quantize.Report, error) {
	for _, a := range alternatives {
		if a.name == name {
			return a.build(float, ranges, opts)
		}
	}
	return nil, nil, fmt.Errorf("%q is not a whole-model candidate", name)
}

// buildDynamic is dynamic INT8 on the layers static INT8 would quantize
// (the same exclusions; the layers accuracy control kept float stay
// float): it applies when some MatMul or Gemm has a constant weight.
func buildDynamic(float graph.Serialized, _ map[string][2]float64, opts quantize.Options) (*graph.Model, *quantize.Report, error) {
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

// variant is a scheme variant: static INT8 of every region with the
// settings change makes; change returns false when the variant does not
// apply (the user chose that setting, or it is the default already).
func variant(change func(*quantize.Options) bool) func(graph.Serialized, map[string][2]float64, quantize.Options) (*graph.Model, *quantize.Report, error) {
	return func(float graph.Serialized, ranges map[string][2]float64, opts quantize.Options) (*graph.Model, *quantize.Report, error) {
		if !change(&opts) {
			return nil, nil, nil
		}
		q, err := quantizeKeeping(float, ranges, opts, nil)
		if err != nil {
			return nil, nil, err
		}
		return q.model, q.report, nil
	}
}

// alternativeModel builds an alternative as a search candidate; nil when
// it does not apply.
func alternativeModel(a alternative, opts Options, all *quantized) (*quantized, error) {
	m, rep, err := a.build(opts.Float, opts.Ranges, opts.Quant)
	if err != nil || rep == nil {
		return nil, err
	}
	b, err := graph.MarshalReferencing(m)
	if err != nil {
		return nil, err
	}
	// The regions stay as all-INT8's (see alternative).
	what := fmt.Sprintf("dynamic INT8 (%d MatMul/Gemm layers, activations quantized at run time)", len(rep.Quantized))
	if !rep.Dynamic {
		what = fmt.Sprintf("INT8, scheme %s (all %d regions; %s)", a.name, len(all.regions), SchemeOf(rep))
	}
	return &quantized{model: m, serialized: b, regions: all.regions, what: what, report: rep}, nil
}

// SchemeOf is the scheme a quantize report describes.
func SchemeOf(rep *quantize.Report) schema.Scheme {
	s := schema.Scheme{Activations: "uint8", PerChannel: rep.PerChannel, ReduceRange: rep.ReduceRange, Format: string(rep.Format)}
	switch {
	case rep.Dynamic:
		s.Activations, s.Format = "dynamic", "integer-ops"
	case rep.SignedActivations:
		s.Activations = "int8"
	}
	return s
}
