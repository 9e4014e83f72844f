// Package testenv finds the data that tests need and is not in the
// repository (fetched by scripts/fetch-testdata.sh into a cache folder).
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// CacheDir is where fetched test data lives: $OPTC_CACHE, or optc under
// the user's cache folder.
func CacheDir() string {
	if d := os.Getenv("OPTC_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "optc")
	}
	return filepath.Join(os.TempDir(), "optc-cache")
}

// Data returns the path of rel under the cache folder. When it is missing
// the test is skipped, except under CI (CI=true), where a missing input is
// a failure: CI must never pass by skipping.
func Data(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(CacheDir(), rel)
	if _, err := os.Stat(p); err != nil {
		msg := "test data " + p + " is missing; run `make testdata` (scripts/fetch-testdata.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// RepoRoot is the root of the optc source tree.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Model returns the path of a model committed under testdata/models.
func Model(name string) string {
	return filepath.Join(RepoRoot(), "testdata", "models", name)
}
