package atomicfile

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentWrites: writers in parallel register and commit their
// temporaries (make test runs it under -race); each file appears whole and
// no temporary stays behind or registered.
func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(dir, string(rune('a'+i)))
			if err := Write(path, []byte("part one, "), []byte(path)); err != nil {
				t.Error(err)
			}
			scratch, cleanup, err := ScratchDir("optc-test-")
			if err != nil {
				t.Error(err)
				return
			}
			cleanup()
			if _, err := os.Stat(scratch); !os.IsNotExist(err) {
				t.Errorf("scratch folder %s is still there", scratch)
			}
		}()
	}
	wg.Wait()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 16 {
		t.Errorf("%d entries, want the 16 files: %v", len(entries), entries)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if b, err := os.ReadFile(path); err != nil || string(b) != "part one, "+path {
			t.Errorf("%s: %q, %v", e.Name(), b, err)
		}
	}
	temps.Lock()
	left := len(temps.removes)
	temps.Unlock()
	if left != 0 {
		t.Errorf("%d temporaries still registered", left)
	}
}

// TestFailedWriteLeavesNothing: a write into a missing folder fails and
// registers nothing.
func TestFailedWriteLeavesNothing(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "f"), []byte("x")); err == nil {
		t.Fatal("wrote into a missing folder")
	}
	temps.Lock()
	defer temps.Unlock()
	if len(temps.removes) != 0 {
		t.Errorf("%d temporaries still registered", len(temps.removes))
	}
}
