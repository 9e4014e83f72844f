// Command samestrings lists the string literals of the tree's Go files
// that differ from those at a git revision, as a multiset: each literal
// added ("+") or gone ("-"), import paths and struct tags aside. A
// refactor that renames identifiers with a pattern can reach into the
// messages and words optc writes, and scripts/same-artifacts.sh does not
// see all of them: a replayed build keeps the placement's own words, and
// the reports are left out. Run it beside that script:
//
//	go run ./tools/samestrings REV
//
// It exits 1 when a literal differs, 2 on usage or read errors.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./tools/samestrings REV")
		os.Exit(2)
	}
	before, err := atRevision(os.Args[1])
	if err == nil {
		var now map[string]int
		if now, err = inTree(); err == nil {
			diff := difference(before, now)
			for _, line := range diff {
				fmt.Println(line)
			}
			if len(diff) > 0 {
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "samestrings:", err)
	os.Exit(2)
}

// atRevision counts the literals of every Go file git holds at rev.
func atRevision(rev string) (map[string]int, error) {
	names, err := git("ls-tree", "-r", "--name-only", rev)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, name := range goFiles(names) {
		src, err := git("show", rev+":"+name)
		if err != nil {
			return nil, err
		}
		if err := count(counts, name+" at "+rev, src); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// inTree counts the literals of the working tree's Go files (tracked, and
// untracked ones git does not ignore).
func inTree() (map[string]int, error) {
	names, err := git("ls-files", "-co", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, name := range goFiles(names) {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if err := count(counts, name, string(src)); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

func count(counts map[string]int, name, src string) error {
	lits, err := literals(name, src)
	if err != nil {
		return err
	}
	for _, l := range lits {
		counts[l]++
	}
	return nil
}

func goFiles(listing string) []string {
	var out []string
	for _, f := range strings.Fields(listing) {
		if strings.HasSuffix(f, ".go") {
			out = append(out, f)
		}
	}
	return out
}

// difference is each literal whose count differs, "+" for one more in
// now, "-" for one fewer, sorted.
func difference(before, now map[string]int) []string {
	var out []string
	for l, n := range now {
		for range n - before[l] {
			out = append(out, "+ "+l)
		}
	}
	for l, n := range before {
		for range n - now[l] {
			out = append(out, "- "+l)
		}
	}
	slices.Sort(out)
	return out
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(string(e.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
