package ort

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// NCHWcBlock is the channel block of ONNX Runtime's NCHWc CPU kernels
// (MLAS) on this CPU: 16 floats with AVX-512F, 8 on other x86-64 CPUs,
// 0 elsewhere (optc does not shape models for other CPUs' layouts). A
// model shaped for 16 also suits 8, at the cost of more padding.
func NCHWcBlock() int {
	if runtime.GOARCH != "amd64" {
		return 0
	}
	if cpu.X86.HasAVX512F {
		return 16
	}
	return 8
}

// Int8ChannelAlign is the channel multiple that lets ONNX Runtime's CPU
// provider run an INT8 conv with symmetric int8 weights on MLAS's
// symmetric (indirect) conv kernels instead of its generic ones: a
// depthwise conv needs a multiple of 16 channels, a dense conv a multiple
// of 4 input and 8 output channels (at least 16); a multiple of 16 meets
// all three. Those kernels exist for x86-64 with AVX2 or later; 0
// elsewhere (not measured there).
func Int8ChannelAlign() int {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		return 0
	}
	return 16
}
