package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

// pages returns every Markdown file of the repository, relative to root.
func pages(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found only %d Markdown files under %s", len(out), root)
	}
	return out
}

var (
	link    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
	// outside are references to files that are not in the repository:
	// notes of the people who wrote it, and absolute paths of one machine.
	outside = regexp.MustCompile(`FACTS\.md|\.\./shared|/work/|STYLE\.md|/home/[a-z]`)
)

// anchors are GitHub's ids of a page's headings: lower case, punctuation
// other than - and _ dropped, spaces to -.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(md, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestMarkdownLinks: in README.md, docs/ and every other page, each
// relative link names a file or folder of the repository (and, with
// #anchor, a heading of that page), and no page refers to files outside
// the repository.
func TestMarkdownLinks(t *testing.T) {
	root := testenv.RepoRoot()
	checked := 0
	for _, page := range pages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, m := range outside.FindAllString(md, -1) {
			t.Errorf("%s: refers to %q, outside the repository", page, m)
		}
		for _, m := range link.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // https:, mailto:
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := filepath.Join(root, page)
			if file != "" {
				dest = filepath.Join(filepath.Dir(dest), filepath.FromSlash(file))
			}
			checked++
			if rel, err := filepath.Rel(root, dest); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository", page, target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q: no such file in the repository", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") {
				tb, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(tb))[anchor] {
					t.Errorf("%s: link %q: %s has no heading #%s", page, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d relative links; the link pattern is broken", checked)
	}
}
