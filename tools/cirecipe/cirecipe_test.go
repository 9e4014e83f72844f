package cirecipe

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// workflow is the part of a GitHub Actions workflow the recipe uses.
type workflow struct {
	Env  map[string]string
	Jobs map[string]struct {
		Steps []step
	}
}

type step struct {
	ID   string
	Name string
	Uses string
	If   string
	Env  map[string]string
	Run  string
}

func (s step) label(i int) string {
	switch {
	case s.Name != "":
		return fmt.Sprintf("step %d (%s)", i+1, s.Name)
	case s.ID != "":
		return fmt.Sprintf("step %d (%s)", i+1, s.ID)
	case s.Uses != "":
		return fmt.Sprintf("step %d (%s)", i+1, s.Uses)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s.Run), "\n")
	return fmt.Sprintf("step %d (%s)", i+1, first)
}

// need fails the test under CI and skips it elsewhere.
func need(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// block returns the fenced code block of doc whose first line is first.
// A fence is a line of three or more backticks (and an info string); it
// ends at a line of at least as many backticks and nothing else, so a
// block can hold ``` by being fenced with ````.
func block(t *testing.T, doc, first string) string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		fence := len(lines[i]) - len(strings.TrimLeft(lines[i], "`"))
		if fence < 3 {
			continue
		}
		var body []string
		for i++; i < len(lines); i++ {
			l := lines[i]
			if n := len(l) - len(strings.TrimLeft(l, "`")); n >= fence && strings.TrimSpace(l[n:]) == "" {
				break
			}
			body = append(body, l)
		}
		if len(body) > 0 && body[0] == first {
			return strings.Join(body, "\n") + "\n"
		}
	}
	t.Fatalf("docs/ci.md has no code block starting %q", first)
	return ""
}

func TestCIRecipe(t *testing.T) {
	if os.Getenv("OPTC_CI_RECIPE") == "" {
		t.Skip("OPTC_CI_RECIPE is not set: make ci-recipe runs this test (it builds optc from a module proxy and two models; minutes)")
	}
	for _, tool := range []string{"go", "git", "gcc", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			need(t, tool+" is not on PATH: the recipe needs it")
		}
	}
	root := testenv.RepoRoot()
	docb, err := os.ReadFile(filepath.Join(root, "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docb)
	config := block(t, doc, "# optc.yaml")
	wfText := block(t, doc, "# .github/workflows/optc.yml")
	var wf workflow
	if err := yaml.Unmarshal([]byte(wfText), &wf); err != nil {
		t.Fatalf("docs/ci.md workflow: %v", err)
	}
	steps := wf.Jobs["build"].Steps
	version := wf.Env["OPTC_VERSION"]
	if len(steps) == 0 || version == "" {
		t.Fatalf("docs/ci.md workflow: %d steps in jobs.build, OPTC_VERSION %q", len(steps), version)
	}

	tmp := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"home", "proxy", "runner", "stubs", "work"} {
		dirs[d] = filepath.Join(tmp, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	modcache := goEnv(t, "GOMODCACHE")
	gocache := goEnv(t, "GOCACHE")
	publish(t, root, dirs["proxy"], version)

	// An npm-shaped registry with the pinned tarball (a cached copy of
	// the public registry's), standing in for the registry or a mirror.
	registryURL, hits := ortenv.Registry(t)

	ws := modelRepository(t, root, dirs["work"], config, wfText)
	ghLog := filepath.Join(tmp, "gh")
	stub := "#!/usr/bin/env bash\n" +
		"# gh stand-in: records each call and the comment body; pr comment\n" +
		"# --edit-last fails while this job has posted nothing, as gh does.\n" +
		"[ -n \"$GH_TOKEN\" ] || { echo 'gh: GH_TOKEN is not set' >&2; exit 4; }\n" +
		"printf '%s\\n' \"$*\" >> \"$GH_LOG.calls\"\n" +
		"for a in \"$@\"; do [ \"$a\" = --edit-last ] && [ ! -f \"$GH_LOG.body\" ] && { echo 'no comments found for current user' >&2; exit 1; }; done\n" +
		"while [ $# -gt 0 ]; do [ \"$1\" = --body-file ] && cp \"$2\" \"$GH_LOG.body\"; shift; done\n"
	if err := os.WriteFile(filepath.Join(dirs["stubs"], "gh"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}

	// The job's environment: an empty HOME (so an empty optc cache, Go
	// module cache and go env file), optc published only on the file
	// proxy, its dependencies from this machine's module cache, checked
	// against the checksum database as for any user. The build cache is
	// shared to save compiling; it is keyed by content.
	env := []string{
		"HOME=" + dirs["home"],
		"PATH=" + filepath.Join(dirs["home"], "go", "bin") + string(os.PathListSeparator) + dirs["stubs"] + string(os.PathListSeparator) + os.Getenv("PATH"),
		// This machine's own proxy last (go env GOPROXY): it answers the
		// checksum database lookups for optc's dependencies (the database
		// itself may be out of reach); the modules come from the files
		// before it.
		"GOPROXY=file://" + dirs["proxy"] + ",file://" + filepath.Join(modcache, "cache", "download") + "," + goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/optc-dev/optc",
		"GOFLAGS=-modcacherw",
		"GOCACHE=" + gocache,
		"OPTC_NPM_REGISTRY=" + registryURL,
		"RUNNER_TEMP=" + dirs["runner"],
		"GITHUB_WORKSPACE=" + ws,
		"GITHUB_ACTIONS=true",
		"CI=true",
		"GH_LOG=" + ghLog,
	}
	drop := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		drop[k] = true
	}
	for _, k := range []string{"OPTC_CACHE", "OPTC_ORT_LIB", "ONNXRUNTIME_SHARED_LIBRARY_PATH", "OPTC_NO_DOWNLOAD", "GOPATH", "GOMODCACHE", "GOENV", "GOPRIVATE", "GONOPROXY", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		drop[k] = true
	}
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); !drop[k] {
			env = append(env, e)
		}
	}
	expr := map[string]string{
		"github.base_ref":                  "main",
		"github.event.pull_request.number": "7",
		"github.token":                     "stub-token",
		"github.workspace":                 ws,
		"runner.os":                        "Linux",
		"runner.arch":                      "X64",
	}
	for k, v := range wf.Env {
		env = append(env, k+"="+v)
		expr["env."+k] = v
	}

	// Run the job: every run: step as written, in order; a failed step
	// skips the rest, as Actions does without always(). from skips the
	// steps before it (a rerun of the last part).
	type result struct {
		outputs  map[string]map[string]string
		failedAt int
		lastOut  string
	}
	job := func(from int) result {
		r := result{outputs: map[string]map[string]string{}, failedAt: -1}
		for i, s := range steps[from:] {
			i += from
			label := s.label(i)
			if s.Uses != "" {
				t.Logf("%s: not run here (the test set up what it does)", label)
				continue
			}
			if r.failedAt >= 0 {
				t.Logf("%s: skipped after the failure of step %d", label, r.failedAt+1)
				continue
			}
			if s.If != "" && !evalIf(t, label, s.If, r.outputs) {
				t.Logf("%s: skipped (if: %s)", label, s.If)
				continue
			}
			script := substitute(t, label, s.Run, expr)
			outFile := filepath.Join(tmp, fmt.Sprintf("output-%d", i))
			os.WriteFile(outFile, nil, 0o644)
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
			cmd.Dir = ws
			cmd.Env = append(append([]string{}, env...), "GITHUB_OUTPUT="+outFile)
			for k, v := range s.Env {
				cmd.Env = append(cmd.Env, k+"="+substitute(t, label, v, expr))
			}
			start := time.Now()
			out, err := cmd.CombinedOutput()
			r.lastOut = string(out)
			t.Logf("%s: %v in %.1fs\n%s", label, errOrOK(err), time.Since(start).Seconds(), indent(r.lastOut))
			if s.ID != "" {
				r.outputs[s.ID] = readOutputs(t, outFile)
			}
			if err != nil {
				r.failedAt = i
			}
		}
		return r
	}
	first := job(0)
	outputs, failedAt, lastOut := first.outputs, first.failedAt, first.lastOut

	// What the job must have done.
	optcBin := filepath.Join(dirs["home"], "go", "bin", "optc")
	ver, err := exec.Command(optcBin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v (go install did not give a working optc)", optcBin, err)
	}
	if !strings.HasPrefix(string(ver), "optc "+version+"\n") {
		t.Errorf("the installed optc says %q, want optc %s", firstLine(string(ver)), version)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the npm registry got %d requests, want 1 (one tarball fetch)", n)
	}
	list, err := (&exec.Cmd{Path: optcBin, Args: []string{"optc", "runtime", "list"}, Env: []string{"HOME=" + dirs["home"]}}).Output()
	if err != nil || !regexp.MustCompile(`(?m)^1\.24\.1 +linux/amd64 +verified +\d+ +`+regexp.QuoteMeta(filepath.Join(dirs["home"], ".cache", "optc", "onnxruntime"))).Match(list) {
		t.Errorf("runtime list in the job's HOME: %v\n%s", err, list)
	}
	for _, f := range []string{filepath.Join(dirs["runner"], "base-build", "report.json"), filepath.Join(ws, "out", "build", "report.json"), filepath.Join(ws, "calib", "calibration.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the job did not write %s", f)
		}
	}
	calls, _ := os.ReadFile(ghLog + ".calls")
	body, _ := os.ReadFile(ghLog + ".body")
	report, _ := os.ReadFile(filepath.Join(ws, "out", "build", "report.md"))
	if strings.Count(string(calls), "pr comment 7 --body-file comment.md") != 2 {
		t.Errorf("gh calls %q: want the --edit-last try, then a new comment on PR 7", calls)
	}
	if len(report) == 0 || !bytes.HasPrefix(body, report) || !bytes.Contains(body, []byte("optc diff against main")) {
		t.Errorf("the comment does not hold report.md followed by the diff:\n%s", body)
	}
	status := outputs["diff"]["status"]
	t.Logf("optc diff status %q", status)
	switch {
	case status == "":
		t.Errorf("the diff step set no status output")
	case status == "0" && failedAt >= 0:
		t.Errorf("the gates passed but %s failed", steps[failedAt].label(failedAt))
	case status != "0" && (failedAt != len(steps)-1 || !strings.Contains(lastOut, "gate")):
		// A broken gate must fail the job at its last step, which prints
		// the failed gates.
		t.Errorf("optc diff exited %s: the job must fail at its last step naming the gate; it failed at step %d, printing %q", status, failedAt+1, lastOut)
	}

	// A broken gate: the same builds, a size limit they exceed. The diff
	// step and those after it run again: the comment is edited in place
	// and the job fails at its last step, naming the gate.
	diffAt := slices.IndexFunc(steps, func(s step) bool { return s.ID == "diff" })
	cfg := filepath.Join(ws, "optc.yaml")
	b, _ := os.ReadFile(cfg)
	tight := regexp.MustCompile(`(?m)^(\s*max_size:)\s*\d+`).ReplaceAll(b, []byte("${1} 1000"))
	if diffAt < 0 || bytes.Equal(tight, b) {
		t.Fatalf("docs/ci.md: no step with id diff (%d) or no gates.max_size in optc.yaml to tighten", diffAt)
	}
	os.WriteFile(cfg, tight, 0o644)
	os.Remove(ghLog + ".calls")
	second := job(diffAt)
	calls, _ = os.ReadFile(ghLog + ".calls")
	if second.outputs["diff"]["status"] != "1" || second.failedAt != len(steps)-1 || !strings.Contains(second.lastOut, "max-size") {
		t.Errorf("with max_size 1000: diff status %q, job failed at step %d (want %d), last step printed %q; want the gate named",
			second.outputs["diff"]["status"], second.failedAt+1, len(steps), second.lastOut)
	}
	if strings.TrimSpace(string(calls)) != "pr comment 7 --body-file comment.md --edit-last" {
		t.Errorf("gh calls on the rerun %q: want one --edit-last", calls)
	}
}

// publish writes a Go module proxy (the GOPROXY file layout) holding
// optc's working tree as version: what `go install ...@version` fetches.
func publish(t *testing.T, root, proxy, version string) {
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	// The working tree's tracked files (a commit made by stash create
	// without touching the tree), else HEAD.
	ref := git("stash", "create")
	if ref == "" {
		ref = "HEAD"
	}
	if untracked := git("ls-files", "--others", "--exclude-standard", "--", "*.go", "go.mod", "go.sum"); untracked != "" {
		t.Logf("not published (untracked): %s", strings.ReplaceAll(untracked, "\n", ", "))
	}
	dir := filepath.Join(proxy, "github.com", "optc-dev", "optc", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zip := exec.Command("git", "-C", root, "archive", "--format=zip", "--prefix=github.com/optc-dev/optc@"+version+"/", "-o", filepath.Join(dir, version+".zip"), ref)
	if out, err := zip.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v: %s", err, out)
	}
	gomod := git("show", ref+":go.mod")
	when := git("show", "-s", "--format=%cI", ref)
	for name, content := range map[string]string{
		version + ".mod":  gomod + "\n",
		version + ".info": fmt.Sprintf(`{"Version":%q,"Time":%q}`+"\n", version, when),
		"list":            version + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// modelRepository makes the origin of a model repository (main: the model,
// data, config and workflow; feature: a change to the config) and the
// job's checkout of feature, with origin/main fetched.
func modelRepository(t *testing.T, root, work, config, wf string) string {
	run := func(dir string, args ...string) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=ci", "GIT_AUTHOR_EMAIL=ci@example.com", "GIT_COMMITTER_NAME=ci", "GIT_COMMITTER_EMAIL=ci@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	origin, seed, ws := filepath.Join(work, "origin.git"), filepath.Join(work, "seed"), filepath.Join(work, "repo")
	run(work, "git", "init", "-q", "--bare", "-b", "main", origin)
	run(work, "git", "init", "-q", "-b", "main", seed)
	mnist := filepath.Join(root, "testdata", "mnist")
	for _, c := range [][2]string{
		{filepath.Join(root, "testdata", "models", "mnist_cnn.onnx"), "models/classifier.onnx"},
		{filepath.Join(mnist, "calib"), "data/calib"},
		{filepath.Join(mnist, "eval"), "data/eval"},
		{filepath.Join(mnist, "eval_labels.npy"), "data/eval_labels.npy"},
	} {
		dst := filepath.Join(seed, c[1])
		os.MkdirAll(filepath.Dir(dst), 0o755)
		run(seed, "cp", "-r", c[0], dst)
	}
	os.WriteFile(filepath.Join(seed, "optc.yaml"), []byte(config), 0o644)
	os.MkdirAll(filepath.Join(seed, ".github", "workflows"), 0o755)
	os.WriteFile(filepath.Join(seed, ".github", "workflows", "optc.yml"), []byte(wf), 0o644)
	os.WriteFile(filepath.Join(seed, ".gitignore"), []byte("/out/\n"), 0o644)
	run(seed, "git", "add", ".")
	run(seed, "git", "commit", "-q", "-m", "the model, its data and optc.yaml")
	run(seed, "git", "remote", "add", "origin", origin)
	run(seed, "git", "push", "-q", "origin", "main")
	// The merge request: calibrate with minmax instead of the default.
	changed := strings.Replace(config, "  data: data/calib\n", "  data: data/calib\n  method: minmax\n", 1)
	if changed == config {
		t.Fatal("docs/ci.md's optc.yaml has no calibration data line to change")
	}
	run(seed, "git", "checkout", "-q", "-b", "feature")
	os.WriteFile(filepath.Join(seed, "optc.yaml"), []byte(changed), 0o644)
	run(seed, "git", "commit", "-q", "-am", "calibrate with minmax")
	run(seed, "git", "push", "-q", "origin", "feature")
	run(work, "git", "clone", "-q", "-b", "feature", origin, ws)
	return ws
}

var exprRe = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// substitute replaces the ${{ ... }} expressions the test knows; any other
// fails the test, so that the page cannot grow a step this test skips over.
func substitute(t *testing.T, label, s string, vals map[string]string) string {
	return exprRe.ReplaceAllStringFunc(s, func(m string) string {
		k := exprRe.FindStringSubmatch(m)[1]
		v, ok := vals[k]
		if !ok {
			t.Fatalf("%s uses ${{ %s }}, which this test cannot stand in for", label, k)
		}
		return v
	})
}

var ifRe = regexp.MustCompile(`^steps\.([\w-]+)\.outputs\.(\w+)\s*(==|!=)\s*'([^']*)'$`)

// evalIf evaluates an if: made of steps.ID.outputs.NAME ==|!= 'V' terms
// joined by ||.
func evalIf(t *testing.T, label, cond string, outputs map[string]map[string]string) bool {
	for _, term := range strings.Split(cond, "||") {
		m := ifRe.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			t.Fatalf("%s: if: %s is not a form this test evaluates (steps.ID.outputs.NAME ==|!= 'V', joined by ||)", label, cond)
		}
		if eq := outputs[m[1]][m[2]] == m[4]; eq == (m[3] == "==") {
			return true
		}
	}
	return false
}

func readOutputs(t *testing.T, file string) map[string]string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

func goEnv(t *testing.T, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

func errOrOK(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
