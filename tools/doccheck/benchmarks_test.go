package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

var (
	dated        = regexp.MustCompile(`\b\d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December) \d{4}\b`)
	withCPU      = regexp.MustCompile(`AMD EPYC|Intel|Xeon|Apple|Graviton|Ampere`)
	benchHeading = regexp.MustCompile(`^(#{2,3}) (.*)`)
)

// TestBenchmarksDated: every table of figures in docs/BENCHMARKS.md sits
// under a heading (its own or its section's) that names the day it was
// measured and the CPU, so that a reader knows what code and machine a
// figure is from.
func TestBenchmarksDated(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "docs", "BENCHMARKS.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var section, sub string // the current ## and ### headings
	inTable, tables, fence := false, 0, false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		if m := benchHeading.FindStringSubmatch(l); m != nil {
			if m[1] == "##" {
				section, sub = m[2], ""
			} else {
				sub = m[2]
			}
			continue
		}
		table := strings.HasPrefix(l, "|")
		if table && !inTable && section != "Go benchmarks and benchstat" { // a list of benchmarks, no figures
			tables++
			where := section + " / " + sub + " / " + l // the table's header row may name them
			if !dated.MatchString(where) || !withCPU.MatchString(where) {
				t.Errorf("docs/BENCHMARKS.md:%d: a table under %q, whose headings name no date and CPU", i+1, where)
			}
		}
		inTable = table
	}
	if tables < 5 {
		t.Fatalf("docs/BENCHMARKS.md: only %d tables found", tables)
	}
}
