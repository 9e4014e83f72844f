// Package atomicfile writes a file so that it appears whole or not at all:
// the bytes go to a temporary file in the same folder, which is synced and
// renamed over the destination only when complete. Temporaries are
// registered, so that a signal removes them (RemoveTemps), and locked, so
// that what a killed process left can be told from what a live one works
// on and removed by the next process writing there (RemoveStale).
package atomicfile

import (
	"errors"
	"os"
)

// Write writes the parts, in order, to path (mode 0644). On failure
// nothing is left behind and an existing file at path is untouched.
func Write(path string, parts ...[]byte) (err error) {
	f, tmp, err := CreateTemp(path)
	if err != nil {
		return unwrap(err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			tmp.Drop()
			err = unwrap(err)
		}
	}()
	for _, p := range parts {
		if _, err = f.Write(p); err != nil {
			return err
		}
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return tmp.Commit(func() error { return os.Rename(f.Name(), path) })
}

// unwrap drops the os.PathError wrapping so that messages name the
// destination once, as the caller words it.
func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
