// Package quantize will insert QuantizeLinear/DequantizeLinear pairs for a
// deployment target from calibrated ranges. Nothing is implemented yet; see
// docs/DESIGN.md.
package quantize
