package quantize

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/graph"
)

// Scheme is how a target quantizes: the activation type and symmetry,
// whether biases become int32, where Q/DQ goes, and which options apply.
// Apply looks the target's scheme up once and follows it; a new target is
// a new entry in schemes, not a new condition in the code.
type Scheme struct {
	Target Target
	// ActivationType is the integer type of activation Q/DQ: Uint8 with an
	// asymmetric range (widened to include 0, zero point in [0, 255]), or
	// Int8 symmetric (zero point 0, scale max(|min|, |max|)/127).
	ActivationType graph.DataType
	// Int32Bias stores Conv/Gemm biases as int32 with scale input scale x
	// weight scale (ORT's integer kernels take them so); else they stay
	// float.
	Int32Bias bool
	// PassThroughOps are quantized at their activation inputs so that INT8
	// runs across them (ORT's QLinearAdd, QLinearSigmoid, ...), and a
	// weighted op's output is quantized where the next quantized op reads
	// it; their outputs need ranges.
	PassThroughOps []string
	// ResidualAdds puts Q/DQ on the residual input of an Add that a
	// quantized Conv can absorb (TensorRT's Q/DQ placement); the Conv's own
	// output stays float.
	ResidualAdds bool
	// ActivationMatMul quantizes both inputs of a MatMul whose second
	// input is an activation too (attention's Q·Kᵀ and A·V), per tensor:
	// TensorRT runs such a MatMul in INT8 when both inputs are Q/DQ.
	ActivationMatMul bool
	// AutoReduceRange lets a nil Options.ReduceRange decide 7-bit weights
	// from the CPU (ORT's U8S8 kernels saturate without VNNI); otherwise
	// weights use the full int8 range unless asked.
	AutoReduceRange bool
	// QuantizeOutputs quantizes the output of every quantized op (after
	// the Relu/Clip it feeds alone) and makes every reader in its graph
	// read it through that one Q/DQ. ORT fuses DQ -> op -> Q into an
	// integer kernel only when the op's output goes to a QuantizeLinear
	// alone: a float reader of the raw output (a HardSwish's HardSigmoid),
	// or no QuantizeLinear at all, leaves the op in float on dequantized
	// weights, slower than the FP32 model (no prepacked weights, no NCHWc).
	QuantizeOutputs bool
	// ShareScaleOps only move or select values (Reshape, Transpose,
	// Flatten, Slice): their output takes their input's range, hence the
	// same scale and zero point, so that ORT drops the Q/DQ around them and
	// runs them on the integer data (a ShuffleNet channel split and shuffle
	// stay integer). Exact: every output value is an input value, already
	// on the grid. (MaxPool would be too, but ORT's uint8 MaxPool is slower
	// than float: docs/int8-cpu.md.)
	ShareScaleOps []string
	// IntegerHardSigmoid runs a HardSigmoid whose input is quantized
	// (uint8) as a Clip of the integer tensor read through a second
	// DequantizeLinear: with the input's scale s chosen so that
	// k = 1/(alpha*s) and beta*k are integers, alpha*x+beta is
	// DequantizeLinear(xq; alpha*s, z-beta*k) and its clip to [0, 1] a
	// clip of xq to [z-beta*k, z-beta*k+k]. A HardSwish (x*HardSigmoid(x))
	// or a squeeze-excite gate then runs as QLinearMul, with no float
	// pass over the activation (see hardsigmoid.go).
	IntegerHardSigmoid bool
	// QOperator allows FormatQOperator.
	QOperator bool
	// OtherRuntime says the Q/DQ model is for a runtime other than ONNX
	// Runtime, which can then only simulate it: its Q/DQ pairs must run as
	// float arithmetic on the quantized values (what the target computes),
	// not through ORT's CPU integer kernels (see ptq).
	OtherRuntime bool
}

// schemes lists the targets' schemes.
var schemes = []Scheme{
	{Target: TargetORT, ActivationType: graph.Uint8, Int32Bias: true, PassThroughOps: passThroughOps,
		QuantizeOutputs: true, ShareScaleOps: []string{"Reshape", "Transpose", "Flatten", "Slice"}, IntegerHardSigmoid: true,
		AutoReduceRange: true, QOperator: true},
	{Target: TargetTensorRT, ActivationType: graph.Int8, ResidualAdds: true, ActivationMatMul: true, OtherRuntime: true},
}

// Targets are the targets that have a scheme, in order.
func Targets() []Target {
	out := make([]Target, len(schemes))
	for i, s := range schemes {
		out[i] = s.Target
	}
	return out
}

// formerNames are targets' earlier spellings (optc quantize called the
// ORT target ort-cpu until build and quantize shared one name): still
// read, from commands and from files written then.
var formerNames = map[Target]Target{"ort-cpu": TargetORT}

// CurrentName returns target's current spelling, and whether target was
// a former one.
func CurrentName(target Target) (Target, bool) {
	if t, ok := formerNames[target]; ok {
		return t, true
	}
	return target, false
}

// SchemeFor returns target's scheme ("" is ort; a former spelling is
// read as the target's current name).
func SchemeFor(target Target) (Scheme, error) {
	if target == "" {
		target = TargetORT
	}
	target, _ = CurrentName(target)
	var names []string
	for _, s := range schemes {
		if s.Target == target {
			return s, nil
		}
		names = append(names, string(s.Target))
	}
	return Scheme{}, fmt.Errorf("quantize: unknown target %q (want one of %q)", target, names)
}

// symmetric reports whether activations are quantized symmetrically.
func (s Scheme) symmetric() bool { return s.ActivationType == graph.Int8 }

// activationParams returns scale and zero point for a range.
func (s Scheme) activationParams(r [2]float64) (float32, int) {
	if s.symmetric() {
		amax := math.Max(math.Abs(r[0]), math.Abs(r[1]))
		if amax == 0 {
			return 1, 0
		}
		return float32(amax / 127), 0
	}
	lo, hi := math.Min(r[0], 0), math.Max(r[1], 0)
	if hi == lo {
		return 1, 0
	}
	scale := float32((hi - lo) / 255)
	zp := math.Round(-lo / float64(scale))
	return scale, int(math.Max(0, math.Min(255, zp)))
}

// zeroPoint is zp stored as the scheme's activation type.
func (s Scheme) zeroPoint(zp int) (graph.DataType, []byte) {
	if s.symmetric() {
		return graph.Int8, []byte{byte(int8(zp))}
	}
	return graph.Uint8, []byte{byte(zp)}
}
