// Package export holds the pieces of deployment artifacts that are not
// quantization, for the targets under it to use:
//
//   - ToFloat16 (fp16.go, fp16_rules.go): the float16 variant, float32 at
//     the interface, with float32 kept where float16 overflows (measured
//     ranges) or loses meaning (op rules), and a report of every node kept
//     and why; EmulateFloat16 (fp16_emulate.go) checks it in ORT. See
//     docs/tensorrt.md, "fp16 variant".
//   - TensorRT's legacy calibration cache (trtcache.go: write and read),
//     build_engine.sh (engine.go) and the trtexec report parser
//     (trtexec.go).
//   - Triton model repositories (triton.go) and the batch/thread sweep
//     that chooses their deployment profiles (profile.go).
//   - ONNX Runtime's own format (ortformat.go), written by ORT for the ort
//     and ort-mobile targets, or skipped with the reason where the format
//     cannot hold the model.
//
// The targets themselves are plug-ins in subpackages (export/ort,
// export/tensorrt, export/triton, export/openvino, export/ortmobile), each implementing
// export/target.Target and registered once in export/targets.
package export
