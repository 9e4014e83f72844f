//go:build !unix

package atomicfile

import "os"

type lockResult int

const (
	lockTaken lockResult = iota
	lockHeld
	lockUnsupported
)

// tryLock: without flock nothing can be shown stale by its lock, so
// RemoveStale removes only what LegacyAge allows.
func tryLock(*os.File) lockResult { return lockUnsupported }
