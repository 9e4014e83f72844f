// Package kernels evaluates ONNX operators in Go over *graph.Tensor, for
// constant folding. Every kernel follows the operator's specification at
// the node's opset exactly, or refuses: an operator, element type or
// attribute combination it does not implement returns ErrUnsupported
// (the caller may then ask ONNX Runtime), never a guess. Arithmetic on
// float32 and float16 is carried out in float64 and rounded once, which
// gives the correctly rounded result for + - * / and Sqrt; sums and
// products over many elements (MatMul, ReduceSum) may differ from a
// runtime's float32 accumulation in the last bits.
package kernels

import (
	"errors"
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// ErrUnsupported is returned (wrapped) for operators, element types and
// attribute combinations this package does not implement.
var ErrUnsupported = errors.New("no Go kernel")

// ErrTooLarge is returned (wrapped) by EvalLimit, before any work, when an
// output would be larger than the limit.
var ErrTooLarge = errors.New("output over the size limit")

// ErrUndefined is returned (wrapped) when the specification leaves the
// result undefined (integer division by zero, say): there is nothing
// correct to fold, and a runtime may crash on it.
var ErrUndefined = errors.New("result undefined by the specification")

// Attrs gives a kernel the node's attributes; *graph.Node is one. nil
// means no attributes.
type Attrs interface {
	Attr(name string) *graph.Attr
}

// kernel computes an operator's outputs.
type kernel func(c *call) ([]*graph.Tensor, error)

// kernelTable lists every operator of the default domain with a kernel.
var kernelTable = map[string]kernel{
	"Abs":             unaryKernel(opAbs),
	"Add":             binaryKernel(opAdd),
	"And":             logicalKernel(func(a, b bool) bool { return a && b }),
	"Cast":            castKernel,
	"CastLike":        castLikeKernel,
	"Concat":          concatKernel,
	"ConstantOfShape": constantOfShapeKernel,
	"Div":             binaryKernel(opDiv),
	"Equal":           compareKernel(cmpEqual),
	"Expand":          expandKernel,
	"Flatten":         flattenKernel,
	"Gather":          gatherKernel,
	"Greater":         compareKernel(cmpGreater),
	"GreaterOrEqual":  compareKernel(cmpGreaterOrEqual),
	"Identity":        identityKernel,
	"Less":            compareKernel(cmpLess),
	"LessOrEqual":     compareKernel(cmpLessOrEqual),
	"MatMul":          matMulKernel,
	"Max":             variadicKernel(opMax),
	"Mean":            meanKernel,
	"Min":             variadicKernel(opMin),
	"Mod":             modKernel,
	"Mul":             binaryKernel(opMul),
	"Neg":             unaryKernel(opNeg),
	"Not":             notKernel,
	"Or":              logicalKernel(func(a, b bool) bool { return a || b }),
	"Pow":             powKernel,
	"Range":           rangeKernel,
	"Reciprocal":      unaryKernel(opReciprocal),
	"ReduceMax":       reduceKernel(redMax),
	"ReduceMean":      reduceKernel(redMean),
	"ReduceMin":       reduceKernel(redMin),
	"ReduceProd":      reduceKernel(redProd),
	"ReduceSum":       reduceKernel(redSum),
	"Reshape":         reshapeKernel,
	"Shape":           shapeKernel,
	"Size":            sizeKernel,
	"Slice":           sliceKernel,
	"Sqrt":            unaryKernel(opSqrt),
	"Squeeze":         squeezeKernel,
	"Sub":             binaryKernel(opSub),
	"Sum":             variadicKernel(opAdd),
	"Tile":            tileKernel,
	"Transpose":       transposeKernel,
	"Unsqueeze":       unsqueezeKernel,
	"Where":           whereKernel,
	"Xor":             logicalKernel(func(a, b bool) bool { return a != b }),
}

// Has reports whether op of domain has a kernel (for some types and
// attributes; Eval still says ErrUnsupported for the rest).
func Has(op, domain string) bool {
	_, ok := kernelTable[op]
	return ok && defaultDomain(domain)
}

func defaultDomain(d string) bool { return d == "" || d == "ai.onnx" }

// Eval computes op (of domain, at operator set version opset) on inputs
// (nil for an omitted optional input) and returns its outputs, unnamed.
// Outputs may share data with the inputs.
func Eval(op, domain string, opset int64, attrs Attrs, inputs []*graph.Tensor) ([]*graph.Tensor, error) {
	return EvalLimit(0, op, domain, opset, attrs, inputs)
}

// EvalLimit is Eval refusing, with ErrTooLarge and before computing it,
// any output of more than limit bytes (0: no limit).
func EvalLimit(limit int64, op, domain string, opset int64, attrs Attrs, inputs []*graph.Tensor) (out []*graph.Tensor, err error) {
	k, ok := kernelTable[op]
	if !ok || !defaultDomain(domain) {
		return nil, fmt.Errorf("%w for %s", ErrUnsupported, opName(op, domain))
	}
	if opset <= 0 {
		return nil, fmt.Errorf("%w for %s without an opset version", ErrUnsupported, op)
	}
	for i, t := range inputs {
		if t != nil && elemSize(t.DType) == 0 {
			return nil, fmt.Errorf("%w for %s on %s input %d", ErrUnsupported, op, t.DType, i)
		}
	}
	// A kernel must not take the process down on a malformed model.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("kernel %s failed: %v", op, r)
		}
	}()
	c := &call{op: op, opset: opset, attrs: attrs, in: inputs, limit: limit}
	return k(c)
}

func opName(op, domain string) string {
	if defaultDomain(domain) {
		return op
	}
	return domain + "." + op
}

// call is one evaluation: the node's opset, attributes and inputs.
type call struct {
	op    string
	opset int64
	attrs Attrs
	in    []*graph.Tensor
	limit int64
}

// input returns input i, or nil when it is omitted.
func (c *call) input(i int) *graph.Tensor {
	if i < 0 || i >= len(c.in) {
		return nil
	}
	return c.in[i]
}

// need returns input i, or an error when it is missing.
func (c *call) need(i int) (*graph.Tensor, error) {
	if t := c.input(i); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%s: input %d is missing", c.op, i)
}

// pair returns the two required inputs of a binary operator.
func (c *call) pair() (*graph.Tensor, *graph.Tensor, error) {
	a, err := c.need(0)
	if err != nil {
		return nil, nil, err
	}
	b, err := c.need(1)
	return a, b, err
}

// samePair is pair for operators whose inputs share one element type.
func (c *call) samePair() (*graph.Tensor, *graph.Tensor, error) {
	a, b, err := c.pair()
	if err == nil && a.DType != b.DType {
		err = c.invalid("inputs of types %s and %s", a.DType, b.DType)
	}
	return a, b, err
}

func (c *call) attr(name string) *graph.Attr {
	if c.attrs == nil {
		return nil
	}
	return c.attrs.Attr(name)
}

// attrInt returns an integer attribute, def when absent.
func (c *call) attrInt(name string, def int64) (int64, error) {
	a := c.attr(name)
	if a == nil {
		return def, nil
	}
	if a.Type != graph.AttrInt {
		return 0, fmt.Errorf("%w: %s attribute %s is not an int", ErrUnsupported, c.op, name)
	}
	return a.Int, nil
}

// attrInts returns an integer-list attribute and whether it is present.
func (c *call) attrInts(name string) ([]int64, bool, error) {
	a := c.attr(name)
	if a == nil {
		return nil, false, nil
	}
	if a.Type != graph.AttrInts {
		return nil, false, fmt.Errorf("%w: %s attribute %s is not a list of ints", ErrUnsupported, c.op, name)
	}
	return a.Ints, true, nil
}

// unsupported reports a combination this package does not implement.
func (c *call) unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s (opset %d): %s", ErrUnsupported, c.op, c.opset, fmt.Sprintf(format, args...))
}

// invalid reports inputs or attributes the specification does not allow.
func (c *call) invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.op, fmt.Sprintf(format, args...))
}

// reserve checks, before any work, that an output of dtype and dims fits
// the limit.
func (c *call) reserve(dt graph.DataType, dims []int64) error {
	n, err := numElements(dims)
	if err != nil {
		return c.invalid("%v", err)
	}
	size := n * int64(elemSize(dt))
	if n > 0 && size/n != int64(elemSize(dt)) {
		return c.invalid("output %v overflows", dims)
	}
	if c.limit > 0 && size > c.limit {
		return fmt.Errorf("%w: %s output %s%v is %d bytes (limit %d)", ErrTooLarge, c.op, dt, dims, size, c.limit)
	}
	return nil
}

// one wraps a single output.
func one(t *graph.Tensor, err error) ([]*graph.Tensor, error) {
	if err != nil {
		return nil, err
	}
	return []*graph.Tensor{t}, nil
}
