package doccheck

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

// registryHosts are package registries' and model hubs' domains (npm's,
// Go's module proxy and checksum database and package index, Debian's,
// PyPI's, a model hub's), as the first 16 hex digits of their names'
// sha256: the repository names none of them, this test included. optc
// takes its registry from the user's configuration (npm's, go env
// GOPROXY), never from a host compiled in.
var registryHosts = map[string]bool{
	"8743857e3ea00fd1": true, "3ca29e55be4befa4": true, "87d14f070cb96869": true, "fad691c6d9ae77c4": true,
	"00a7dc5a0cc38858": true, "9da5f32d96412512": true, "aa924a6f6c848636": true, "e4c157c5e3afda9f": true,
	"048e76c14ef34200": true, "be57af6b78a7faca": true, "75adac515f0bd3db": true, "a4aa2ac280bb8d1a": true,
	"8b5bb5eb9d758455": true, "ae1f45a5b387e18d": true,
}

var hostLike = regexp.MustCompile(`(?i)[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)+`)

// TestNoRegistryHost: no file of the repository names a package
// registry's host, in code, docs, tests or comments.
func TestNoRegistryHost(t *testing.T) {
	root := testenv.RepoRoot()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		files++
		for i, line := range strings.Split(string(b), "\n") {
			for _, tok := range hostLike.FindAllString(line, -1) {
				if host := registryHost(tok); host != "" {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s:%d names a package registry's host (%s): take it from the user's configuration", rel, i+1, host)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files under %s", files, root)
	}
}

// registryHost returns the part of tok (a dotted word) that is a
// registry's domain: tok itself or one of its parent domains.
func registryHost(tok string) string {
	tok = strings.ToLower(strings.Trim(tok, ".-"))
	for d := tok; strings.Contains(d, "."); d = d[strings.Index(d, ".")+1:] {
		sum := sha256.Sum256([]byte(d))
		if registryHosts[hex.EncodeToString(sum[:8])] {
			return d
		}
	}
	return ""
}

// The check finds what it is for: a registry's host, bare, in a URL or
// as a parent domain, and not a module path that merely shares a word.
func TestRegistryHostFound(t *testing.T) {
	// The hosts are assembled here so that this file names none.
	npm := strings.Join([]string{"registry", "npmjs", "org"}, ".")
	proxy := strings.Join([]string{"proxy", "golang", "org"}, ".")
	for _, s := range []string{npm, "https://" + npm + "/x", strings.ToUpper(proxy)} {
		found := false
		for _, tok := range hostLike.FindAllString(s, -1) {
			found = found || registryHost(tok) != ""
		}
		if !found {
			t.Errorf("%q: no registry host found", s)
		}
	}
	for _, s := range []string{"golang.org/x/image", "github.com/spf13/cobra", "npm.example", "graph.Model"} {
		if h := registryHost(s); h != "" {
			t.Errorf("%q: found %s", s, h)
		}
	}
}
