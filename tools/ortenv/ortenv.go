// Package ortenv gives tests the ONNX Runtime library. It is separate from
// testenv so that graph's own tests, which testenv serves, do not depend on
// the runtime.
package ortenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
)

// Require loads the ONNX Runtime library (see ort.Init) or skips the test
// when it is missing; under CI (CI=true) a missing library is a failure.
func Require(t testing.TB) {
	t.Helper()
	if _, err := ort.InitLocal(""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Tarball returns a local copy of the pinned onnxruntime-node tarball
// (install.DefaultVersion) under the cache folder's npm/, downloading it
// from the npm registry (install.Registry) and checking it the first time,
// so that tests of the install path do not download on every run. Without
// a network the test is skipped, except under CI=true, where it fails.
func Tarball(t testing.TB) string {
	t.Helper()
	p := filepath.Join(install.CacheDir(), "npm", "onnxruntime-node-"+install.DefaultVersion+".tgz")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Logf("fetching onnxruntime-node %s into %s (once)", install.DefaultVersion, p)
	if err := install.FetchTarball(context.Background(), install.Options{}, p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return p
}

// Registry serves the pinned tarball (Tarball) where an npm registry has
// it, standing in for the public npm registry or a mirror; it returns the
// registry's URL and a count of the requests it got. The server stops when
// the test ends.
func Registry(t testing.TB) (url string, hits *atomic.Int32) {
	t.Helper()
	tgz := Tarball(t)
	hits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/onnxruntime-node/-/"+path.Base(tgz) {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, tgz)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}
