package testenv

import (
	"bytes"
	"os"
	"testing"
)

// SameFile reports whether the files at a and b hold the same bytes,
// failing the test when either cannot be read.
func SameFile(t testing.TB, a, b string) bool {
	t.Helper()
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ab, bb)
}

// DirNames returns the names of dir's entries that keep accepts, in
// directory order (nil when there are none), failing the test when dir
// cannot be read.
func DirNames(t testing.TB, dir string, keep func(name string) bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if keep(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}
