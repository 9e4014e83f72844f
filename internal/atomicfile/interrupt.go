package atomicfile

import (
	"os"
	"sync"
)

// temps holds how to remove each temporary file or folder being written
// now, so that an interrupted process (Ctrl-C, kill) leaves none behind.
var temps = struct {
	sync.Mutex
	next    int
	removes map[int]func()
}{removes: map[int]func(){}}

// Temp is a temporary file or folder registered by Create.
type Temp struct{ id int }

// Create runs create, which makes a temporary file or folder and returns
// how to remove it, and registers the remover until the temporary is
// committed or dropped. Both happen under the registry's lock, so an
// interrupt cannot fall between making the temporary and registering it.
func Create(create func() (remove func(), err error)) (*Temp, error) {
	temps.Lock()
	defer temps.Unlock()
	remove, err := create()
	if err != nil {
		return nil, err
	}
	t := &Temp{temps.next}
	temps.next++
	temps.removes[t.id] = remove
	return t, nil
}

// CreateTemp is os.CreateTemp registered with Create.
func CreateTemp(dir, pattern string) (f *os.File, t *Temp, err error) {
	t, err = Create(func() (func(), error) {
		if f, err = os.CreateTemp(dir, pattern); err != nil {
			return nil, err
		}
		return func() { os.Remove(f.Name()) }, nil
	})
	return f, t, err
}

// MkdirTemp is os.MkdirTemp registered with Create.
func MkdirTemp(dir, pattern string) (name string, t *Temp, err error) {
	t, err = Create(func() (func(), error) {
		if name, err = os.MkdirTemp(dir, pattern); err != nil {
			return nil, err
		}
		return func() { os.RemoveAll(name) }, nil
	})
	return name, t, err
}

// Commit runs rename, which moves the temporary into place, and forgets
// it. Against RemoveTemps it is all or nothing: an interrupt either
// removes the temporary before the rename or comes after it.
func (t *Temp) Commit(rename func() error) error { return CommitAll(rename, t) }

// CommitAll is Commit for temporaries that go into place together (a
// model and its side file).
func CommitAll(rename func() error, ts ...*Temp) error {
	temps.Lock()
	defer temps.Unlock()
	for _, t := range ts {
		delete(temps.removes, t.id)
	}
	return rename()
}

// Drop forgets the temporary (its writer removed it).
func (t *Temp) Drop() {
	temps.Lock()
	delete(temps.removes, t.id)
	temps.Unlock()
}

// RemoveTemps removes every registered temporary, for a process about to
// exit on a signal. It keeps the registry locked, so that no temporary can
// be made or renamed after it: the caller must exit.
func RemoveTemps() {
	temps.Lock()
	for _, remove := range temps.removes {
		remove()
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
