package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// temps holds how to remove each temporary file or folder being written
// now, so that an interrupted process (Ctrl-C, kill) leaves none behind.
var temps = struct {
	sync.Mutex
	next    int
	removes map[int]*registered
}{removes: map[int]*registered{}}

type registered struct {
	remove func()
	t      *Temp
}

// Temp is a temporary file or folder registered by Create.
type Temp struct {
	id int
	// release lets go of the temporary's lock (nil: it has none), once.
	release func()
	once    sync.Once
}

// let releases the temporary's lock, once.
func (t *Temp) let() {
	t.once.Do(func() {
		if t.release != nil {
			t.release()
		}
	})
}

// Create runs create, which makes a temporary file or folder and returns
// how to remove it and how to let go of its lock (nil when it has none),
// and registers the remover until the temporary is committed or dropped,
// when the lock is let go. Both happen under the registry's lock, so an
// interrupt cannot fall between making the temporary and registering it.
func Create(create func() (remove, release func(), err error)) (*Temp, error) {
	temps.Lock()
	defer temps.Unlock()
	remove, release, err := create()
	if err != nil {
		return nil, err
	}
	t := &Temp{id: temps.next, release: release}
	temps.next++
	temps.removes[t.id] = &registered{remove, t}
	return t, nil
}

// CreateTemp makes the temporary file a write of dest goes to, beside it
// (TempPrefix), registered with Create and locked for as long as it is a
// temporary (see RemoveStale), after removing the temporaries of dest that
// interrupted processes left (reported to the function SetStaleReporter
// set).
func CreateTemp(dest string) (f *os.File, t *Temp, err error) {
	dir, prefix := filepath.Dir(dest), TempPrefix(dest)
	removeStale(dir, prefix, false, report)
	t, err = Create(func() (func(), func(), error) {
		var unlock func()
		if f, unlock, err = createLocked(dir, prefix); err != nil {
			return nil, nil, err
		}
		return func() { os.Remove(f.Name()) }, unlock, nil
	})
	return f, t, err
}

// MkdirTemp is os.MkdirTemp registered with Create.
func MkdirTemp(dir, pattern string) (name string, t *Temp, err error) {
	t, err = Create(func() (func(), func(), error) {
		if name, err = os.MkdirTemp(dir, pattern); err != nil {
			return nil, nil, err
		}
		return func() { os.RemoveAll(name) }, nil, nil
	})
	return name, t, err
}

// WorkDir makes the working folder of dest beside it (LockedDir),
// registered with Create, after removing the working folders interrupted
// processes left there (RemoveStale, reported to the function
// SetStaleReporter set).
func WorkDir(dest string) (name string, t *Temp, err error) {
	RemoveStale(dest, report)
	t, err = Create(func() (func(), func(), error) {
		var unlock func()
		if name, unlock, err = LockedDir(dest); err != nil {
			return nil, nil, err
		}
		return func() { os.RemoveAll(name) }, unlock, nil
	})
	return name, t, err
}

// Commit runs rename, which moves the temporary into place, and forgets
// it. Against RemoveTemps it is all or nothing: an interrupt either
// removes the temporary before the rename or comes after it.
func (t *Temp) Commit(rename func() error) error { return CommitAll(rename, t) }

// CommitAll is Commit for temporaries that go into place together (a
// model and its side file). Their locks are let go after the rename.
func CommitAll(rename func() error, ts ...*Temp) error {
	temps.Lock()
	defer temps.Unlock()
	for _, t := range ts {
		delete(temps.removes, t.id)
	}
	err := rename()
	for _, t := range ts {
		t.let()
	}
	return err
}

// Drop forgets the temporary (its writer removed it) and lets go of its
// lock.
func (t *Temp) Drop() {
	temps.Lock()
	delete(temps.removes, t.id)
	temps.Unlock()
	t.let()
}

// RemoveTemps removes every registered temporary, for a process about to
// exit on a signal. It keeps the registry locked, so that no temporary can
// be made or renamed after it: the caller must exit.
func RemoveTemps() {
	temps.Lock()
	for _, r := range temps.removes {
		r.remove()
		r.t.let()
	}
}

// ScratchDir makes a folder for files a command needs only while it runs
// (os.MkdirTemp("", pattern)), removed by cleanup or on an interrupt.
func ScratchDir(pattern string) (dir string, cleanup func(), err error) {
	dir, t, err := MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return dir, func() {
		os.RemoveAll(dir)
		t.Drop()
	}, nil
}

// CheckWritable makes and removes the temporary a write of dest would
// make: a command whose work takes minutes calls it before the work, so
// that a folder it cannot write to fails at once (naming the file), not
// after the work is done.
func CheckWritable(dest string) error {
	f, t, err := CreateTemp(dest)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", dest, unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	t.Drop()
	return nil
}
