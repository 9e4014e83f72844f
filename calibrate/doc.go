// Package calibrate will collect activation ranges for INT8 quantization by
// running the model in ONNX Runtime over calibration data. Nothing is
// implemented yet; see docs/DESIGN.md.
package calibrate
