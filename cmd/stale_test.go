package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// TestKilledBuildLeftovers: a build killed with SIGKILL (no handler runs)
// leaves its working folder; the next build into the same parent removes
// it and says so, one line. A working folder whose lock a live process
// holds (here the test itself, as a build still running would) is left
// alone by a build running beside it.
func TestKilledBuildLeftovers(t *testing.T) {
	ortenv.Require(t)
	bin := buildOptc(t)
	root := testenv.RepoRoot()
	parent := t.TempDir()

	killed := exec.Command(bin, "build", "--config", "testdata/mnist/optc.yaml", "-o", filepath.Join(parent, "mnist"))
	killed.Dir = root
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	var work []string
	for deadline := time.Now().Add(interruptTimeout); len(work) == 0; {
		if time.Now().After(deadline) {
			killed.Process.Kill()
			t.Fatalf("no working folder with model.fp32.onnx in %s after %v", parent, interruptTimeout)
		}
		work, _ = filepath.Glob(filepath.Join(parent, ".mnist.tmp-*", "model.fp32.onnx"))
		time.Sleep(time.Millisecond)
	}
	killed.Process.Kill()
	killed.Wait()
	left := filepath.Dir(work[0])
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("SIGKILL: the working folder is gone (%v); nothing to test", err)
	}
	if _, err := os.Stat(left + ".lock"); err != nil {
		t.Fatalf("SIGKILL left the working folder without its lock file: %v", err)
	}

	// Held by the test: a build still at work, as far as anyone can tell.
	busy, unlock, err := atomicfile.LockedDir(filepath.Join(parent, "busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	next := exec.Command(bin, "build", testenv.Model("mnist_cnn.onnx"), "-o", filepath.Join(parent, "next"),
		"--latency-batches", "1", "--latency-duration", "20ms")
	stderr, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	want := "build: removed " + left + ", left by an interrupted optc\n"
	if strings.Count(string(stderr), "build: removed ") != 1 || !strings.Contains(string(stderr), want) {
		t.Errorf("stderr does not say, once, %q:\n%s", want, stderr)
	}
	if got, want := temporaries(t, parent), []string{filepath.Base(busy), filepath.Base(busy) + ".lock"}; !slices.Equal(got, want) {
		t.Errorf("temporaries left: %q, want the live build's %q", got, want)
	}
}

// TestRunAndOptimizeRemoveLeftovers: optc run's working folder and the
// temporary file of optc optimize -o, as SIGKILL leaves them (nothing
// holds their locks), are removed by the next command writing there, one
// stderr line each.
func TestRunAndOptimizeRemoveLeftovers(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, ".outs.tmp-123")
	os.Mkdir(runDir, 0o700)
	os.WriteFile(filepath.Join(runDir, "logits.npy"), []byte("partial"), 0o644)
	os.WriteFile(runDir+".lock", nil, 0o600)
	partial := filepath.Join(dir, ".m.onnx.tmp-456")
	os.WriteFile(partial, []byte("partial"), 0o600)

	model := testenv.Model("mnist_cnn.onnx")
	status, _, stderr := run(t, "run", model, "--data", "random", "-o", filepath.Join(dir, "outs"))
	if want := "optc: removed " + runDir + ", left by an interrupted optc\n"; status != 0 || stderr != want {
		t.Errorf("run: status %d, stderr %q, want %q", status, stderr, want)
	}
	status, _, stderr = run(t, "optimize", model, "-o", filepath.Join(dir, "m.onnx"), "--no-check")
	if want := "optc: removed " + partial + ", left by an interrupted optc\n"; status != 0 || stderr != want {
		t.Errorf("optimize: status %d, stderr %q, want %q", status, stderr, want)
	}
	if left := temporaries(t, dir); len(left) > 0 {
		t.Errorf("left %q", left)
	}
}
