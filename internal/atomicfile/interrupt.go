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

// Temp is a temporary file or folder registered with Track.
type Temp struct{ id int }

// Track registers remove, which deletes a temporary file or folder, until
// the temporary is committed or dropped.
func Track(remove func()) *Temp {
	temps.Lock()
	defer temps.Unlock()
	t := &Temp{temps.next}
	temps.next++
	temps.removes[t.id] = remove
	return t
}

// Commit runs rename, which moves the temporary into place, and forgets
// it. Against RemoveTemps it is all or nothing: an interrupt either
// removes the temporary before the rename or comes after it.
func (t *Temp) Commit(rename func() error) error {
	temps.Lock()
	defer temps.Unlock()
	delete(temps.removes, t.id)
	return rename()
}

// Drop forgets the temporary (its writer removed it).
func (t *Temp) Drop() {
	temps.Lock()
	delete(temps.removes, t.id)
	temps.Unlock()
}

// RemoveTemps removes every registered temporary, for a process about to
// exit on a signal. It keeps the registry locked, so that no rename can
// follow: the caller must exit.
func RemoveTemps() {
	temps.Lock()
	for _, remove := range temps.removes {
		remove()
	}
}

// ScratchDir makes a folder for files a command needs only while it runs
// (os.MkdirTemp("", pattern)), removed by cleanup or on an interrupt.
func ScratchDir(pattern string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	t := Track(func() { os.RemoveAll(dir) })
	return dir, func() {
		os.RemoveAll(dir)
		t.Drop()
	}, nil
}
