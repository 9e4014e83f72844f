package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

const testVersion = "0.0.0-test"

var (
	linuxX64 = Platform{"linux", "amd64"}
	linuxArm = Platform{"linux", "arm64"}
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// fakeRelease builds an onnxruntime-node-shaped tarball holding two
// "libraries" and registers its pins under testVersion.
func fakeRelease(t *testing.T) (tgz []byte, libs map[Platform][]byte) {
	t.Helper()
	libs = map[Platform][]byte{
		linuxX64: bytes.Repeat([]byte("x64 library "), 5000),
		linuxArm: bytes.Repeat([]byte("arm64 library "), 3000),
	}
	members := map[Platform]string{
		linuxX64: "package/bin/napi-v6/linux/x64/libonnxruntime.so.1",
		linuxArm: "package/bin/napi-v6/linux/arm64/libonnxruntime.so.1",
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	add("package/README.md", []byte("readme"))
	add(members[linuxX64], libs[linuxX64])
	add("package/lib/index.js", []byte("js"))
	add(members[linuxArm], libs[linuxArm])
	tw.Close()
	gz.Close()
	tgz = buf.Bytes()
	rel := release{tarballSHA256: sum(tgz), tarballSize: int64(len(tgz)), libraries: map[Platform]library{}}
	for p, b := range libs {
		rel.libraries[p] = library{member: members[p], name: "libonnxruntime.so.1", sha256: sum(b), size: int64(len(b))}
	}
	releases[testVersion] = rel
	t.Cleanup(func() { delete(releases, testVersion) })
	return tgz, libs
}

// registry serves body at the tarball's npm path and counts requests.
func registry(t *testing.T, body func() []byte) (string, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != "/onnxruntime-node/-/onnxruntime-node-"+testVersion+".tgz" {
			http.NotFound(w, r)
			return
		}
		w.Write(body())
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/", &n
}

// files lists every file under dir, temporaries included.
func files(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestInstallFetchesVerifiesAndReuses(t *testing.T) {
	tgz, libs := fakeRelease(t)
	reg, hits := registry(t, func() []byte { return tgz })
	cache := t.TempDir()
	var notice bytes.Buffer
	o := Options{Version: testVersion, Platforms: []Platform{linuxX64, linuxArm}, CacheDir: cache, Registry: reg, Notice: &notice}
	got, err := Install(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests for two platforms, want 1", hits.Load())
	}
	if len(got) != 2 {
		t.Fatalf("installed %d libraries, want 2", len(got))
	}
	for _, in := range got {
		want, _ := LibraryPath(cache, testVersion, in.Platform)
		if in.Path != want {
			t.Errorf("%s installed at %s, want %s", in.Platform, in.Path, want)
		}
		b, err := os.ReadFile(in.Path)
		if err != nil || !bytes.Equal(b, libs[in.Platform]) {
			t.Errorf("%s: library content differs from the tarball's (%v)", in.Path, err)
		}
		if !strings.HasSuffix(in.Source, ".tgz") {
			t.Errorf("%s: source %q, want the tarball URL", in.Platform, in.Source)
		}
	}
	if n := len(files(t, cache)); n != 2 {
		t.Errorf("cache holds %d files, want the 2 libraries only: %v", n, files(t, cache))
	}
	if !strings.Contains(notice.String(), reg) || strings.Count(notice.String(), "\n") != 1 {
		t.Errorf("notice %q: want one line naming the registry", notice.String())
	}

	// Installed and verified: no request, no source.
	got, err = Install(context.Background(), o)
	if err != nil || hits.Load() != 1 || got[0].Source != "" {
		t.Errorf("second install: err %v, %d requests, source %q; want no fetch", err, hits.Load(), got[0].Source)
	}

	// A damaged library is fetched again.
	os.WriteFile(got[1].Path, []byte("damaged"), 0o644)
	if _, err := Install(context.Background(), o); err != nil || hits.Load() != 2 {
		t.Errorf("install over a damaged library: err %v, %d requests, want a refetch", err, hits.Load())
	}
	if b, _ := os.ReadFile(got[1].Path); !bytes.Equal(b, libs[got[1].Platform]) {
		t.Error("the damaged library was not replaced")
	}

	list, err := List(cache)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v, %d entries, want 2", err, len(list))
	}
	for _, c := range list {
		if c.Status != "verified" {
			t.Errorf("%s: status %s, want verified", c.Path, c.Status)
		}
	}
}

func TestInstallFailuresLeaveNothing(t *testing.T) {
	tgz, _ := fakeRelease(t)
	flipped := bytes.Clone(tgz)
	flipped[len(flipped)/2] ^= 0xff
	for _, c := range []struct {
		name string
		body []byte
		pin  func(*release)
		want []string
	}{
		{"truncated", tgz[:len(tgz)/2], nil, []string{"truncated", "of " + strconv.Itoa(len(tgz)) + " bytes"}},
		{"corrupted", flipped, nil, []string{".tgz: "}},
		{"tarball digest", tgz, func(r *release) { r.tarballSHA256 = strings.Repeat("0", 64) }, []string{".tgz: sha256 " + sum(tgz), "want " + strings.Repeat("0", 64), "nothing was installed"}},
		{"library digest", tgz, func(r *release) {
			l := r.libraries[linuxArm]
			l.sha256 = strings.Repeat("1", 64)
			r.libraries[linuxArm] = l
		}, []string{"package/bin/napi-v6/linux/arm64/libonnxruntime.so.1: sha256", "want " + strings.Repeat("1", 64), "linux/arm64"}},
		{"missing member", tgz, func(r *release) {
			l := r.libraries[linuxArm]
			l.member = "package/bin/napi-v6/linux/riscv/libonnxruntime.so.1"
			r.libraries[linuxArm] = l
		}, []string{"has no package/bin/napi-v6/linux/riscv/libonnxruntime.so.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := releases[testVersion]
			saved := rel
			saved.libraries = map[Platform]library{}
			for p, l := range rel.libraries {
				saved.libraries[p] = l
			}
			if c.pin != nil {
				c.pin(&rel)
				releases[testVersion] = rel
			}
			defer func() { releases[testVersion] = saved }()
			reg, _ := registry(t, func() []byte { return c.body })
			cache := t.TempDir()
			_, err := Install(context.Background(), Options{Version: testVersion, Platforms: []Platform{linuxX64, linuxArm}, CacheDir: cache, Registry: reg})
			if err == nil {
				t.Fatal("install succeeded")
			}
			for _, w := range append(c.want, reg) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			if f := files(t, cache); len(f) != 0 {
				t.Errorf("a failed install left %v", f)
			}
		})
	}
}

func TestInstallRefusals(t *testing.T) {
	fakeRelease(t)
	reg, hits := registry(t, func() []byte { return nil })
	for _, c := range []struct {
		name string
		o    Options
		want []string
	}{
		{"unpinned version", Options{Version: "9.9.9"}, []string{"onnxruntime-node 9.9.9", "no pinned sha256", DefaultVersion}},
		{"macOS x86-64", Options{Version: DefaultVersion, Platforms: []Platform{{"darwin", "amd64"}}}, []string{"darwin/amd64", "macOS x86-64", "--ort-lib", "linux/amd64"}},
		{"unknown platform", Options{Version: testVersion, Platforms: []Platform{{"plan9", "386"}}}, []string{"plan9/386", "has no library"}},
		{"bad registry", Options{Version: testVersion, Registry: "ftp://mirror"}, []string{`"ftp://mirror"`, "OPTC_NPM_REGISTRY"}},
		{"404", Options{Version: testVersion, Registry: reg + "elsewhere/"}, []string{"GET " + reg + "elsewhere/onnxruntime-node/-/onnxruntime-node-" + testVersion + ".tgz: 404 Not Found"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.CacheDir = t.TempDir()
			if len(c.o.Platforms) == 0 {
				c.o.Platforms = []Platform{linuxX64}
			}
			_, err := Install(context.Background(), c.o)
			if err == nil {
				t.Fatal("install succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if f := files(t, c.o.CacheDir); len(f) != 0 {
				t.Errorf("a refused install left %v", f)
			}
		})
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests, want 1 (the 404)", hits.Load())
	}
}

// The registry comes from the variables, else from npm's own
// configuration; with neither, an error says how to give one.
func TestRegistryEnv(t *testing.T) {
	for _, e := range RegistryEnv {
		t.Setenv(e, "")
	}
	// No npm on PATH: no registry, and the error names the ways out.
	t.Setenv("PATH", t.TempDir())
	if r, err := Registry(); err == nil || !strings.Contains(err.Error(), "--tarball") || !strings.Contains(err.Error(), "OPTC_NPM_REGISTRY") {
		t.Errorf("no npm, no variable: registry %q, error %v", r, err)
	}
	// npm's configuration (an npm that answers config get registry).
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\n[ \"$1 $2 $3\" = 'config get registry' ] && echo https://npm.example/\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if r, err := Registry(); err != nil || r != "https://npm.example/" {
		t.Errorf("registry %s (%v), want npm's configured one", r, err)
	}
	t.Setenv("npm_config_registry", "https://npm2.example/")
	if r, _ := Registry(); r != "https://npm2.example/" {
		t.Errorf("registry %s, want npm's variable", r)
	}
	t.Setenv("OPTC_NPM_REGISTRY", "http://mirror.local/npm")
	r, err := Registry()
	if err != nil || r != "http://mirror.local/npm" {
		t.Errorf("registry %s, want OPTC_NPM_REGISTRY first", r)
	}
	u, err := TarballURL(r, "1.24.1")
	if err != nil || u != "http://mirror.local/npm/onnxruntime-node/-/onnxruntime-node-1.24.1.tgz" {
		t.Errorf("tarball URL %s (%v)", u, err)
	}
}

func TestListStatuses(t *testing.T) {
	fakeRelease(t)
	cache := t.TempDir()
	write := func(rel string, b []byte) string {
		p := filepath.Join(cache, "onnxruntime", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, b, 0o644)
		return p
	}
	write("1.24.1/libonnxruntime.so.1", []byte("old layout"))
	write(testVersion+"/linux-amd64/libonnxruntime.so.1", []byte("not the pinned bytes"))
	write("1.99.0/linux-amd64/libonnxruntime.so.1", []byte("unknown version"))
	write(testVersion+"/linux-arm64/.libonnxruntime.so.1.tmp-123", []byte("temporary"))
	list, err := List(cache)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, c.Version+" "+c.Platform+" "+c.Status)
	}
	want := []string{"0.0.0-test linux/amd64 mismatch", "1.24.1  unused", "1.99.0 linux/amd64 unpinned"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("List gave %q, want %q", got, want)
	}
	if list, err := List(filepath.Join(cache, "none")); err != nil || len(list) != 0 {
		t.Errorf("List of a missing cache: %v, %v; want nothing", list, err)
	}
}

func TestParsePlatform(t *testing.T) {
	if p, err := ParsePlatform("linux/arm64"); err != nil || p != linuxArm {
		t.Errorf("ParsePlatform(linux/arm64) = %v, %v", p, err)
	}
	for _, s := range []string{"linux", "linux/", "/arm64", "linux/arm/v7"} {
		if _, err := ParsePlatform(s); err == nil {
			t.Errorf("ParsePlatform(%q) accepted", s)
		}
	}
}

// TestInstallUsesProxy runs Install in a child process (the standard
// library reads the proxy variables once per process) with HTTP_PROXY
// pointing at a test proxy and a registry host that does not resolve:
// the tarball can only come through the proxy.
func TestInstallUsesProxy(t *testing.T) {
	const registry = "http://npm.registry.invalid/"
	if cache := os.Getenv("OPTC_PROXY_CHILD"); cache != "" {
		fakeRelease(t)
		_, err := Install(context.Background(), Options{Version: testVersion, CacheDir: cache, Registry: registry, Platforms: []Platform{linuxArm}})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	tgz, libs := fakeRelease(t)
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.String())
		if r.URL.String() != registry+"onnxruntime-node/-/onnxruntime-node-"+testVersion+".tgz" {
			http.NotFound(w, r)
			return
		}
		w.Write(tgz)
	}))
	defer proxy.Close()
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestInstallUsesProxy$")
	cmd.Env = append(os.Environ(), "OPTC_PROXY_CHILD="+cache, "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install through the proxy: %v\n%s", err, out)
	}
	if len(asked) != 1 {
		t.Errorf("the proxy was asked for %v, want the tarball once", asked)
	}
	p, _ := LibraryPath(cache, testVersion, linuxArm)
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, libs[linuxArm]) {
		t.Errorf("%s: %v, want the library from the proxied tarball", p, err)
	}
}
