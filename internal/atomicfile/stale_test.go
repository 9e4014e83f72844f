package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// stale makes what a killed process leaves of a working folder for dest:
// the folder (with a file in it) and its lock file, which nobody holds.
func stale(t *testing.T, dest, random string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(dest), TempPrefix(dest)+random)
	if err := os.MkdirAll(filepath.Join(dir, "ort"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "ort", "model.ort"), dir + lockSuffix} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRemoveStale: working folders whose lock nobody holds go (whatever
// their destination: the lock file says they are optc's), with their
// lock files, and each is reported; one a live process holds stays; an
// output folder an interrupted replace put aside comes back when the
// destination is missing; folders without a lock file go only when they
// are dest's and old; and nothing else in the folder is touched.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	dead := stale(t, dest, "1")
	deadOther := stale(t, filepath.Join(parent, "other"), "2")
	live, unlock, err := LockedDir(filepath.Join(parent, "busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// Killed between Replace's renames: mnist is aside, the new one not
	// yet in place.
	replacing := stale(t, filepath.Join(parent, "mnist"), "3")
	os.MkdirAll(replacing+oldSuffix, 0o755)
	os.WriteFile(filepath.Join(replacing+oldSuffix, "manifest.json"), []byte("old"), 0o644)
	legacyOld := filepath.Join(parent, TempPrefix(dest)+"4")
	legacyNew := filepath.Join(parent, TempPrefix(dest)+"5")
	legacyOther := filepath.Join(parent, TempPrefix(filepath.Join(parent, "else"))+"6")
	for _, p := range []string{legacyOld, legacyNew, legacyOther} {
		os.Mkdir(p, 0o755)
	}
	long := time.Now().Add(-LegacyAge - time.Hour)
	os.Chtimes(legacyOld, long, long)
	os.Chtimes(legacyOther, long, long)
	os.WriteFile(filepath.Join(parent, ".keep.tmp-x"), nil, 0o644) // not dest's: another program's, maybe

	var said []string
	RemoveStale(dest, func(msg string) { said = append(said, msg) })
	got := names(t, parent)
	want := []string{filepath.Base(legacyNew), filepath.Base(legacyOther), ".keep.tmp-x", filepath.Base(live), filepath.Base(live) + lockSuffix, "mnist"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "mnist", "manifest.json")); string(b) != "old" {
		t.Errorf("the output folder put aside was not restored: %q", b)
	}
	for _, p := range []string{dead, deadOther, replacing, legacyOld} {
		if !slices.ContainsFunc(said, func(s string) bool { return strings.HasPrefix(s, "removed "+p+", left by an interrupted optc") }) {
			t.Errorf("no line says %s was removed: %q", p, said)
		}
	}
	if !slices.Contains(said, "restored "+filepath.Join(parent, "mnist")+" from "+replacing+oldSuffix+", which an interrupted --force was replacing") {
		t.Errorf("no line says mnist was restored: %q", said)
	}
	if len(said) != 5 {
		t.Errorf("%d lines, want 5: %q", len(said), said)
	}
}

// TestCreateTempRemovesStale: a write removes the temporary files of the
// same destination that nobody holds (a killed writer's), reporting each,
// and leaves one another writer holds, and other files' alone.
func TestCreateTempRemovesStale(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "m.onnx")
	f, held, err := CreateTemp(dest) // a writer still at work
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close(); os.Remove(f.Name()); held.Drop() }()
	dead := filepath.Join(dir, TempPrefix(dest)+"111")
	os.WriteFile(dead, []byte("partial"), 0o644)
	other := filepath.Join(dir, TempPrefix(filepath.Join(dir, "n.onnx"))+"222")
	os.WriteFile(other, nil, 0o644)
	var said []string
	SetStaleReporter(func(msg string) { said = append(said, msg) })
	defer SetStaleReporter(nil)
	if err := Write(dest, []byte("whole")); err != nil {
		t.Fatal(err)
	}
	got := names(t, dir)
	want := []string{filepath.Base(other), filepath.Base(f.Name()), "m.onnx"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
	if !slices.Equal(said, []string{"removed " + dead + ", left by an interrupted optc"}) {
		t.Errorf("reported %q", said)
	}
}

// TestWorkDirLock: a working folder's lock file is held while the folder
// is in use and goes with it, whether it is committed or dropped.
func TestWorkDirLock(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "run")
	dir, tmp, err := WorkDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	RemoveStale(dest, nil)
	if got := names(t, parent); !slices.Equal(got, []string{filepath.Base(dir), filepath.Base(dir) + lockSuffix}) {
		t.Fatalf("a live working folder: %q", got)
	}
	if err := tmp.Commit(func() error { return os.Rename(dir, dest) }); err != nil {
		t.Fatal(err)
	}
	if got := names(t, parent); !slices.Equal(got, []string{"run"}) {
		t.Errorf("after commit: %q", got)
	}
	dir, tmp, err = WorkDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	tmp.Drop()
	if got := names(t, parent); !slices.Equal(got, []string{"run"}) {
		t.Errorf("after drop: %q", got)
	}
}
