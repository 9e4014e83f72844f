package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// The names of temporaries: a file or folder at dest is written as
// .BASE.tmp-RANDOM beside it (BASE its name). A working folder has its
// lock file beside it, .BASE.tmp-RANDOM.lock, and an output folder being
// replaced goes aside as .BASE.tmp-RANDOM.old (Replace).
const (
	tmpMark    = ".tmp-"
	lockSuffix = ".lock"
	oldSuffix  = ".old"
)

// LegacyAge is how long nothing must have been written into a working
// folder without a lock file (made by an optc from before the locks)
// before RemoveStale takes it for stale: longer than any build is known
// to run.
const LegacyAge = 24 * time.Hour

// TempPrefix is how the names of dest's temporaries begin.
func TempPrefix(dest string) string { return "." + filepath.Base(filepath.Clean(dest)) + tmpMark }

// LockedDir makes a working folder for dest beside it (TempPrefix), and
// its lock file beside that, locked (flock) until unlock, which removes
// the lock file. The lock is the kernel's: it ends with the process
// however the process ends, which is how RemoveStale tells a folder a
// live process works in from one an interrupted process left.
func LockedDir(dest string) (dir string, unlock func(), err error) {
	parent, prefix := filepath.Dir(filepath.Clean(dest)), TempPrefix(dest)
	for range 100 {
		lk, err := os.CreateTemp(parent, prefix+"*"+lockSuffix)
		if err != nil {
			return "", nil, err
		}
		if !holdLock(lk) { // a cleaner took it for stale between the two
			lk.Close()
			continue
		}
		dir = strings.TrimSuffix(lk.Name(), lockSuffix)
		if err := os.Mkdir(dir, 0o700); err != nil {
			os.Remove(lk.Name())
			lk.Close()
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return "", nil, err
		}
		return dir, func() {
			os.Remove(lk.Name())
			lk.Close()
		}, nil
	}
	return "", nil, fmt.Errorf("no working folder for %s: 100 names were taken", dest)
}

// createLocked makes a temporary file named prefix+RANDOM in dir, locked
// on itself (through a second descriptor, so that closing the file before
// its rename keeps the lock) until unlock.
func createLocked(dir, prefix string) (*os.File, func(), error) {
	for range 100 {
		f, err := os.CreateTemp(dir, prefix+"*")
		if err != nil {
			return nil, nil, err
		}
		lk, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, nil, err
		}
		if !holdLock(lk) { // a cleaner took it for stale between the two
			lk.Close()
			f.Close()
			continue
		}
		return f, func() { lk.Close() }, nil
	}
	return nil, nil, fmt.Errorf("no temporary file in %s: 100 names were taken", dir)
}

// holdLock takes f's lock for this process. It fails when another
// process holds it, or f's name no longer leads to f (a cleaner removed
// it); a file system without locks is taken as locked.
func holdLock(f *os.File) bool {
	switch tryLock(f) {
	case lockHeld:
		return false
	case lockTaken:
		return sameFile(f, f.Name())
	}
	return true
}

// sameFile reports whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// RemoveStale removes, beside dest, what interrupted optc processes left:
// every working folder (of any destination) whose lock file's lock it can
// take, with the lock file, and the output folder an interrupted
// Replace had put aside (restored in place when the destination is
// missing, else removed); of dest's own temporaries, the temporary files
// whose lock it can take, and working folders without a lock file
// (made by an optc from before the locks) that nothing was written into
// for LegacyAge. A folder or file a live process holds is left alone.
// Each one removed is told to report (when not nil) in a sentence. A
// cleanup that fails leaves things as they are: it is not the caller's
// failure.
func RemoveStale(dest string, report func(msg string)) {
	removeStale(filepath.Dir(filepath.Clean(dest)), TempPrefix(dest), true, report)
}

// removeStale is RemoveStale in dir for the temporaries named prefix*;
// folders says whether to look at working folders at all (a file's write
// looks only at its own temporary files).
func removeStale(dir, prefix string, folders bool, report func(string)) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	say := func(format string, args ...any) {
		if report != nil {
			report(fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".") || !strings.Contains(n, tmpMark) {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(n, lockSuffix), oldSuffix)
		if seen[base] {
			continue
		}
		seen[base] = true
		switch {
		case names[base+lockSuffix]:
			if folders {
				removeLocked(dir, base, say)
			}
		case !strings.HasPrefix(base, prefix):
			// Not dest's, and no lock file says it is optc's.
		default:
			removeUnlocked(dir, base, folders, say)
		}
	}
}

// removeLocked removes the working folder base (and base.old) when its
// lock file's lock can be taken: its process is gone.
func removeLocked(dir, base string, say func(string, ...any)) {
	lockPath := filepath.Join(dir, base+lockSuffix)
	lk, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer lk.Close()
	if tryLock(lk) != lockTaken || !sameFile(lk, lockPath) {
		return
	}
	p := filepath.Join(dir, base)
	if _, err := os.Lstat(p); err == nil {
		if os.RemoveAll(p) != nil {
			return
		}
		say("removed %s, left by an interrupted optc", p)
	}
	if old := p + oldSuffix; exists(old) {
		dest := filepath.Join(dir, strings.TrimPrefix(base[:strings.LastIndex(base, tmpMark)], "."))
		switch {
		case !exists(dest) && os.Rename(old, dest) == nil:
			say("restored %s from %s, which an interrupted --force was replacing", dest, old)
		case os.RemoveAll(old) == nil:
			say("removed %s, left by an interrupted optc", old)
		default:
			return
		}
	}
	os.Remove(lockPath)
}

// removeUnlocked removes dest's temporaries without a lock file: a
// temporary file whose own lock can be taken, and, when folders is set, a
// working folder (or the .old of one) nothing was written into for
// LegacyAge.
func removeUnlocked(dir, base string, folders bool, say func(string, ...any)) {
	for _, p := range []string{filepath.Join(dir, base), filepath.Join(dir, base+oldSuffix)} {
		st, err := os.Lstat(p)
		switch {
		case err != nil:
		case st.IsDir():
			if folders && time.Since(st.ModTime()) > LegacyAge && os.RemoveAll(p) == nil {
				say("removed %s, left by an interrupted optc (no lock, untouched for %s)", p, LegacyAge)
			}
		case st.Mode().IsRegular():
			if removeFileIfFree(p) {
				say("removed %s, left by an interrupted optc", p)
			}
		}
	}
}

// removeFileIfFree removes the temporary file at p when its lock can be
// taken.
func removeFileIfFree(p string) bool {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return tryLock(f) == lockTaken && sameFile(f, p) && os.Remove(p) == nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Replace renames the working folder tmp (LockedDir) over the folder
// dest: dest goes aside first (tmp + ".old"; when the process dies before
// tmp is in place, RemoveStale puts it back), and is removed once tmp is
// in place. If tmp cannot be put in place dest is put back.
func Replace(tmp, dest string) error {
	old := tmp + oldSuffix
	if err := os.Rename(dest, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Rename(old, dest)
		return err
	}
	return os.RemoveAll(old)
}

// reporter hears of the stale temporaries CreateTemp and WorkDir remove.
var reporter atomic.Pointer[func(string)]

// SetStaleReporter makes CreateTemp and WorkDir tell report, in a
// sentence, of each stale temporary they remove (nil: nobody).
func SetStaleReporter(report func(msg string)) {
	if report == nil {
		reporter.Store(nil)
		return
	}
	reporter.Store(&report)
}

func report(msg string) {
	if r := reporter.Load(); r != nil {
		(*r)(msg)
	}
}
