//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

type lockResult int

const (
	lockTaken       lockResult = iota // this process holds it now
	lockHeld                          // another open file holds it
	lockUnsupported                   // the file system has no locks
)

// tryLock takes an exclusive flock on f without waiting. The lock lasts
// until f is closed, or the process ends, however it ends.
func tryLock(f *os.File) lockResult {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return lockTaken
	case errors.Is(err, syscall.EWOULDBLOCK):
		return lockHeld
	}
	return lockUnsupported
}
