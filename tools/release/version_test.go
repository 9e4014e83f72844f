package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

// pseudoVersion is a Go pseudo-version: base, UTC commit time, 12 hex
// digits of the commit (+dirty for a tree with changes).
var pseudoVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:0\.)?(\d{14})-([0-9a-f]{12})(\+dirty)?$`)

func git(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// TestVersionString: scripts/version.sh, the one version make build,
// install and release link in, is HEAD's tag or HEAD's pseudo-version; and
// the version docs/ci.md pins is a real tag or a real commit's
// pseudo-version (its time the commit's), which the README points to.
func TestVersionString(t *testing.T) {
	root := testenv.RepoRoot()
	head, err := git(t, root, "rev-parse", "HEAD")
	if err != nil {
		need(t, "not a git checkout: "+err.Error())
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "version.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/version.sh: %v", err)
	}
	v := strings.TrimSpace(string(out))
	tag, _ := git(t, root, "describe", "--tags", "--match", "v[0-9]*", "--exact-match")
	if m := pseudoVersion.FindStringSubmatch(v); tag == "" && (m == nil || m[2] != head[:12]) || tag != "" && strings.TrimSuffix(v, "+dirty") != tag {
		t.Errorf("scripts/version.sh says %q: want HEAD's tag %q or its pseudo-version (commit %s)", v, tag, head[:12])
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^\s+OPTC_VERSION: (\S+)`).FindSubmatch(doc)
	if pin == nil {
		t.Fatal("docs/ci.md pins no OPTC_VERSION")
	}
	pinned := string(pin[1])
	if m := pseudoVersion.FindStringSubmatch(pinned); m != nil {
		if m[3] != "" {
			t.Errorf("docs/ci.md pins %s, a dirty build", pinned)
		}
		if shallow, _ := git(t, root, "rev-parse", "--is-shallow-repository"); shallow == "true" {
			t.Logf("a shallow clone: %s's commit is not looked up", pinned)
			return
		}
		full, err := git(t, root, "rev-parse", "--verify", "--quiet", m[2]+"^{commit}")
		if err != nil {
			t.Fatalf("docs/ci.md pins %s: no commit %s in this repository", pinned, m[2])
		}
		cmd := exec.Command("git", "-C", root, "log", "-1", "--format=%cd", "--date=format-local:%Y%m%d%H%M%S", full)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		when, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(when)) != m[1] {
			t.Errorf("docs/ci.md pins %s: commit %s was made at %s UTC, not %s", pinned, m[2], strings.TrimSpace(string(when)), m[1])
		}
	} else if _, err := git(t, root, "rev-parse", "--verify", "--quiet", "refs/tags/"+pinned); err != nil {
		t.Errorf("docs/ci.md pins %s: neither a pseudo-version nor a tag of this repository", pinned)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(readme), "@v0.") && !strings.Contains(string(readme), "@"+pinned) {
		t.Errorf("README.md pins a version other than docs/ci.md's %s", pinned)
	}
}
