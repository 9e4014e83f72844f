package install

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Cached is one file found in the runtime cache.
type Cached struct {
	Version  string `json:"version"`
	Platform string `json:"platform"` // os/arch, empty for a file outside the layout
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	// Status is "verified" (matches the pinned sha256), "mismatch" (does
	// not: reinstall with --force), "unpinned" (a version or platform optc
	// has no digest for) or "unused" (not where optc looks, e.g. a file
	// left by an older optc).
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// List reports every library in cache's runtime folder, sorted by
// version, platform and path, hashing each one against its pin.
func List(cache string) ([]Cached, error) {
	root := RuntimeDir(cache)
	versions, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Cached
	for _, v := range versions {
		vdir := filepath.Join(root, v.Name())
		if !v.IsDir() {
			out = append(out, unused(v.Name(), "", vdir))
			continue
		}
		entries, err := os.ReadDir(vdir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			pdir := filepath.Join(vdir, e.Name())
			if !e.IsDir() {
				out = append(out, unused(v.Name(), "", pdir))
				continue
			}
			osName, arch, _ := strings.Cut(e.Name(), "-")
			p := Platform{osName, arch}
			files, err := os.ReadDir(pdir)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if strings.HasPrefix(f.Name(), ".") {
					continue // a temporary of an install under way or killed
				}
				out = append(out, check(v.Name(), p, filepath.Join(pdir, f.Name())))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Platform != b.Platform {
			return a.Platform < b.Platform
		}
		return a.Path < b.Path
	})
	return out, nil
}

func unused(version, platform, path string) Cached {
	c := Cached{Version: version, Platform: platform, Path: path, Status: "unused", Detail: "not where optc looks (left by an older optc?); safe to delete"}
	if fi, err := os.Stat(path); err == nil {
		c.Bytes = fi.Size()
	}
	return c
}

func check(version string, p Platform, path string) Cached {
	c := Cached{Version: version, Platform: p.String(), Path: path}
	lib, ok := releases[version].libraries[p]
	if !ok || filepath.Base(path) != lib.name {
		c = unused(version, p.String(), path)
		if !ok {
			c.Status, c.Detail = "unpinned", "optc has no pinned sha256 for this version and platform"
		}
		return c
	}
	sum, size, err := fileSHA256(path)
	c.Bytes = size
	switch {
	case err != nil:
		c.Status, c.Detail = "mismatch", err.Error()
	case sum != lib.sha256 || size != lib.size:
		c.Status, c.Detail = "mismatch", "sha256 "+sum+", want "+lib.sha256+"; run optc runtime install --force"
	default:
		c.Status = "verified"
	}
	return c
}
