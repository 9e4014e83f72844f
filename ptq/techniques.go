package ptq

import "github.com/optc-dev/optc/quantize"

// TechniquesReport says what the techniques asked for (Options.Techniques)
// did.
type TechniquesReport struct {
	Applied     []quantize.Technique    `json:"applied"`
	Equalized   []quantize.EqualizePair `json:"cle,omitempty"`
	SmoothQuant *SmoothReport           `json:"smoothquant,omitempty"`
	GPTQ        *GPTQReport             `json:"gptq,omitempty"`
	Bias        *BiasReport             `json:"bias_correction,omitempty"`
	// ByGuard: the accuracy guard added techniques that were not asked
	// for (guardTries) when the model failed, and they helped.
	ByGuard bool `json:"by_guard,omitempty"`
}

// equalizeIterations is how many passes cross-layer equalization makes
// over the model: a layer in two pairs (the middle of a chain) is
// rescaled by both, and the ranges settle over a few passes.
const equalizeIterations = 4

// SmoothReport is what SmoothQuant rescaled.
type SmoothReport struct {
	Alpha  float64       `json:"alpha"`
	Groups []SmoothedAct `json:"groups"`
}

// SmoothedAct is one rescaled activation: its layers, and how far its
// largest channel stood out from the median channel before and after (the
// ratio per-tensor activation quantization pays for).
type SmoothedAct struct {
	quantize.SmoothGroup
	OutlierBefore float64 `json:"outlier_ratio_before"`
	OutlierAfter  float64 `json:"outlier_ratio_after"`
}

// BiasReport is what bias correction changed.
type BiasReport struct {
	Layers int `json:"layers"`
	// MeanShift is the mean |shift| over the corrected channels, in the
	// layers' output units.
	MeanShift float64 `json:"mean_abs_shift"`
}
