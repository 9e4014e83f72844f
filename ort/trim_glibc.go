//go:build linux && cgo

package ort

/*
#include <malloc.h>
*/
import "C"

import (
	"os"
	"strings"
)

// TrimMemory asks the C allocator to give the memory ORT has freed back
// to the system. Without its arena (Options.NoMemArena) ORT takes each
// run's buffers from glibc's malloc, which keeps what is freed for reuse;
// after many runs of a large model with big, differently sized outputs
// that kept memory grows far past what one run needs (PaddleOCR det's
// calibration runs: about 1.6 GB of RSS above a Go heap of 280 MiB).
// malloc_trim returns the free pages, so the next run starts from what is
// live. It takes a few milliseconds.
func TrimMemory() { C.malloc_trim(0) }

// mmapThreshold is the allocation size from which glibc's malloc maps
// memory of its own, which free returns to the system at once.
const mmapThreshold = 256 << 10

// boundMallocHeap fixes glibc's mmap threshold at mmapThreshold, unless
// the environment sets it (MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES). By
// default glibc raises the threshold to the size of each mapped block
// freed, up to 32 MiB, so after ORT's first session closes, its next
// sessions' weights and buffers come from the malloc heap, which keeps
// them when they are freed: a ResNet-50 build at 224x224 peaked at 1.67
// GB of RSS with it, 1.40 GB with the threshold fixed, in the same time.
func boundMallocHeap() {
	if os.Getenv("MALLOC_MMAP_THRESHOLD_") != "" || strings.Contains(os.Getenv("GLIBC_TUNABLES"), "mmap_threshold") {
		return
	}
	C.mallopt(C.M_MMAP_THRESHOLD, mmapThreshold)
}
