package quantize

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// autoReduceRange decides reduce-range for the ort target from the CPU
// this runs on: ORT's U8S8 integer kernels saturate their intermediate sums
// with full-range int8 weights on x86 without VNNI (AVX2's vpmaddubsw adds
// pairs of u8*s8 products into int16), so weights are kept to 7 bits there.
// AutoReduceRange is what a nil Options.ReduceRange decides for ort on
// this CPU.
func AutoReduceRange() bool {
	r, _ := autoReduceRange()
	return r
}

func autoReduceRange() (bool, string) {
	return reduceRangeFor(runtime.GOARCH, cpu.X86.HasAVX512VNNI, cpu.X86.HasAVXVNNI)
}

func reduceRangeFor(arch string, avx512vnni, avxvnni bool) (bool, string) {
	if arch != "amd64" && arch != "386" {
		return false, "automatic: " + arch + " is not x86, full-range int8 weights"
	}
	switch {
	case avx512vnni:
		return false, "automatic: this x86 CPU has AVX-512 VNNI, full-range int8 weights"
	case avxvnni:
		return false, "automatic: this x86 CPU has AVX-VNNI, full-range int8 weights"
	}
	return true, "automatic: x86 without AVX-512 VNNI or AVX-VNNI, whose U8S8 kernels saturate with full-range weights; weights kept within ±63"
}
