//go:build linux && cgo

package ort

/*
#include <malloc.h>
*/
import "C"

// TrimMemory asks the C allocator to give the memory ORT has freed back
// to the system. Without its arena (Options.NoMemArena) ORT takes each
// run's buffers from glibc's malloc, which keeps what is freed for reuse;
// after many runs of a large model with big, differently sized outputs
// that kept memory grows far past what one run needs (PaddleOCR det's
// calibration runs: about 1.6 GB of RSS above a Go heap of 280 MiB).
// malloc_trim returns the free pages, so the next run starts from what is
// live. It takes a few milliseconds.
func TrimMemory() { C.malloc_trim(0) }
