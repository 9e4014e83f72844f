// Package export writes deployable variants of a model.
//
// What is here:
//
//   - ToFloat16 (fp16.go): the float16 variant for TensorRT's strongly
//     typed mode, float32 at the interface, with float32 kept where float16
//     overflows or loses meaning (the tables in fp16_rules.go) and a report
//     of every node kept and why. See docs/tensorrt.md, "fp16 variant".
package export
