package export

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTrtexec is a stand-in for trtexec on PATH: for --version it prints
// the banner of $FAKE_TRT_VERSION (nothing when unset); otherwise it
// records its arguments, one a line, in $FAKE_TRT_ARGS and prints a run's
// banner and performance summary as TensorRT does. It tests the script's
// logic; nothing is measured.
const fakeTrtexec = `#!/bin/sh
if [ "${1:-}" = --version ]; then
	if [ -n "${FAKE_TRT_VERSION:-}" ]; then
		echo "&&&& RUNNING TensorRT.trtexec [TensorRT v$FAKE_TRT_VERSION] [b17] # trtexec --version"
	fi
	exit 1
fi
for a in "$@"; do printf '%s\n' "$a"; done >"$FAKE_TRT_ARGS"
echo "&&&& RUNNING TensorRT.trtexec [TensorRT v${FAKE_TRT_VERSION:-100300}] [b17] # trtexec $*"
echo "[12/02/2026-18:00:00] [I] === Performance summary ==="
echo "[12/02/2026-18:00:00] [I] Throughput: 2699.06 qps"
echo "[12/02/2026-18:00:00] [I] Latency: min = 0.36377 ms, max = 0.52124 ms, mean = 0.374511 ms, median = 0.372559 ms, percentile(90%) = 0.38 ms, percentile(95%) = 0.39 ms, percentile(99%) = 0.412598 ms"
echo "[12/02/2026-18:00:00] [I] GPU Compute Time: min = 0.339966 ms, max = 0.48999 ms, mean = 0.350241 ms, median = 0.348389 ms, percentile(90%) = 0.36 ms, percentile(95%) = 0.37 ms, percentile(99%) = 0.385986 ms"
echo "&&&& PASSED TensorRT.trtexec [TensorRT v${FAKE_TRT_VERSION:-100300}] [b17]"
`

// buildEngine writes the script for opts into a fresh folder, runs it
// with the fake trtexec first on PATH and env added, and returns the exit
// status, trtexec's arguments and the output.
func buildEngine(t *testing.T, opts EngineScriptOptions, env []string, args ...string) (int, []string, string) {
	t.Helper()
	script, err := EngineScript(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	art := filepath.Join(dir, "my artifacts")
	for _, d := range []string{bin, art} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "trtexec"), []byte(fakeTrtexec), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(art, "build_engine.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "args.txt")
	cmd := exec.Command(path, args...)
	cmd.Dir = dir // the script must find its files from its own folder
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_TRT_ARGS="+record, "TRT_MAJOR=", "TRTEXEC=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	status := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		status = ee.ExitCode()
	}
	b, err := os.ReadFile(record)
	if err != nil {
		return status, nil, string(out)
	}
	return status, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), string(out)
}

func TestEngineScriptFlags(t *testing.T) {
	shapes := map[string]ShapeRange{
		"x":         {Min: []int64{1, 3, 48, 192}, Opt: []int64{8, 3, 48, 192}, Max: []int64{32, 3, 48, 192}},
		"input:0":   {Min: []int64{1}, Opt: []int64{2}, Max: []int64{4}},
		"b lengths": {Min: []int64{1, 1}, Opt: []int64{8, 1}, Max: []int64{32, 1}},
	}
	common := []string{"--onnx=model.onnx", "--saveEngine=model's.engine", "--timingCacheFile=timing.cache",
		"--minShapes=b lengths:1x1,'input:0':1,x:1x3x48x192",
		"--optShapes=b lengths:8x1,'input:0':2,x:8x3x48x192",
		"--maxShapes=b lengths:32x1,'input:0':4,x:32x3x48x192"}
	for _, c := range []struct {
		name      string
		precision EnginePrecision
		env       []string
		want      []string // precision flags, after the common ones
	}{
		{"qdq on 10 (banner)", EngineQDQ, []string{"FAKE_TRT_VERSION=100300"}, []string{"--int8", "--fp16"}},
		{"qdq on 8.6 (banner)", EngineQDQ, []string{"FAKE_TRT_VERSION=8601"}, []string{"--int8", "--fp16"}},
		{"qdq on 11 (banner)", EngineQDQ, []string{"FAKE_TRT_VERSION=110000"}, []string{"--stronglyTyped"}},
		{"qdq, TRT_MAJOR wins over the banner", EngineQDQ, []string{"FAKE_TRT_VERSION=100300", "TRT_MAJOR=11"}, []string{"--stronglyTyped"}},
		{"fp16 on 10", EngineFP16, []string{"TRT_MAJOR=10"}, []string{"--fp16"}},
		{"fp16 on 11", EngineFP16, []string{"FAKE_TRT_VERSION=110100"}, []string{"--stronglyTyped"}},
		{"calibration cache on 10", EngineCalibCache, []string{"FAKE_TRT_VERSION=101600"}, []string{"--int8", "--calib=calib.cache"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := EngineScriptOptions{Model: "model.onnx", Engine: "model's.engine", Precision: c.precision,
				TimingCache: "timing.cache", Shapes: shapes}
			if c.precision == EngineCalibCache {
				opts.CalibCache = "calib.cache"
			}
			status, args, out := buildEngine(t, opts, c.env, "--verbose")
			want := append(append(append([]string(nil), common...), c.want...), "--verbose")
			if status != 0 || strings.Join(args, "\n") != strings.Join(want, "\n") {
				t.Fatalf("status %d, trtexec got\n%s\nwant\n%s\noutput: %s", status, strings.Join(args, "\n"), strings.Join(want, "\n"), out)
			}
			rep, err := ParseTrtexecReport(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			if p99, _ := rep.GPUCompute.P(99); rep.ThroughputQPS != 2699.06 || p99 != 0.385986 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

func TestEngineScriptRefusesToBuild(t *testing.T) {
	opts := EngineScriptOptions{Model: "m.onnx", Engine: "m.engine", Precision: EngineCalibCache, CalibCache: "c.cache"}
	for _, c := range []struct {
		name   string
		env    []string
		status int
		want   string
	}{
		{"calibration cache on 11", []string{"TRT_MAJOR=11"}, 1, "removed implicit INT8 calibration"},
		{"no version", nil, 1, "cannot read the TensorRT version"},
		{"bad TRT_MAJOR", []string{"TRT_MAJOR=ten"}, 2, "not a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, args, out := buildEngine(t, opts, c.env)
			if status != c.status || args != nil || !strings.Contains(out, c.want) {
				t.Errorf("status %d, trtexec ran with %v, output %q; want status %d mentioning %q", status, args, out, c.status, c.want)
			}
		})
	}
}

func TestEngineScriptIsCleanSh(t *testing.T) {
	opts := EngineScriptOptions{Model: "/models/a b.onnx", Engine: "out/a.engine", Precision: EngineQDQ, TimingCache: "t.cache",
		Shapes: map[string]ShapeRange{"x": {Min: []int64{1, 3}, Opt: []int64{4, 3}, Max: []int64{8, 3}}, "y": {Min: []int64{1}, Opt: []int64{1}, Max: []int64{1}}}}
	script, err := EngineScript(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		again, _ := EngineScript(opts)
		if !bytes.Equal(script, again) {
			t.Fatal("the same options gave different scripts")
		}
	}
	path := filepath.Join(t.TempDir(), "build_engine.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Log("shellcheck not installed: only sh -n checked")
		return
	}
	if out, err := exec.Command(sc, "--shell=sh", path).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s\n%s", err, out, script)
	}
	for _, p := range []EnginePrecision{EngineFP16, EngineCalibCache} {
		o := opts
		o.Precision = p
		if p == EngineCalibCache {
			o.CalibCache = "c.cache"
		}
		s, err := EngineScript(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, s, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sc, "--shell=sh", path).CombinedOutput(); err != nil {
			t.Errorf("shellcheck (%s): %v\n%s", p, err, out)
		}
	}
}

func TestEngineScriptBadOptions(t *testing.T) {
	ok := ShapeRange{Min: []int64{1, 3}, Opt: []int64{2, 3}, Max: []int64{4, 3}}
	for _, c := range []struct {
		name string
		opts EngineScriptOptions
		want string
	}{
		{"no model", EngineScriptOptions{Engine: "e", Precision: EngineQDQ}, "required"},
		{"unknown precision", EngineScriptOptions{Model: "m", Engine: "e", Precision: "int4"}, "unknown precision"},
		{"cache missing", EngineScriptOptions{Model: "m", Engine: "e", Precision: EngineCalibCache}, "needs the calibration cache"},
		{"cache for qdq", EngineScriptOptions{Model: "m", Engine: "e", Precision: EngineQDQ, CalibCache: "c"}, "only for precision"},
		{"newline in path", EngineScriptOptions{Model: "m\n", Engine: "e", Precision: EngineQDQ}, "control character"},
		{"comma in input", EngineScriptOptions{Model: "m", Engine: "e", Precision: EngineQDQ, Shapes: map[string]ShapeRange{"a,b": ok}}, `"a,b"`},
		{"rank mismatch", EngineScriptOptions{Model: "m", Engine: "e", Precision: EngineQDQ, Shapes: map[string]ShapeRange{"x": {Min: []int64{1}, Opt: []int64{2, 3}, Max: []int64{4, 3}}}}, "same rank"},
		{"min above opt", EngineScriptOptions{Model: "m", Engine: "e", Precision: EngineQDQ, Shapes: map[string]ShapeRange{"x": {Min: []int64{1, 3}, Opt: []int64{2, 2}, Max: []int64{4, 3}}}}, `"x" dim 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := EngineScript(c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}
