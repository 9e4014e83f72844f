package testenv

import (
	"testing"

	"github.com/optc-dev/optc/internal/procmem"
)

// ProcStatus returns a memory figure of /proc/self/status (Linux) in
// bytes, e.g. VmHWM, the peak RSS of this process.
//
// Benchmarks measure a child's peak RSS with it, not with the ru_maxrss
// that wait4 reports: Go starts children with clone(CLONE_VM|CLONE_VFORK),
// so until exec the child runs on the parent's address space, and Linux
// folds that address space's high-water mark into the child's ru_maxrss.
// VmHWM belongs to the address space exec created.
func ProcStatus(t testing.TB, key string) int64 {
	t.Helper()
	n, ok := procmem.Status(key)
	if !ok {
		t.Fatalf("/proc/self/status has no %s", key)
	}
	return n
}
