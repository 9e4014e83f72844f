package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort/install"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// Where Debian's cross packages put each architecture's libraries, and the
// qemu-user binary that runs it.
var cross = map[string]struct{ sysroot, qemu string }{
	"amd64": {"/usr/x86_64-linux-gnu", "qemu-x86_64"},
	"arm64": {"/usr/aarch64-linux-gnu", "qemu-aarch64"},
}

// need fails the test under CI and skips it elsewhere.
func need(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// launcher returns the command prefix that runs a linux/arch binary here.
func launcher(t *testing.T, arch string) []string {
	if arch == runtime.GOARCH && runtime.GOOS == "linux" {
		return nil
	}
	c := cross[arch]
	for _, q := range []string{c.qemu + "-static", c.qemu} {
		if p, err := exec.LookPath(q); err == nil {
			if _, err := os.Stat(c.sysroot); err != nil {
				need(t, c.sysroot+" is missing: install the cross C library (make release-check does: apt-get install qemu-user-static and the cross gcc)")
			}
			return []string{p, "-L", c.sysroot}
		}
	}
	need(t, c.qemu+"-static not found: install qemu-user-static (make release-check does)")
	return nil
}

func TestReleaseBinaries(t *testing.T) {
	dir := os.Getenv("OPTC_RELEASE_DIR")
	if dir == "" {
		t.Skip("OPTC_RELEASE_DIR is not set: make release-check builds the release and runs this test")
	}
	version, bins := checkSums(t, dir)
	head, err := exec.Command("git", "-C", testenv.RepoRoot(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	commit := strings.TrimSpace(string(head))

	// Both platforms' libraries from the one tarball, into a fresh cache.
	cache, home := t.TempDir(), t.TempDir()
	tgz := ortenv.Tarball(t)
	libs := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := install.Platform{OS: "linux", Arch: arch}
		got, err := install.Install(context.Background(), install.Options{Platforms: []install.Platform{p}, CacheDir: cache, Tarball: tgz})
		if err != nil {
			t.Fatal(err)
		}
		libs[arch] = got[0].Path
	}

	model := testenv.Model("mnist_cnn.onnx")
	eval := filepath.Join(testenv.RepoRoot(), "testdata", "mnist", "eval")
	labels, err := data.ReadNpy(filepath.Join(testenv.RepoRoot(), "testdata", "mnist", "eval_labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := labels.Int64s()
	if err != nil {
		t.Fatal(err)
	}

	inspect := map[string]string{}
	logits := map[string][]float32{}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			pre := launcher(t, arch)
			optc := func(args ...string) string {
				t.Helper()
				argv := append(append(pre[:len(pre):len(pre)], bins[arch]), args...)
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), "HOME="+home, "OPTC_CACHE="+cache, "OPTC_NO_DOWNLOAD=1", "OPTC_ORT_LIB=", "ONNXRUNTIME_SHARED_LIBRARY_PATH=")
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("optc %s: %v: %s", strings.Join(args, " "), err, errb.String())
				}
				return out.String()
			}

			v := optc("version")
			first := regexp.QuoteMeta("optc "+version+" (commit "+commit) + `(, modified)?\)`
			for _, re := range []string{"^" + first + "\n", "\ngo   go1\\.[0-9.]+ linux/" + arch + "\n", "\nort  1\\.24\\.1 \\(" + regexp.QuoteMeta(libs[arch]) + "\\)\n"} {
				if !regexp.MustCompile(re).MatchString(v) {
					t.Errorf("version output %q does not match %s", v, re)
				}
			}
			inspect[arch] = optc("inspect", model)
			if !strings.Contains(inspect[arch], "float32[N,1,28,28]") {
				t.Errorf("inspect output %q lacks the input", inspect[arch])
			}
			list := optc("runtime", "list")
			if !regexp.MustCompile(`(?m)^1\.24\.1 +linux/` + arch + ` +verified `).MatchString(list) {
				t.Errorf("runtime list %q: want linux/%s verified", list, arch)
			}

			out := filepath.Join(t.TempDir(), "out")
			optc("run", model, "--data", eval, "--image-color", "gray", "-o", out)
			l, err := data.ReadNpy(filepath.Join(out, "logits.npy"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := l.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			if len(f) != len(want)*10 {
				t.Fatalf("logits hold %d values, want %d", len(f), len(want)*10)
			}
			correct := 0
			for i, w := range want {
				if compare.Argmax(f[i*10:i*10+10]) == int(w) {
					correct++
				}
			}
			acc := float64(correct) / float64(len(want))
			t.Logf("linux/%s: %d of %d eval digits right (%.1f%%)", arch, correct, len(want), 100*acc)
			if acc < 0.95 {
				t.Errorf("linux/%s: accuracy %.1f%%, want >= 95%% (98.8%% on linux/amd64)", arch, 100*acc)
			}
			logits[arch] = f
		})
	}
	if a, b := inspect["amd64"], inspect["arm64"]; a != "" && b != "" && a != b {
		t.Errorf("inspect differs between the architectures:\n%s\n---\n%s", a, b)
	}
	if a, b := logits["amd64"], logits["arm64"]; a != nil && b != nil {
		var maxDiff float64
		for i := range a {
			maxDiff = math.Max(maxDiff, math.Abs(float64(a[i]-b[i])))
		}
		agree := 0
		for i := 0; i < len(a)/10; i++ {
			if compare.Argmax(a[i*10:i*10+10]) == compare.Argmax(b[i*10:i*10+10]) {
				agree++
			}
		}
		t.Logf("logits amd64 vs arm64: max |diff| %.3g, top-1 agreement %d of %d", maxDiff, agree, len(a)/10)
		if maxDiff > 1e-3 || agree != len(a)/10 {
			t.Errorf("arm64 logits differ from amd64's: max |diff| %.3g, top-1 agreement %d of %d", maxDiff, agree, len(a)/10)
		}
	}
}

// checkSums reads SHA256SUMS, checks every file it lists, and returns the
// release version and the binary of each architecture.
func checkSums(t *testing.T, dir string) (string, map[string]string) {
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^optc-(v[0-9][^ ]*)-linux-(amd64|arm64)$`)
	bins := map[string]string{}
	version := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		m := name.FindStringSubmatch(file)
		if !ok || m == nil {
			t.Fatalf("SHA256SUMS line %q: want <sha256>  optc-VERSION-linux-ARCH", line)
		}
		content, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(content); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, SHA256SUMS says %s", file, got, sum)
		}
		if version != "" && m[1] != version {
			t.Errorf("%s: version %s, another binary has %s", file, m[1], version)
		}
		version = m[1]
		bins[m[2]] = filepath.Join(dir, file)
	}
	if len(bins) != 2 {
		t.Fatalf("SHA256SUMS lists %v, want linux-amd64 and linux-arm64", bins)
	}
	return version, bins
}
