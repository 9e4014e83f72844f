//go:build !(linux && cgo)

package ort

// TrimMemory does nothing where the C allocator is not glibc's (see
// trim_glibc.go).
func TrimMemory() {}

// boundMallocHeap does nothing where the C allocator is not glibc's (see
// trim_glibc.go).
func boundMallocHeap() {}
