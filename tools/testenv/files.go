package testenv

import (
	"bytes"
	"os"
	"testing"
)

// ReadFile returns the contents of the file at path, failing the test
// when it cannot be read.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SameFile reports whether the files at a and b hold the same bytes,
// failing the test when either cannot be read.
func SameFile(t testing.TB, a, b string) bool {
	t.Helper()
	return bytes.Equal(ReadFile(t, a), ReadFile(t, b))
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
