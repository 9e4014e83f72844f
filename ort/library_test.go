package ort

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort/install"
)

func TestCandidatesOrder(t *testing.T) {
	t.Setenv("OPTC_ORT_LIB", "/env/a.so")
	t.Setenv("ONNXRUNTIME_SHARED_LIBRARY_PATH", "/env/b.so")
	t.Setenv("OPTC_CACHE", "/cache")
	cs := candidates("/flag.so")
	cached, ok := install.LibraryPath("/cache", LibraryVersion, install.Current())
	if !ok || !strings.HasPrefix(cached, "/cache/onnxruntime/1.24.1/"+runtime.GOOS+"-"+runtime.GOARCH+"/libonnxruntime") {
		t.Fatalf("cache path %q (pinned: %v), want under /cache/onnxruntime/1.24.1/%s-%s/", cached, ok, runtime.GOOS, runtime.GOARCH)
	}
	want := []string{"/flag.so", "/env/a.so", "/env/b.so", cached, "libonnxruntime.so.1", "libonnxruntime.so"}
	if len(cs) != len(want) {
		t.Fatalf("%d candidates, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if c.path != want[i] {
			t.Errorf("candidate %d is %s, want %s", i, c.path, want[i])
		}
		if c.explicit != (i < 3) {
			t.Errorf("candidate %s: explicit %v", c.path, c.explicit)
		}
	}
}

func TestLibraryErrorSaysWhereAndHow(t *testing.T) {
	err := libraryError([]string{"/x.so (--ort-lib): not found"})
	for _, want := range []string{"/x.so", "--ort-lib", FetchCommand, LibraryVersion} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestInitFailures runs Init in fresh processes (it loads the library once
// per process) with paths that do not work.
func TestInitFailures(t *testing.T) {
	if os.Getenv("OPTC_INIT_CHILD") != "" {
		_, err := Init(os.Getenv("OPTC_INIT_CHILD"))
		if err == nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(err.Error())
		os.Exit(0)
	}
	bad := filepath.Join(t.TempDir(), "libonnxruntime.so")
	os.WriteFile(bad, bytes.Repeat([]byte("not a library "), 100), 0o644)
	for _, c := range []struct{ flag, want string }{
		{"/no/such/libonnxruntime.so", "/no/such/libonnxruntime.so (--ort-lib): not found"},
		{bad, "invalid ELF header"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInitFailures$")
		cmd.Env = append(os.Environ(), "OPTC_INIT_CHILD="+c.flag)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: child failed: %v (%s)", c.flag, err, out)
		}
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), FetchCommand) {
			t.Errorf("%s: error %q lacks %q or the fetch command", c.flag, out, c.want)
		}
	}
}
