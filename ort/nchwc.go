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
