package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// Docs that cannot go stale: the output the README and docs/build.md show
// is what the commands print now. Each block is found by its first line,
// and the command's output is compared with it after masking what changes
// from run to run (timings, and the figures of the INT8 decision the
// placement search makes by timing). OPTC_UPDATE_DOCS=1 writes the output
// into the docs instead (then read the diff before committing it).

var (
	// decimals are measurements: latency, cosine, errors, percentages.
	decimals = regexp.MustCompile(`[-+]?\d+\.\d+(e[-+]?\d+)?|\d+e[-+]\d+`)
	spaces   = regexp.MustCompile(`[ \t]+`)
	// memory is a stage line's peak RSS.
	memory = regexp.MustCompile(`\(peak RSS \d+ MiB\)`)
	// byTiming are lines whose content follows the placement search's
	// timing (INT8 or FP32 for the ORT artifact, and which candidate).
	byTiming = regexp.MustCompile(`^(ort artifact:|int8 placement:|note: ort: |int8 ort: \d+ nodes quantized|build: budget: )`)
	// machine is the CPU and its features, which differ between the
	// machines the tests run on.
	machine = regexp.MustCompile(`^measured on .*, ONNX Runtime `)
	// byTimingRow: table rows of the models the ORT decision shapes.
	byTimingRow = regexp.MustCompile(`^(model\.int8\.onnx|ort/model\.ort) `)
)

// maskOutput reduces text to what must not change between runs.
func maskOutput(text string, replace map[string]string) []string {
	for from, to := range replace {
		text = strings.ReplaceAll(text, from, to)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = memory.ReplaceAllString(l, "(peak RSS # MiB)")
		l = machine.ReplaceAllString(l, "measured on (this machine), ONNX Runtime ")
		l = strings.TrimSpace(spaces.ReplaceAllString(decimals.ReplaceAllString(l, "#"), " "))
		switch {
		case byTiming.MatchString(l):
			// Dropped on both sides: whether INT8 pays decides which of
			// these lines appear at all (the FP32 note is absent when it
			// does), and their counts follow the chosen candidate.
			continue
		case byTimingRow.MatchString(l):
			l = strings.Fields(l)[0] + " ..."
		}
		out = append(out, l)
	}
	return out
}

// docBlock returns the fenced block of path whose first line starts with
// first, and where its lines are in the file.
func docBlock(t *testing.T, path, first string) (lines []string, start, end int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(all); i++ {
		if strings.HasPrefix(all[i], "```") && strings.HasPrefix(all[i+1], first) {
			for j := i + 1; j < len(all); j++ {
				if strings.HasPrefix(all[j], "```") {
					return all[i+1 : j], i + 1, j
				}
			}
		}
	}
	t.Fatalf("%s: no block starting with %q", path, first)
	return nil, 0, 0
}

// checkDocBlock compares got (a command's output) with the block of path
// that starts with first; "..." in the docs stands for any lines.
func checkDocBlock(t *testing.T, path, first, got string, replace map[string]string) {
	t.Helper()
	doc, start, end := docBlock(t, path, first)
	if os.Getenv("OPTC_UPDATE_DOCS") != "" {
		b, _ := os.ReadFile(path)
		all := strings.Split(string(b), "\n")
		out := append(append(append([]string{}, all[:start]...), strings.Split(strings.TrimRight(got, "\n"), "\n")...), all[end:]...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: block %q rewritten from the output", path, first)
		return
	}
	want := maskOutput(strings.Join(doc, "\n"), replace)
	have := maskOutput(got, replace)
	if i, ok := matchLines(want, have); !ok {
		t.Errorf("%s (block %q, line %d) no longer shows what the command prints:\ndocs:   %s\noutput: %s\n(OPTC_UPDATE_DOCS=1 rewrites the block; the whole output:)\n%s",
			path, first, start+i+1, at(want, i), at(have, i), got)
	}
}

// matchLines matches have against want line by line, a "..." line in
// want standing for any number of lines; it returns the first line that
// differs.
func matchLines(want, have []string) (int, bool) {
	i, j := 0, 0
	for i < len(want) {
		if want[i] == "..." {
			if i+1 == len(want) {
				return 0, true
			}
			for j < len(have) && have[j] != want[i+1] {
				j++
			}
			i++
			continue
		}
		if j >= len(have) || want[i] != have[j] {
			return i, false
		}
		i, j = i+1, j+1
	}
	if j < len(have) {
		return i, false
	}
	return 0, true
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}

// TestDocsShowWhatCommandsPrint runs the README's demo (make demo's
// build) and its compare example, and checks their output, and the build's
// stage lines, against the blocks the README and docs/build.md show.
func TestDocsShowWhatCommandsPrint(t *testing.T) {
	ortenv.Require(t)
	root := testenv.RepoRoot()
	tmp := t.TempDir()
	t.Chdir(root)

	// The demo: make demo's build, into a temporary folder shown as out/mnist.
	out := filepath.Join(tmp, "mnist")
	var stdout, stderr, progress bytes.Buffer
	status := Main([]string{"build", "--config", "testdata/mnist/optc.yaml", "-o", out}, &IO{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr, Progress: &progress})
	if status != 0 {
		t.Fatalf("the demo build: status %d: %s", status, stderr.String())
	}
	checkDocBlock(t, filepath.Join(root, "README.md"), "built testdata/models/mnist_cnn.onnx -> out/mnist", stdout.String(), map[string]string{out: "out/mnist"})
	checkDocBlock(t, filepath.Join(root, "docs", "build.md"), "build: plan: budget", progress.String(), nil)

	// The README's compare example.
	cache := filepath.Dir(testenv.Data(t, "mnist/test_images.npy"))
	copyPath := filepath.Join(tmp, "m.onnx")
	if status, _, errOut := run(t, "convert", "testdata/models/mnist_cnn.onnx", "-o", copyPath, "--external-data"); status != 0 {
		t.Fatalf("convert: %s", errOut)
	}
	status, got, errOut := run(t, "compare", "testdata/models/mnist_cnn.onnx", copyPath, "--data", filepath.Join(cache, "test_images.npy"),
		"--labels", filepath.Join(cache, "test_labels.npy"), "--batch", "64")
	if status != 0 {
		t.Fatalf("compare: %s", errOut)
	}
	checkDocBlock(t, filepath.Join(root, "README.md"), "$ optc convert testdata/models/mnist_cnn.onnx -o /tmp/m.onnx",
		"$ optc convert testdata/models/mnist_cnn.onnx -o /tmp/m.onnx --external-data\n"+
			"$ optc compare testdata/models/mnist_cnn.onnx /tmp/m.onnx --data ~/.cache/optc/mnist/test_images.npy \\\n"+
			"    --labels ~/.cache/optc/mnist/test_labels.npy --batch 64\n"+got,
		map[string]string{copyPath: "/tmp/m.onnx", cache: "CACHE/mnist", "/root/.cache/optc/mnist": "CACHE/mnist", "~/.cache/optc/mnist": "CACHE/mnist"})
}

// The masked lines of two runs whose placement differed read the same.
func TestMaskOutputTimingLines(t *testing.T) {
	a := maskOutput("int8 ort: 1 nodes quantized, 0 left float; fell back for accuracy: none", nil)
	b := maskOutput("int8 ort: 2 nodes quantized, 3 left float; fell back for accuracy: none", nil)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("masked lines differ: %q vs %q", a, b)
	}
	if e := maskOutput("note: ort: INT8 does not pay on this CPU", nil); len(e) != 0 {
		t.Fatalf("the FP32 note, absent when INT8 pays, was kept: %q", e)
	}
	c := maskOutput("int8 tensorrt: 4 nodes quantized, 0 left float", nil)
	d := maskOutput("int8 tensorrt: 3 nodes quantized, 0 left float", nil)
	if strings.Join(c, "\n") == strings.Join(d, "\n") {
		t.Fatal("a TensorRT count, which does not follow timing, was masked")
	}
}
