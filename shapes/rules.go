package shapes

import "github.com/optc-dev/optc/graph"

// rules maps the default-domain op types inference knows to their rule;
// the rules live with their family: elementwise.go, conv.go, layout.go,
// reduce.go, tensors.go, misc.go.
var rules = map[string]rule{}

// msRules covers the com.microsoft ops optc's own passes emit.
var msRules = map[string]rule{
	"FusedConv": conv,
	"FusedGemm": gemm,
	// fuse-gelu and fuse-skip-layernorm (ORT-only output): Y like input 0.
	"Gelu":                   same,
	"FastGelu":               same,
	"SkipLayerNormalization": skipLayerNorm,
	"MultiHeadAttention":     multiHeadAttention,
}

// multiHeadAttention (fuse-attention): query [B, S, D] and value
// [B, L, D_v] give output [B, S, D_v]; other layouts are left unknown.
func multiHeadAttention(c *ctx) []*graph.Type {
	q, v := c.shape(0), c.shape(2)
	if len(q) != 3 || len(v) != 3 {
		return nil
	}
	return one(c.elem(0), graph.Shape{q[0], q[1], v[2]})
}

// skipLayerNorm: Y (output 0) and input_skip_bias_sum (output 3) are the
// sum of inputs 0 and 1, which fuse-skip-layernorm only fuses when both
// have the same shape: like input 0. Outputs 1 and 2 (mean, inverse
// standard deviation) are left unknown.
func skipLayerNorm(c *ctx) []*graph.Type {
	y := tensor(c.elem(0), cloneShape(c.shape(0)))
	return []*graph.Type{y, nil, nil, tensor(c.elem(0), cloneShape(c.shape(0)))}
}

func init() {
	for _, op := range []string{
		// activations and unary math: same type and shape
		"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu",
		"Softplus", "Softsign", "ThresholdedRelu", "Gelu", "Mish", "Shrink",
		"Sqrt", "Exp", "Log", "Erf", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
		"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
		"Not", "BitwiseNot", "Clip", "CumSum", "Trilu", "ReverseSequence",
		"Softmax", "LogSoftmax", "Hardmax", "LRN", "InstanceNormalization", "MeanVarianceNormalization",
		"LpNormalization", "GroupNormalization",
		"ScatterElements", "ScatterND", "Scatter", "PRelu",
	} {
		rules[op] = same
	}
	for _, op := range []string{
		"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift",
		"And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
		"Max", "Min", "Sum", "Mean",
	} {
		rules[op] = elementwise
	}
	for _, op := range []string{"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"} {
		rules[op] = compare
	}
	for _, op := range []string{"IsNaN", "IsInf"} {
		rules[op] = isTest
	}
	rules["Identity"] = identity
	rules["Neg"] = unaryValues
	rules["Abs"] = unaryValues
	rules["Where"] = where
	rules["Cast"] = cast
	rules["CastLike"] = castLike
	rules["Dropout"] = dropout
	rules["LayerNormalization"] = layerNorm
	rules["BatchNormalization"] = batchNorm
	rules["QuantizeLinear"] = quantize
	rules["DequantizeLinear"] = dequantize
	rules["DynamicQuantizeLinear"] = dynamicQuantize

	rules["Conv"] = conv
	rules["ConvInteger"] = conv
	rules["QLinearConv"] = conv
	rules["ConvTranspose"] = convTranspose
	for _, op := range []string{"MaxPool", "AveragePool", "LpPool"} {
		rules[op] = pool
	}
	for _, op := range []string{"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"} {
		rules[op] = globalPool
	}
	rules["Gemm"] = gemm
	rules["MatMul"] = matMul
	rules["MatMulInteger"] = matMul
	rules["QLinearMatMul"] = matMul

	rules["Reshape"] = reshape
	rules["Transpose"] = transpose
	rules["Concat"] = concat
	rules["Flatten"] = flatten
	rules["Squeeze"] = squeeze
	rules["Unsqueeze"] = unsqueeze
	rules["Slice"] = slice
	rules["Gather"] = gather
	rules["GatherElements"] = gatherElements
	rules["GatherND"] = gatherND
	rules["Resize"] = resize
	rules["Upsample"] = resize
	rules["Pad"] = pad
	rules["Split"] = split
	rules["Tile"] = tile
	rules["Expand"] = expand
	rules["DepthToSpace"] = depthToSpace
	rules["SpaceToDepth"] = spaceToDepth

	for _, op := range []string{
		"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
		"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
	} {
		rules[op] = reduce
	}
	rules["ArgMax"] = argReduce
	rules["ArgMin"] = argReduce
	rules["TopK"] = topK

	rules["Constant"] = constant
	rules["Shape"] = shapeOp
	rules["Size"] = size
	rules["ConstantOfShape"] = constantOfShape
	rules["Range"] = rangeOp
	rules["NonZero"] = nonZero

	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		rules[op] = recurrent
	}
	rules["NegativeLogLikelihoodLoss"] = loss
	rules["SoftmaxCrossEntropyLoss"] = loss
	rules["OneHot"] = oneHot
	rules["EyeLike"] = eyeLike
	rules["NonMaxSuppression"] = nonMaxSuppression
	rules["Det"] = det
}
