package zoo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// The suite is configured by environment variables (make zoo sets them):
//
//	ZOO          quick (default): the quick subset below, inspect, optimize and
//	             quantize with random calibration; full: every model, variant
//	             and step; off: skip.
//	ZOO_MODELS   only these, comma-separated: a model ("resnet18") or a
//	             model/variant ("resnet18/dynhw").
//	ZOO_REPORT   write the result table as markdown to this file (docs/zoo.md),
//	             rewritten after every step so a long run shows its progress.
//	ZOO_OPTC     an optc binary to run instead of building one.
//	ZOO_TIMEOUT  per-step limit (a Go duration; default 3m quick, 20m full).

// manifest is zoo/models.json as scripts/zoo/gen.py writes it.
type manifest struct {
	Schema        int     `json:"schema"`
	GeneratorHash string  `json:"generator_hash"`
	Torch         string  `json:"torch"`
	Torchvision   string  `json:"torchvision"`
	Models        []model `json:"models"`
}

type model struct {
	Name     string    `json:"name"`
	Dir      string    `json:"dir"`
	Kind     string    `json:"kind"`
	Opset    int       `json:"opset"`
	Calib    string    `json:"calib"`
	Variants []variant `json:"variants"`
}

type variant struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Inputs []struct {
		Name  string        `json:"name"`
		DType string        `json:"dtype"`
		Shape []interface{} `json:"shape"`
	} `json:"inputs"`
	ShapeFlags []string `json:"shape_flags"`
}

// quick is the subset plain `go test ./...` runs: one of each input kind
// (static batch 1, dynamic H/W, token ids with a mask, recurrent state, If,
// a per-pixel class map, int64 ids beside float features, a KV cache, a
// detector whose number of boxes depends on the image).
var quick = []string{"resnet18/static", "mobilenet_v3_small/dynhw", "bert_tiny/dynamic", "lstm/dynamic", "if_branch/static",
	"unet_small/dynbatch", "recommender/dynbatch", "decoder_kv/dynamic", "detector/static"}

var (
	quickSteps = []string{"inspect", "optimize", "quantize-random"}
	fullSteps  = []string{"inspect", "optimize", "quantize-random", "quantize-npy", "build"}
)

// refusedStatus is optc's exit status when the accuracy guard refused an
// INT8 model (cmd.ExitRefused).
const refusedStatus = 3

// result is one model variant through one step.
type result struct {
	Model, Variant, Step string
	// Status: pass; guard (the accuracy guard refused INT8 with exit 3,
	// naming what it measured: quantize then passed with
	// --allow-accuracy-loss, and build wrote, checked and reported every
	// other artifact; the models have random weights, which INT8 often
	// does not keep); FAIL; TIMEOUT; n/a.
	Status       string
	Seconds      float64
	Err          string // the first error line
	Metrics      string // cosine, speed-up, ORT decision
	Checked      int    // .onnx files the ONNX checker validated
	CheckSkipped []string
}

func TestZoo(t *testing.T) {
	mode := os.Getenv("ZOO")
	if mode == "" {
		mode = "quick"
	}
	if mode == "off" {
		t.Skip("ZOO=off")
	}
	if mode != "quick" && mode != "full" {
		t.Fatalf("ZOO=%q: want quick, full or off", mode)
	}
	if mode == "quick" && testing.Short() {
		t.Skip("-short")
	}
	manPath := testenv.Data(t, "zoo/models.json")
	ortenv.Require(t)
	requireChecker(t)
	raw, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	var man manifest
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatalf("%s: %v", manPath, err)
	}
	if man.Schema != 1 {
		t.Fatalf("%s: schema %d, want 1 (regenerate: make zoo-models)", manPath, man.Schema)
	}
	zooDir := filepath.Dir(manPath)

	steps, timeout := quickSteps, 3*time.Minute
	if mode == "full" {
		steps, timeout = fullSteps, 20*time.Minute
	}
	if s := os.Getenv("ZOO_TIMEOUT"); s != "" {
		if timeout, err = time.ParseDuration(s); err != nil {
			t.Fatalf("ZOO_TIMEOUT: %v", err)
		}
	}
	want := map[string]bool{}
	if mode == "quick" {
		for _, q := range quick {
			want[q] = true
		}
	}
	var only []string
	if s := os.Getenv("ZOO_MODELS"); s != "" {
		only = strings.Split(s, ",")
	}
	selected := func(m, v string) bool {
		if len(only) > 0 {
			for _, o := range only {
				if o == m || o == m+"/"+v {
					return true
				}
			}
			return false
		}
		return mode == "full" || want[m+"/"+v]
	}

	optc := optcBinary(t)
	rep := &report{mode: mode, man: man, steps: steps, path: os.Getenv("ZOO_REPORT"), start: time.Now()}
	// Breadth first: every model's first variant (static batch 1), then
	// every second one, and so on, smaller models first (the manifest's
	// order), so a run cut short has covered every architecture.
	type tcase struct {
		m model
		v variant
	}
	var cases []tcase
	for i := 0; ; i++ {
		more := false
		for _, m := range man.Models {
			if i < len(m.Variants) {
				more = true
				if selected(m.Name, m.Variants[i].Name) {
					cases = append(cases, tcase{m, m.Variants[i]})
				}
			}
		}
		if !more {
			break
		}
	}
	for _, c := range cases {
		m, v := c.m, c.v
		t.Run(m.Name+"/"+v.Name, func(t *testing.T) {
			dir := filepath.Join(zooDir, m.Dir)
			work := t.TempDir()
			for _, step := range steps {
				r := runStep(t, optc, step, m, v, dir, work, timeout)
				rep.add(r)
				line := fmt.Sprintf("%-15s %-7s %6.1fs %s", step, r.Status, r.Seconds, r.Metrics)
				if r.Err != "" {
					line += "  " + r.Err
				}
				t.Log(line)
				if r.Status == "FAIL" || r.Status == "TIMEOUT" {
					t.Errorf("%s: %s", step, r.Err)
				}
				if err := rep.write(); err != nil {
					t.Errorf("writing %s: %v", rep.path, err)
				}
			}
		})
	}
	if len(cases) == 0 {
		t.Fatalf("no model selected (ZOO=%s ZOO_MODELS=%q) in %s", mode, os.Getenv("ZOO_MODELS"), manPath)
	}
	if mode == "quick" && len(only) == 0 && len(cases) != len(quick) {
		t.Errorf("%s lists %d of the %d quick cases %v: regenerate it (make zoo-models)", manPath, len(cases), len(quick), quick)
	}
	t.Log("\n" + rep.markdown())
}

// runStep runs one step the way a user does: the CLI with its required
// arguments and, for dynamic non-batch dims in a step without a data file,
// --shape.
func runStep(t *testing.T, optc, step string, m model, v variant, dir, work string, timeout time.Duration) result {
	r := result{Model: m.Name, Variant: v.Name, Step: step}
	in := filepath.Join(dir, v.File)
	calib := ""
	if m.Calib != "" {
		calib = filepath.Join(dir, m.Calib)
	}
	var args []string
	var outs []string // what the step writes, for the ONNX checker
	switch step {
	case "inspect":
		args = []string{"inspect", in}
	case "optimize":
		o := filepath.Join(work, "optimized.onnx")
		args, outs = []string{"optimize", in, "-o", o}, []string{o}
	case "quantize-random":
		o := filepath.Join(work, "int8.random.onnx")
		args, outs = []string{"quantize", in, "-o", o, "--calib-data", "random"}, []string{o}
	case "quantize-npy":
		if calib == "" {
			r.Status = "n/a"
			r.Err = "no calibration file for this model"
			return r
		}
		o := filepath.Join(work, "int8.calib.onnx")
		args, outs = []string{"quantize", in, "-o", o, "--calib-data", calib}, []string{o}
	case "build":
		o := filepath.Join(work, "build")
		data := calib
		if data == "" {
			data = "random"
		}
		args, outs = []string{"build", in, "--int8", "--target", "all", "-o", o, "--calib-data", data}, []string{o}
	default:
		t.Fatalf("unknown step %q", step)
	}
	// A step with a data file takes the dims random inputs cannot tell
	// from it (data.ShapesFromData), as a user's would: --shape only where
	// there is no file to read them from.
	withFile := calib != "" && (step == "quantize-npy" || step == "build")
	if step != "inspect" && !withFile {
		for _, f := range v.ShapeFlags {
			args = append(args, "--shape", f)
		}
	}
	var stdout, stderr bytes.Buffer
	exec1 := func(args []string) (timedOut bool, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, optc, args...)
		cmd.Dir = work
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 10 * time.Second
		start := time.Now()
		err = cmd.Run()
		r.Seconds += time.Since(start).Seconds()
		return ctx.Err() != nil, err
	}
	timedOut, err := exec1(args)
	r.Status = "pass"
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == refusedStatus && !timedOut {
		// The guard said no, cleanly (exit 3). A build went on without
		// the refused model: what it wrote is checked below. quantize
		// wrote nothing: the rest of its step must still run with the
		// loss allowed.
		r.Status, r.Err = "guard", errorLine(stderr.String(), stdout.String(), err)
		err = nil
		if step != "build" {
			timedOut, err = exec1(append(args, "--allow-accuracy-loss"))
		}
	}
	switch {
	case timedOut:
		r.Status, r.Err = "TIMEOUT", fmt.Sprintf("no result after %s (optc %s)", timeout, strings.Join(args, " "))
		return r
	case err != nil:
		r.Status, r.Err = "FAIL", errorLine(stderr.String(), stdout.String(), err)
		return r
	}
	switch step {
	case "quantize-random", "quantize-npy":
		r.Metrics = quantizeMetrics(stdout.String())
	case "build":
		r.Metrics = buildMetrics(filepath.Join(work, "build", "report.json"))
	}
	// Every .onnx the step wrote goes through the ONNX checker.
	var files []string
	for _, o := range outs {
		filepath.Walk(o, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".onnx") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(outs) > 0 && len(files) == 0 {
		r.Status, r.Err = "FAIL", "exit 0 but no .onnx written under "+strings.Join(outs, ", ")
		return r
	}
	checked, skipped, cerr := checkONNX(files, work)
	r.Checked, r.CheckSkipped = checked, skipped
	if cerr != "" {
		r.Status, r.Err = "FAIL", cerr
	}
	return r
}

// errorLine is the first line that says what went wrong: optc's one-line
// error on stderr ("optc: ..."), else the last line of stderr or stdout.
func errorLine(stderr, stdout string, err error) string {
	lines := strings.Split(strings.ReplaceAll(stderr, "\r", "\n"), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "optc: ") || strings.HasPrefix(l, "panic: ") || strings.Contains(l, "SIGSEGV") {
			return clip(strings.TrimSpace(l))
		}
	}
	for _, s := range []string{stderr, stdout} {
		ls := strings.Split(strings.TrimSpace(strings.ReplaceAll(s, "\r", "\n")), "\n")
		if l := strings.TrimSpace(ls[len(ls)-1]); l != "" {
			return clip(l)
		}
	}
	return err.Error()
}

// clip keeps a guard refusal whole (its checks and how the fallback
// ended, per target) and cuts a runaway line.
func clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "..."
	}
	return s
}

var (
	cosineRE  = regexp.MustCompile(`cosine (\S+?),`)
	speedupRE = regexp.MustCompile(`p50 batch (\d+)\s.*\(int8 speed-up (\S+)x\)`)
)

// quantizeMetrics takes the INT8 cosine (the smallest over outputs) and
// the speed-ups from optc quantize's summary.
func quantizeMetrics(out string) string {
	minCos, have := math.Inf(1), false
	var sp []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if m := cosineRE.FindStringSubmatch(l); m != nil {
			c, err := strconv.ParseFloat(m[1], 64)
			if err != nil || math.IsNaN(c) {
				c = math.NaN()
			}
			if !have || c < minCos || math.IsNaN(c) {
				minCos, have = c, true
			}
		}
		if m := speedupRE.FindStringSubmatch(l); m != nil {
			sp = append(sp, "b"+m[1]+" "+m[2]+"x")
		}
	}
	var parts []string
	if have {
		parts = append(parts, fmt.Sprintf("cos %.5f", minCos))
	}
	if len(sp) > 0 {
		parts = append(parts, "int8 "+strings.Join(sp, " "))
	}
	return strings.Join(parts, "; ")
}

// buildReport is the part of report.json (docs/report.md, schema 1) the
// table shows.
type buildReport struct {
	Models []struct {
		Name      string `json:"name"`
		Role      string `json:"role"`
		Precision string `json:"precision"`
		Accuracy  *struct {
			Outputs []struct {
				Name   string   `json:"name"`
				Cosine *float64 `json:"cosine"`
			} `json:"outputs"`
		} `json:"accuracy"`
		Delta *struct {
			Speedup []struct {
				Batch int     `json:"batch"`
				P50   float64 `json:"p50"`
			} `json:"speedup"`
		} `json:"delta"`
	} `json:"models"`
	Placement *struct {
		Recommended string `json:"recommended"`
	} `json:"placement"`
}

func buildMetrics(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no report.json"
	}
	var r buildReport
	if err := json.Unmarshal(b, &r); err != nil {
		return "report.json: " + clip(err.Error())
	}
	var parts []string
	for _, m := range r.Models {
		if m.Name != "model.int8.onnx" || m.Accuracy == nil {
			continue
		}
		c := math.Inf(1)
		for _, o := range m.Accuracy.Outputs {
			if o.Cosine != nil && *o.Cosine < c {
				c = *o.Cosine
			}
		}
		if !math.IsInf(c, 1) {
			parts = append(parts, fmt.Sprintf("int8 cos %.5f", c))
		}
	}
	if r.Placement != nil && r.Placement.Recommended != "" {
		parts = append(parts, "ort artifact "+r.Placement.Recommended)
	}
	for _, m := range r.Models {
		if m.Name != "ort/model.ort" || m.Delta == nil {
			continue
		}
		var sp []string
		for _, s := range m.Delta.Speedup {
			sp = append(sp, fmt.Sprintf("b%d %.2fx", s.Batch, s.P50))
		}
		if len(sp) > 0 {
			parts = append(parts, "ort "+strings.Join(sp, " "))
		}
	}
	return strings.Join(parts, "; ")
}

// ---------------------------------------------------------------- the CLI

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// optcBinary is $ZOO_OPTC or optc built once from this tree.
func optcBinary(t *testing.T) string {
	if p := os.Getenv("ZOO_OPTC"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "optc-zoo-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "optc")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		cmd := exec.Command(gobin, "build", "-o", builtPath, "./cmd/optc")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/optc: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtPath
}

// TestMain removes the optc built for the suite.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtPath != "" {
		os.RemoveAll(filepath.Dir(builtPath))
	}
	os.Exit(code)
}

// ---------------------------------------------------------------- ONNX checker

const python = "/usr/bin/python3"

// checkerScript validates each model with onnx.checker (full_check: shape
// inference too) and prints one line per file: OK, SKIP reason or FAIL
// message. python3-onnx 1.12 knows the default domain up to opset 17 and
// IR 8: newer models are skipped, saying so.
const checkerScript = `
import sys, onnx
for p in sys.argv[1:]:
    try:
        m = onnx.load(p, load_external_data=False)
        ops = {o.domain or "ai.onnx": o.version for o in m.opset_import}
        why = []
        if m.ir_version > 8:
            why.append("IR %d > 8" % m.ir_version)
        if ops.get("ai.onnx", 0) > 17:
            why.append("opset %d > 17" % ops["ai.onnx"])
        if why:
            print("SKIP", p, "onnx 1.12's checker covers opset <= 17, IR <= 8; this model has", ", ".join(why))
            continue
        onnx.checker.check_model(p, full_check=True)
        print("OK", p)
    except Exception as e:
        print("FAIL", p, " ".join(str(e).split())[:300])
`

var checkerOnce sync.Once
var checkerErr error

func requireChecker(t *testing.T) {
	checkerOnce.Do(func() {
		out, err := exec.Command(python, "-c", "import onnx").CombinedOutput()
		if err != nil {
			checkerErr = fmt.Errorf("%s cannot import onnx (apt-get install python3-onnx): %v %s", python, err, bytes.TrimSpace(out))
		}
	})
	if checkerErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(checkerErr)
		}
		t.Skip(checkerErr)
	}
}

// checkONNX returns how many files passed, the skipped ones with the
// reason, and the first failure ("" when none).
func checkONNX(files []string, work string) (int, []string, string) {
	if len(files) == 0 {
		return 0, nil, ""
	}
	sort.Strings(files)
	cmd := exec.Command(python, append([]string{"-c", checkerScript}, files...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, nil, "onnx.checker did not run: " + clip(strings.TrimSpace(err.Error()+" "+errOut.String()))
	}
	ok, fail := 0, ""
	var skipped []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 2 {
			continue
		}
		rel, _ := filepath.Rel(work, f[1])
		switch f[0] {
		case "OK":
			ok++
		case "SKIP":
			skipped = append(skipped, rel+": "+f[2])
		case "FAIL":
			if fail == "" {
				msg := ""
				if len(f) == 3 {
					msg = f[2]
				}
				fail = clip("onnx.checker: " + rel + ": " + msg)
			}
		}
	}
	if ok+len(skipped) == 0 && fail == "" {
		return 0, nil, "onnx.checker printed nothing: " + clip(errOut.String())
	}
	return ok, skipped, fail
}

// ---------------------------------------------------------------- the table

type report struct {
	mu      sync.Mutex
	mode    string
	man     manifest
	steps   []string
	path    string
	start   time.Time
	results []result
}

func (r *report) add(x result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, x)
}

func (r *report) write() error {
	if r.path == "" {
		return nil
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.path)
}

func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func (r *report) markdown() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# Model zoo conformance\n\n")
	fmt.Fprintf(&b, "Generated by `make zoo` (tools/zoo, ZOO=%s): each model of `zoo/models.json` "+
		"(scripts/zoo/gen.py, generator %s, torch %s, torchvision %s) run through the optc CLI as a user runs it, "+
		"with no flags but the required ones and, where no data file gives them, `--shape` for dynamic non-batch dims. "+
		"Every `.onnx` a step writes is validated by `onnx.checker.check_model(full_check=True)` (python3-onnx 1.12).\n\n",
		r.mode, r.man.GeneratorHash, r.man.Torch, r.man.Torchvision)
	fmt.Fprintf(&b, "Steps: `inspect`; `optimize` (default check); `quantize-random` (`--calib-data random`); "+
		"`quantize-npy` (`--calib-data` the model's calibration file); `build` (`--int8 --target all`, calibration file or random).\n\n")
	fmt.Fprintf(&b, "Run started %s on %s, %d cores; %s elapsed at the last step written.\n\n", r.start.UTC().Format("2006-01-02 15:04 UTC"), cpuName(), runtime.NumCPU(), time.Since(r.start).Round(time.Second))

	type key struct{ m, v string }
	var order []key
	cells := map[key]map[string]result{}
	fails, passes, na, guards := 0, 0, 0, 0
	for _, x := range r.results {
		k := key{x.Model, x.Variant}
		if cells[k] == nil {
			cells[k] = map[string]result{}
			order = append(order, k)
		}
		cells[k][x.Step] = x
		switch x.Status {
		case "pass":
			passes++
		case "n/a":
			na++
		case "guard":
			guards++
		default:
			fails++
		}
	}
	fmt.Fprintf(&b, "**%d passed, %d refused by the accuracy guard (then passed with --allow-accuracy-loss), %d failed, %d not applicable** (of %d steps run).\n\n", passes, guards, fails, na, len(r.results))
	b.WriteString("| model | variant |")
	for _, s := range r.steps {
		b.WriteString(" " + s + " |")
	}
	b.WriteString("\n|---|---|")
	for range r.steps {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range order {
		fmt.Fprintf(&b, "| %s | %s |", k.m, k.v)
		for _, s := range r.steps {
			x, ok := cells[k][s]
			switch {
			case !ok:
				b.WriteString(" |")
			case x.Status == "n/a":
				b.WriteString(" n/a |")
			case x.Status == "pass":
				fmt.Fprintf(&b, " pass %.1fs |", x.Seconds)
			case x.Status == "guard":
				fmt.Fprintf(&b, " guard %.1fs |", x.Seconds)
			default:
				fmt.Fprintf(&b, " **%s** %.1fs |", x.Status, x.Seconds)
			}
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Measurements\n\nINT8 cosine to float (the smallest over outputs), INT8 speed-up at p50 " +
		"(quantize's own figures, on this shared machine: noise-level), and for build the ORT CPU artifact " +
		"placement decision and the speed-up of `ort/model.ort` over the input (report.json).\n\n")
	b.WriteString("| model | variant | step | figures | onnx files checked |\n|---|---|---|---|---|\n")
	for _, k := range order {
		for _, s := range r.steps {
			x, ok := cells[k][s]
			if !ok || (x.Status != "pass" && x.Status != "guard") || s == "inspect" {
				continue
			}
			chk := fmt.Sprint(x.Checked)
			if len(x.CheckSkipped) > 0 {
				chk += fmt.Sprintf(" (%d skipped: %s)", len(x.CheckSkipped), x.CheckSkipped[0])
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", k.m, k.v, s, mdCell(x.Metrics), mdCell(chk))
		}
	}

	if fails > 0 {
		b.WriteString("\n## Failure classes\n\nThe failures grouped by their error line with paths, names and numbers taken out, most frequent first.\n\n| failures | error (normalised) | where |\n|---|---|---|\n")
		type class struct {
			msg   string
			where []string
		}
		classes := map[string]*class{}
		var corder []string
		for _, k := range order {
			for _, s := range r.steps {
				x, ok := cells[k][s]
				if !ok || x.Status == "pass" || x.Status == "n/a" || x.Status == "guard" {
					continue
				}
				n := normalise(x.Err)
				if classes[n] == nil {
					classes[n] = &class{msg: n}
					corder = append(corder, n)
				}
				classes[n].where = append(classes[n].where, k.m+"/"+k.v+" "+s)
			}
		}
		sort.SliceStable(corder, func(i, j int) bool { return len(classes[corder[i]].where) > len(classes[corder[j]].where) })
		for _, n := range corder {
			c := classes[n]
			w := c.where
			if len(w) > 8 {
				w = append(w[:8:8], fmt.Sprintf("and %d more", len(c.where)-8))
			}
			fmt.Fprintf(&b, "| %d | %s | %s |\n", len(c.where), mdCell(c.msg), mdCell(strings.Join(w, ", ")))
		}
		b.WriteString("\n## Failures\n\nThe first error line of each failed step.\n\n| model | variant | step | error |\n|---|---|---|---|\n")
		for _, k := range order {
			for _, s := range r.steps {
				x, ok := cells[k][s]
				if !ok || x.Status == "pass" || x.Status == "n/a" || x.Status == "guard" {
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.m, k.v, s, mdCell(x.Err))
			}
		}
	}
	if guards > 0 {
		b.WriteString("\n## Refused by the accuracy guard\n\nThe guard's line for each step where it refused INT8 (exit 3: quantize then passed with --allow-accuracy-loss, the figures above; build wrote and checked every other artifact). The zoo's weights are random: INT8 keeps few of these networks' outputs on standard-normal inputs (docs/quantize.md, what the random distribution changes).\n\n| model | variant | step | guard |\n|---|---|---|---|\n")
		for _, k := range order {
			for _, s := range r.steps {
				if x, ok := cells[k][s]; ok && x.Status == "guard" {
					fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.m, k.v, s, mdCell(x.Err))
				}
			}
		}
	}
	return b.String()
}

var (
	pathRE   = regexp.MustCompile(`/\S*/zoo/\S+?\.(onnx|npy|npz)`)
	quotedRE = regexp.MustCompile(`"[^"]*"`)
	fixedRE  = regexp.MustCompile(`\(fixed to \[[^\]]*\] by --shape \S+\)`)
	typedRE  = regexp.MustCompile(`\b[a-z]+\d*\[[^\]]*\]`)
	numberRE = regexp.MustCompile(`\d+(\.\d+)?`)
)

// normalise takes the model-specific parts out of an error line so that
// the same failure in many models reads the same.
func normalise(e string) string {
	e = pathRE.ReplaceAllString(e, "FILE")
	e = quotedRE.ReplaceAllString(e, `"X"`)
	e = fixedRE.ReplaceAllString(e, "(fixed by --shape)")
	e = typedRE.ReplaceAllString(e, "T[...]")
	return numberRE.ReplaceAllString(e, "N")
}

func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			if _, v, ok := strings.Cut(l, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
