package install_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/tools/ortenv"
)

// TestPinnedRelease installs every pinned platform of the real
// onnxruntime-node tarball through an npm-shaped HTTP server holding the
// cached copy: the pins in the binary match what npm publishes.
func TestPinnedRelease(t *testing.T) {
	tgz := ortenv.Tarball(t)
	registryURL, _ := ortenv.Registry(t)
	ps := install.Supported(install.DefaultVersion)
	if len(ps) != 3 {
		t.Errorf("pinned platforms %v, want linux/amd64, linux/arm64, darwin/arm64", ps)
	}
	cache := t.TempDir()
	got, err := install.Install(context.Background(), install.Options{Platforms: ps, CacheDir: cache, Registry: registryURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range got {
		fi, err := os.Stat(in.Path)
		if err != nil || fi.Size() != in.Size {
			t.Errorf("%s: %v, want %d bytes", in.Path, err, in.Size)
		}
	}
	list, err := install.List(cache)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, c := range list {
		rows = append(rows, c.Platform+" "+c.Status)
	}
	want := "darwin/arm64 verified; linux/amd64 verified; linux/arm64 verified"
	if strings.Join(rows, "; ") != want {
		t.Errorf("List gave %q, want %q", strings.Join(rows, "; "), want)
	}

	// The same from the file, without a registry.
	cache2 := t.TempDir()
	if _, err := install.Install(context.Background(), install.Options{CacheDir: cache2, Tarball: tgz, Registry: "http://127.0.0.1:1/"}); err != nil {
		t.Fatalf("install from %s: %v", tgz, err)
	}
}
