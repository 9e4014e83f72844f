// Package export will write deployable artifacts for ONNX Runtime and
// TensorRT. Nothing is implemented yet; see docs/DESIGN.md.
package export
