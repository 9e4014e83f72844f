package export

import "slices"

// What ToFloat16 may run in float16, as two tables: fp16Schema is schema
// knowledge (since which opset an operator's type constraint admits
// float16), fp16Block is policy (operators that admit it but should not use
// it). An operator in neither table has no float16 rule in optc and stays
// float32: unknown is kept, never guessed.

// fp16Rule says since which opset an operator admits float16 for its
// float type parameter, and which inputs are not of that type parameter
// and must stay float32 (Resize's scales are tensor(float) at every opset).
type fp16Rule struct {
	since   int64
	float32 []int
}

// fp16Schema lists the default-domain operators whose float inputs and
// outputs all share one type parameter that admits float16 from the given
// opset on (ONNX's Operators.md). Layout and indexing ops admit every
// type; the rest list float16 explicitly.
var fp16Schema = map[string]fp16Rule{
	// convolution, matrix products, pooling
	"Conv": {since: 1}, "ConvTranspose": {since: 1}, "MatMul": {since: 1}, "Gemm": {since: 6},
	"MaxPool": {since: 1}, "AveragePool": {since: 1}, "LpPool": {since: 2},
	"GlobalAveragePool": {since: 1}, "GlobalMaxPool": {since: 1}, "GlobalLpPool": {since: 2},
	"Einsum": {since: 12},
	// normalization
	"BatchNormalization": {since: 6}, "InstanceNormalization": {since: 6}, "LRN": {since: 1},
	"LayerNormalization": {since: 17}, "GroupNormalization": {since: 18}, "MeanVarianceNormalization": {since: 9},
	// activations
	"Relu": {since: 6}, "LeakyRelu": {since: 6}, "PRelu": {since: 7}, "Sigmoid": {since: 6}, "Tanh": {since: 6},
	"Elu": {since: 6}, "Selu": {since: 6}, "HardSigmoid": {since: 6}, "HardSwish": {since: 14},
	"Softplus": {since: 1}, "Softsign": {since: 1}, "ThresholdedRelu": {since: 10}, "Mish": {since: 18},
	"Gelu": {since: 20}, "Clip": {since: 6},
	"Softmax": {since: 1}, "LogSoftmax": {since: 1}, "Hardmax": {since: 1},
	// elementwise arithmetic
	"Add": {since: 7}, "Sub": {since: 7}, "Mul": {since: 7}, "Div": {since: 7}, "Pow": {since: 7},
	"Sum": {since: 6}, "Mean": {since: 6}, "Max": {since: 6}, "Min": {since: 6},
	"Abs": {since: 6}, "Neg": {since: 6}, "Ceil": {since: 6}, "Floor": {since: 6}, "Round": {since: 11},
	"Reciprocal": {since: 6}, "Sqrt": {since: 6}, "Exp": {since: 6}, "Log": {since: 6}, "Erf": {since: 9},
	"Sign": {since: 9}, "Sin": {since: 7}, "Cos": {since: 7}, "Tan": {since: 7},
	"Asin": {since: 7}, "Acos": {since: 7}, "Atan": {since: 7},
	"Sinh": {since: 9}, "Cosh": {since: 9}, "Asinh": {since: 9}, "Acosh": {since: 9}, "Atanh": {since: 9},
	// reductions
	"ReduceMean": {since: 1}, "ReduceMax": {since: 1}, "ReduceMin": {since: 1},
	"ReduceSum": {since: 1}, "ReduceSumSquare": {since: 1}, "ReduceProd": {since: 1},
	"ReduceL1": {since: 1}, "ReduceL2": {since: 1}, "ReduceLogSum": {since: 1}, "ReduceLogSumExp": {since: 1},
	"CumSum": {since: 11},
	// layout and indexing: every element type
	"Reshape": {since: 5}, "Transpose": {since: 1}, "Concat": {since: 4}, "Split": {since: 2},
	"Flatten": {since: 1}, "Squeeze": {since: 1}, "Unsqueeze": {since: 1}, "Slice": {since: 1},
	"Gather": {since: 1}, "GatherElements": {since: 11}, "GatherND": {since: 11},
	"Expand": {since: 8}, "Tile": {since: 6}, "Pad": {since: 2}, "Identity": {since: 1},
	"DepthToSpace": {since: 1}, "SpaceToDepth": {since: 1}, "Where": {since: 9}, "Dropout": {since: 7},
	// admit float16 but carry float32-only inputs or float32 semantics
	"Resize":           {since: 10, float32: []int{1, 2}},
	"TopK":             {since: 1},
	"RoiAlign":         {since: 10},
	"QuantizeLinear":   {since: 19},
	"DequantizeLinear": {since: 19},
}

// fp16Neutral lists the operators that read a float tensor of any type
// and whose output type does not follow it: they read float16 as well as
// float32, so no Cast goes before them.
var fp16Neutral = map[string]bool{"Shape": true, "Size": true, "Cast": true}

// fp16Block is the default block list: operators that admit float16 but
// overflow or lose meaning in it, with the reason ToFloat16 reports. The
// rule is about outputs: an operator whose result is bounded by its inputs
// (Softmax, ReduceMean, pooling, Min/Max) runs in float16; one whose
// result grows with the data (sums, products, powers, exponentials,
// sum-of-squares normalizations) or is a coordinate, index or random
// draw stays float32.
var fp16Block = map[string]string{
	"ReduceSum":                 "a sum over many elements can exceed float16's 65504",
	"ReduceSumSquare":           "a sum of squares exceeds 65504 once |x| averages above 256/sqrt(n)",
	"ReduceProd":                "a product over many elements overflows float16",
	"ReduceL1":                  "a sum over many elements can exceed float16's 65504",
	"ReduceL2":                  "its sum of squares overflows float16",
	"ReduceLogSum":              "its sum over many elements can exceed float16's 65504",
	"ReduceLogSumExp":           "exp overflows float16 above 11.09",
	"CumSum":                    "a running sum can exceed float16's 65504",
	"Exp":                       "exp(x) overflows float16 for x > 11.09",
	"Pow":                       "powers overflow float16 (x^2 for |x| > 256)",
	"LayerNormalization":        "its variance (a mean of squares) overflows float16; TensorRT recommends float32 layernorm",
	"GroupNormalization":        "its variance (a mean of squares) overflows float16",
	"InstanceNormalization":     "its variance (a mean of squares) overflows float16",
	"MeanVarianceNormalization": "its variance (a mean of squares) overflows float16",
	"LRN":                       "its sum of squares overflows float16",
	"Resize":                    "coordinate arithmetic: float16 has 11 significant bits",
	"TopK":                      "selects indices: float16 rounding makes near ties swap",
	"RoiAlign":                  "box coordinates: float16 has 11 significant bits",
	"QuantizeLinear":            "quantization scales were calibrated in float32; rounding them moves every step",
	"DequantizeLinear":          "quantization scales were calibrated in float32; rounding them moves every step",
}

// DefaultFP16Block returns the op types ToFloat16 keeps float32 by default
// although their schema admits float16, sorted (FP16Options.Block starts
// from it).
func DefaultFP16Block() []string {
	ops := make([]string, 0, len(fp16Block))
	for op := range fp16Block {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}
