//go:build unix

package graph

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps a whole file read-only, so that tensor data is paged in from
// the file on demand rather than copied onto the heap.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if fi.Size() != int64(int(fi.Size())) {
		return nil, nil, fmt.Errorf("%s: too large to map", path)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
