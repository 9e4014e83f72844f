package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/tools/ortenv"
)

func TestRuntimeInstallFlags(t *testing.T) {
	var got *RuntimeInstallOptions
	c := newCmdRuntimeInstall(&IO{}, func(o *RuntimeInstallOptions) error { got = o; return nil })
	c.SetArgs([]string{"--version", "1.24.1", "--platform", "linux/arm64,all", "--registry", "http://mirror/", "--force"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	o := got.Install
	if o.Version != "1.24.1" || o.Registry != "http://mirror/" || !o.Force || len(o.Platforms) != 4 || o.Platforms[0] != (install.Platform{OS: "linux", Arch: "arm64"}) {
		t.Errorf("options %+v", o)
	}
}

func TestRuntimeInstallRefusals(t *testing.T) {
	t.Setenv("OPTC_CACHE", t.TempDir())
	status, out, errOut := run(t, "runtime", "install", "--platform", "linux")
	failsCleanly(t, status, 2, out, errOut, `--platform: platform "linux": want os/arch`)
	status, out, errOut = run(t, "runtime", "install", "--platform", "darwin/amd64")
	failsCleanly(t, status, 1, out, errOut, "has no library for darwin/amd64")
	status, out, errOut = run(t, "runtime", "install", "--version", "1.23.2")
	failsCleanly(t, status, 1, out, errOut, "onnxruntime-node 1.23.2: optc carries no pinned sha256")
	status, out, errOut = run(t, "runtime", "install", "--registry", "http://127.0.0.1:1/")
	failsCleanly(t, status, 1, out, errOut, "http://127.0.0.1:1/onnxruntime-node/-/onnxruntime-node-1.24.1.tgz")
	// No registry configured and no npm to ask: optc names none of its own.
	for _, e := range install.RegistryEnv {
		t.Setenv(e, "")
	}
	t.Setenv("PATH", t.TempDir())
	status, out, errOut = run(t, "runtime", "install")
	failsCleanly(t, status, 1, out, errOut, "no npm registry to fetch ONNX Runtime from: set --registry or OPTC_NPM_REGISTRY")
	if !strings.Contains(errOut, "--tarball FILE") {
		t.Errorf("the error names no --tarball: %q", errOut)
	}
	status, out, _ = run(t, "runtime", "list")
	if status != 0 || !strings.Contains(out, "no ONNX Runtime library in ") {
		t.Errorf("list of an empty cache: status %d, %q", status, out)
	}
}

// TestRuntimeInstallAndList installs the real library (this machine's and
// linux/arm64) from an npm-shaped server holding the cached tarball into
// an empty cache, then lists it.
func TestRuntimeInstallAndList(t *testing.T) {
	registryURL, _ := ortenv.Registry(t)
	cache := t.TempDir()
	t.Setenv("OPTC_CACHE", cache)
	t.Setenv("OPTC_NPM_REGISTRY", registryURL)
	status, out, errOut := run(t, "runtime", "install", "--platform", "linux/amd64,linux/arm64")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ONNX Runtime 1.24.1 linux/amd64: "+cache) || !strings.Contains(lines[1], "linux/arm64") ||
		!strings.Contains(out, "fetched from "+registryURL) {
		t.Errorf("install printed %q", out)
	}
	if errOut != "" {
		t.Errorf("install wrote %q to stderr, which is not a terminal", errOut)
	}
	status, out, _ = run(t, "runtime", "install", "--platform", "linux/arm64")
	if status != 0 || !strings.Contains(out, "already installed, sha256 verified") {
		t.Errorf("second install: status %d, %q", status, out)
	}
	status, out, _ = run(t, "runtime", "list", "--json")
	var list []install.Cached
	if err := json.Unmarshal([]byte(out), &list); status != 0 || err != nil {
		t.Fatalf("list --json: status %d, %v: %s", status, err, out)
	}
	if len(list) != 2 || list[0].Platform != "linux/amd64" || list[0].Status != "verified" || list[1].Platform != "linux/arm64" || list[1].Status != "verified" {
		t.Errorf("list: %+v", list)
	}
}

func TestVersionCommit(t *testing.T) {
	defer func(v, c, m string) { Version, Commit, Modified = v, c, m }(Version, Commit, Modified)
	Version, Commit, Modified = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "true"
	b := ReadBuildInfo()
	if b.Version != "v1.2.3" {
		t.Errorf("version %q, want the link-time v1.2.3", b.Version)
	}
	_, out, _ := run(t, "version")
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(first, "optc v1.2.3 (commit ") || (b.Commit == Commit && !strings.HasSuffix(first, "modified)")) {
		t.Errorf("version line %q", first)
	}
}
