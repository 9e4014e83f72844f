package ort_test

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/tools/ortenv"
)

// TestInitFetchesOnFirstUse runs Init in fresh processes with an empty
// cache and an npm registry that serves the real tarball (a cached copy):
// Init fetches and loads the library with one line of notice, and does
// not with OPTC_NO_DOWNLOAD=1 or when InitLocal is called.
func TestInitFetchesOnFirstUse(t *testing.T) {
	if mode := os.Getenv("OPTC_FETCH_CHILD"); mode != "" {
		var p string
		var err error
		if mode == "local" {
			p, err = ort.InitLocal("")
		} else {
			p, err = ort.Init("")
		}
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(0)
		}
		v, _ := ort.Version()
		os.Stdout.WriteString("loaded " + v + " " + p)
		os.Exit(0)
	}
	if runtime.GOOS != "linux" {
		t.Skip("the system library path may hold a library on this OS")
	}
	registryURL, hits := ortenv.Registry(t)
	child := func(mode, cache string, env ...string) (stdout, stderr string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInitFetchesOnFirstUse$")
		cmd.Env = append(os.Environ(), "OPTC_FETCH_CHILD="+mode, "OPTC_CACHE="+cache, "OPTC_NPM_REGISTRY="+registryURL,
			"OPTC_ORT_LIB=", "ONNXRUNTIME_SHARED_LIBRARY_PATH=", "OPTC_NO_DOWNLOAD=")
		cmd.Env = append(cmd.Env, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("child failed: %v (%s %s)", err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}

	cache := t.TempDir()
	out, _ := child("fetch", cache, ort.NoDownloadEnv+"=1")
	if !strings.HasPrefix(out, "error: ") || !strings.Contains(out, ort.FetchCommand) || hits.Load() != 0 {
		t.Errorf("with %s=1: %q after %d requests; want the error naming %q and no request", ort.NoDownloadEnv, out, hits.Load(), ort.FetchCommand)
	}
	out, _ = child("local", cache)
	if !strings.HasPrefix(out, "error: ") || hits.Load() != 0 {
		t.Errorf("InitLocal: %q after %d requests; want an error and no request", out, hits.Load())
	}

	out, stderr := child("fetch", cache)
	want, _ := install.LibraryPath(cache, ort.LibraryVersion, install.Current())
	if out != "loaded "+ort.LibraryVersion+" "+want {
		t.Errorf("first use: %q, want %q", out, "loaded "+ort.LibraryVersion+" "+want)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, registryURL) || !strings.Contains(stderr, ort.NoDownloadEnv+"=1") {
		t.Errorf("first use: notice %q, want one line naming the registry and %s", stderr, ort.NoDownloadEnv)
	}
	out, stderr = child("fetch", cache)
	if out != "loaded "+ort.LibraryVersion+" "+want || stderr != "" || hits.Load() != 1 {
		t.Errorf("second use: %q, stderr %q, %d requests; want the cached library, quietly", out, stderr, hits.Load())
	}
}
