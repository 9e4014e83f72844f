package quantize

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/report/schema"
)

const (
	// TechniqueEqualize is cross-layer equalization (Equalize): data-free,
	// before calibration.
	TechniqueEqualize schema.Technique = "cle"
	// TechniqueSmoothQuant moves activation outliers of MatMul/Gemm inputs
	// into the weights (Xiao et al. 2023) before calibration
	// (SmoothGroups, Smooth).
	TechniqueSmoothQuant schema.Technique = "smoothquant"
	// TechniqueGPTQ rounds INT8 weights adaptively, by GPTQ's error
	// feedback from the layers' input Grams (Options.Rounded).
	TechniqueGPTQ schema.Technique = "gptq"
	// TechniqueBiasCorrection cancels the mean error each quantized layer
	// adds, per output channel, measured on the calibration data
	// (Options.BiasShift; Nagel et al. 2019, empirical form).
	TechniqueBiasCorrection schema.Technique = "bias-correction"
)

// Techniques are the techniques, in the order ptq applies them.
var Techniques = []schema.Technique{TechniqueEqualize, TechniqueSmoothQuant, TechniqueGPTQ, TechniqueBiasCorrection}

// DefaultSmoothAlpha is SmoothQuant's migration strength: 0.5 splits the
// difficulty evenly between activations and weights, the paper's default.
const DefaultSmoothAlpha = 0.5

// ParseTechniques checks names against Techniques and returns them in
// Techniques' order, each once.
func ParseTechniques(names []string) ([]schema.Technique, error) {
	var out []schema.Technique
	for _, n := range names {
		t := schema.Technique(n)
		if !slices.Contains(Techniques, t) {
			return nil, fmt.Errorf("unknown technique %q (want %s)", n, choice.Or(Techniques))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b schema.Technique) int { return slices.Index(Techniques, a) - slices.Index(Techniques, b) })
	return out, nil
}
