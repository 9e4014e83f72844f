// Package install provisions the ONNX Runtime shared library: it fetches
// the official onnxruntime-node tarball from an npm registry over HTTPS,
// checks the tarball's and the library's sha256 against the digests pinned
// in this package, and unpacks only the library into optc's cache folder.
// It is also the one place that knows where in the cache a library lives
// (LibraryPath), which the ort package looks up before anything else.
//
// It uses no cgo and loads nothing: loading is the ort package's job.
package install

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// RegistryEnv lists the variables that override the registry, first set wins.
var RegistryEnv = []string{"OPTC_NPM_REGISTRY", "npm_config_registry", "NPM_CONFIG_REGISTRY"}

// Platform is an operating system and architecture, spelled as Go does
// (linux/amd64, darwin/arm64).
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// dir is the platform's folder name in the cache.
func (p Platform) dir() string { return p.OS + "-" + p.Arch }

// Current is the platform optc runs on.
func Current() Platform { return Platform{runtime.GOOS, runtime.GOARCH} }

// Supported lists the platforms optc has pinned libraries for in version,
// sorted.
func Supported(version string) []Platform {
	var ps []Platform
	for p := range releases[version].libraries {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	return ps
}

// Versions lists the onnxruntime-node versions optc carries digests for.
func Versions() []string {
	var vs []string
	for v := range releases {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}

// ParsePlatform reads "os/arch" ("linux/arm64").
func ParsePlatform(s string) (Platform, error) {
	osName, arch, ok := strings.Cut(s, "/")
	if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/arm64", s)
	}
	return Platform{osName, arch}, nil
}

// CacheDir is optc's cache folder: $OPTC_CACHE, else optc under the user's
// cache folder (~/.cache/optc on Linux, ~/Library/Caches/optc on macOS).
func CacheDir() string {
	if d := os.Getenv("OPTC_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "optc")
	}
	return filepath.Join(os.TempDir(), "optc-cache")
}

// RuntimeDir is the folder that holds every cached library: what a CI
// cache step keeps.
func RuntimeDir(cache string) string { return filepath.Join(cache, "onnxruntime") }

// LibraryPath is where version's library for p lives under cache, whether
// or not it is there. ok is false when optc has no pinned library for
// that version and platform.
func LibraryPath(cache, version string, p Platform) (path string, ok bool) {
	lib, ok := releases[version].libraries[p]
	if !ok {
		return "", false
	}
	return filepath.Join(RuntimeDir(cache), version, p.dir(), lib.name), true
}

// Registry is the npm registry to fetch from: the first of RegistryEnv
// that is set, else the registry npm itself is configured with (npm
// config get registry) when npm is installed. optc names no registry of
// its own: a machine without npm and without those variables gets an
// error that says how to give one, or a tarball.
func Registry() (string, error) {
	for _, e := range RegistryEnv {
		if v := os.Getenv(e); v != "" {
			return v, nil
		}
	}
	if npm, err := exec.LookPath("npm"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, npm, "config", "get", "registry").Output()
		if v := strings.TrimSpace(string(out)); err == nil && v != "" && v != "undefined" {
			return v, nil
		}
	}
	return "", fmt.Errorf("no npm registry to fetch ONNX Runtime from: set --registry or %s, install npm (its configured registry is used), or give --tarball FILE (onnxruntime-node's package)", strings.Join(RegistryEnv, " or "))
}

// TarballURL is where registry serves onnxruntime-node's tarball of version.
func TarballURL(registry, version string) (string, error) {
	u, err := url.Parse(registry)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("npm registry %q is not an http(s) URL (set by --registry, %s or npm's configuration)", registry, strings.Join(RegistryEnv, ", "))
	}
	return strings.TrimRight(registry, "/") + "/onnxruntime-node/-/onnxruntime-node-" + version + ".tgz", nil
}

// Options says what Install installs and from where.
type Options struct {
	Version   string     // onnxruntime-node version; DefaultVersion when empty
	Platforms []Platform // Current() when empty
	CacheDir  string     // CacheDir() when empty
	Registry  string     // Registry() when empty
	Tarball   string     // a local copy of the tarball: read instead of downloading
	Force     bool       // fetch again even when the library is there and verified
	Client    *http.Client
	// Notice, when not nil, gets one line before a download starts.
	Notice io.Writer
}

// Installed is one library Install made sure of.
type Installed struct {
	Version  string   `json:"version"`
	Platform Platform `json:"-"`
	Path     string   `json:"path"`
	SHA256   string   `json:"sha256"`
	Size     int64    `json:"bytes"`
	// Source is the tarball's URL or file when it was fetched now, empty
	// when the library was already there and verified.
	Source string `json:"source,omitempty"`
}

// Install makes sure the library of each platform is in the cache and
// matches its pinned sha256, fetching the tarball once for all that are
// missing. Nothing is written unless every check passes: the libraries
// appear by rename, whole, after the tarball and each library verified.
func Install(ctx context.Context, o Options) ([]Installed, error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if len(o.Platforms) == 0 {
		o.Platforms = []Platform{Current()}
	}
	if o.CacheDir == "" {
		o.CacheDir = CacheDir()
	}
	rel, ok := releases[o.Version]
	if !ok {
		return nil, fmt.Errorf("onnxruntime-node %s: optc carries no pinned sha256 for it (known: %s), so it will not install it; use --ort-lib for a library of your own", o.Version, strings.Join(Versions(), ", "))
	}
	var out []Installed
	need := map[string]int{} // tarball member -> index in out
	for _, p := range o.Platforms {
		lib, ok := rel.libraries[p]
		if !ok {
			why := "its tarball has no library for it"
			if m, ok := notShipped[p]; ok {
				why = m.why
			}
			return nil, fmt.Errorf("onnxruntime-node %s has no library for %s: %s (it has %s); build ONNX Runtime >= 1.24 yourself and point --ort-lib or OPTC_ORT_LIB at it", o.Version, p, why, platformList(Supported(o.Version)))
		}
		path, _ := LibraryPath(o.CacheDir, o.Version, p)
		in := Installed{Version: o.Version, Platform: p, Path: path, SHA256: lib.sha256, Size: lib.size}
		if _, dup := need[lib.member]; dup || slices.ContainsFunc(out, func(i Installed) bool { return i.Path == path }) {
			continue
		}
		if !o.Force && verify(path, lib) == nil {
			out = append(out, in)
			continue
		}
		need[lib.member] = len(out)
		out = append(out, in)
	}
	if len(need) == 0 {
		return out, nil
	}
	src, body, err := open(ctx, o, rel)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if err := unpack(src, body, rel, o.Version, need, out); err != nil {
		return nil, err
	}
	for _, i := range need {
		out[i].Source = src
	}
	return out, nil
}

func platformList(ps []Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// open returns the tarball's name (URL or file) and its bytes.
func open(ctx context.Context, o Options, rel release) (string, io.ReadCloser, error) {
	mb := float64(rel.tarballSize) / 1e6
	if o.Tarball != "" {
		f, err := os.Open(o.Tarball)
		if err != nil {
			return "", nil, fmt.Errorf("onnxruntime-node tarball: %w", err)
		}
		return o.Tarball, f, nil
	}
	reg := o.Registry
	if reg == "" {
		var err error
		if reg, err = Registry(); err != nil {
			return "", nil, err
		}
	}
	u, err := TarballURL(reg, o.Version)
	if err != nil {
		return "", nil, err
	}
	if o.Notice != nil {
		fmt.Fprintf(o.Notice, "optc: fetching ONNX Runtime %s from %s (%.0f MB, checked against pinned sha256) into %s\n", o.Version, u, mb, RuntimeDir(o.CacheDir))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", u, err)
	}
	c := o.Client
	if c == nil {
		c = defaultClient()
	}
	resp, err := c.Do(req)
	if err != nil {
		// url.Error already names the method and URL.
		return "", nil, fmt.Errorf("fetching ONNX Runtime: %w (set HTTPS_PROXY, or OPTC_NPM_REGISTRY to a reachable npm mirror)", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return "", nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return u, resp.Body, nil
}

// defaultClient honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY (the default
// transport's Proxy) and gives up on a server that does not answer.
func defaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// countingHash hashes and counts what is read through it.
type countingHash struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingHash) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// pending is a library written to a temporary file, not yet verified.
type pending struct {
	f    *os.File
	tmp  *atomicfile.Temp
	sum  string
	size int64
}

func (p *pending) drop() {
	p.f.Close()
	os.Remove(p.f.Name())
	p.tmp.Drop()
}

// unpack reads the whole tarball once: the wanted members go to temporary
// files beside their destinations; then the tarball's size and sha256 and
// each member's are checked, and only when all match are the members
// renamed into place.
func unpack(src string, body io.Reader, rel release, version string, need map[string]int, out []Installed) (err error) {
	raw := &countingHash{r: io.LimitReader(body, rel.tarballSize+1), h: sha256.New()}
	got := map[string]*pending{}
	defer func() {
		if err != nil {
			for _, p := range got {
				p.drop()
			}
		}
	}()
	truncated := func(e error) error {
		return fmt.Errorf("%s: %v after %d of %d bytes (a truncated or corrupted download; nothing was installed)", src, e, raw.n, rel.tarballSize)
	}
	gz, err := gzip.NewReader(raw)
	if err != nil {
		return truncated(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return truncated(err)
		}
		i, ok := need[h.Name]
		if !ok || h.Typeflag != tar.TypeReg || got[h.Name] != nil {
			continue
		}
		p, err := extract(tr, out[i].Path, truncated)
		if err != nil {
			return err
		}
		got[h.Name] = p
	}
	// The tarball's digest covers every byte, so read past the tar's end.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return truncated(err)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return truncated(err)
	}
	if raw.n != rel.tarballSize {
		return fmt.Errorf("%s: %d bytes, want %d for onnxruntime-node %s (nothing was installed)", src, raw.n, rel.tarballSize, version)
	}
	if sum := hex.EncodeToString(raw.h.Sum(nil)); sum != rel.tarballSHA256 {
		return fmt.Errorf("%s: sha256 %s, want %s pinned for onnxruntime-node %s: the download is corrupted or not the published tarball (nothing was installed)", src, sum, rel.tarballSHA256, version)
	}
	members := make([]string, 0, len(need))
	for m := range need {
		members = append(members, m)
	}
	sort.Strings(members)
	for _, m := range members {
		i := need[m]
		p := got[m]
		if p == nil {
			return fmt.Errorf("%s: has no %s (nothing was installed)", src, m)
		}
		if p.sum != out[i].SHA256 || p.size != out[i].Size {
			return fmt.Errorf("%s: %s: sha256 %s (%d bytes), want %s (%d bytes) pinned for %s (nothing was installed)", src, m, p.sum, p.size, out[i].SHA256, out[i].Size, out[i].Platform)
		}
	}
	for _, m := range members {
		p, dst := got[m], out[need[m]].Path
		if err := p.f.Close(); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		if err := p.tmp.Commit(func() error { return os.Rename(p.f.Name(), dst) }); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		delete(got, m)
	}
	return nil
}

// extract copies one tar member to a temporary file beside dst, hashing
// it. A failure to read the tarball is reported by truncated.
func extract(r io.Reader, dst string, truncated func(error) error) (*pending, error) {
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runtime cache: %w", err)
	}
	f, tmp, err := atomicfile.CreateTemp(dst)
	if err != nil {
		return nil, fmt.Errorf("runtime cache: %w", err)
	}
	p := &pending{f: f, tmp: tmp}
	h := sha256.New()
	w := &writeErr{w: io.MultiWriter(f, h)}
	n, err := io.Copy(w, r)
	if err != nil && w.err == nil {
		p.drop()
		return nil, truncated(err)
	}
	if err == nil {
		err = f.Chmod(0o755)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		p.drop()
		return nil, fmt.Errorf("%s: %w", dst, err)
	}
	p.sum, p.size = hex.EncodeToString(h.Sum(nil)), n
	return p, nil
}

// writeErr remembers a write failure, to tell it from a read failure.
type writeErr struct {
	w   io.Writer
	err error
}

func (w *writeErr) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// verify checks the file at path against lib's size and sha256.
func verify(path string, lib library) error {
	sum, size, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if size != lib.size || sum != lib.sha256 {
		return fmt.Errorf("%s: sha256 %s (%d bytes), want %s (%d bytes)", path, sum, size, lib.sha256, lib.size)
	}
	return nil
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// FetchTarball downloads version's tarball (o.Version, o.Registry) to dst
// after checking its size and sha256; nothing is written on a mismatch.
// It is how a mirror or a test seeds a local copy for Options.Tarball.
func FetchTarball(ctx context.Context, o Options, dst string) (err error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	rel, ok := releases[o.Version]
	if !ok {
		return fmt.Errorf("onnxruntime-node %s: optc carries no pinned sha256 for it (known: %s)", o.Version, strings.Join(Versions(), ", "))
	}
	o.Tarball = ""
	src, body, err := open(ctx, o, rel)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, tmp, err := atomicfile.CreateTemp(dst)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			tmp.Drop()
		}
	}()
	raw := &countingHash{r: io.LimitReader(body, rel.tarballSize+1), h: sha256.New()}
	if _, err := io.Copy(f, raw); err != nil {
		return fmt.Errorf("%s: %w after %d of %d bytes", src, err, raw.n, rel.tarballSize)
	}
	if sum := hex.EncodeToString(raw.h.Sum(nil)); raw.n != rel.tarballSize || sum != rel.tarballSHA256 {
		return fmt.Errorf("%s: sha256 %s (%d bytes), want %s (%d bytes) pinned for onnxruntime-node %s", src, sum, raw.n, rel.tarballSHA256, rel.tarballSize, o.Version)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return tmp.Commit(func() error { return os.Rename(f.Name(), dst) })
}
