package build

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// folder is the build's working folder: a hidden temporary folder next to
// the destination, renamed into place only when everything succeeded, so
// that a failed or interrupted build leaves no output folder behind. Its
// lock (atomicfile.LockedDir) tells the next build whether a working folder
// it finds is a live build's or one a killed build left.
type folder struct {
	dest, tmp string
	force     bool
	temp      *atomicfile.Temp // removed if the process is interrupted
	mu        sync.Mutex
	done      bool // committed or removed
}

// newFolder creates the working folder for dest, after removing the ones
// killed builds left beside it (atomicfile.RemoveStale, told to report).
// An existing dest is an error unless force is set (it is then replaced
// at commit).
func newFolder(dest string, force bool, report func(msg string)) (*folder, error) {
	if dest == "" {
		return nil, errors.New("no output folder: give -o DIR (or output: in the config)")
	}
	if st, err := os.Stat(dest); err == nil {
		if !st.IsDir() {
			return nil, fmt.Errorf("output %s exists and is not a folder", dest)
		}
		if !force {
			return nil, fmt.Errorf("output folder %s exists; use --force to replace it", dest)
		}
	}
	parent := filepath.Dir(filepath.Clean(dest))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dest, err)
	}
	atomicfile.RemoveStale(dest, report)
	f := &folder{dest: dest, force: force}
	// Removed on an interrupt through f.remove, which also stops the
	// stages from making sub-folders in it again.
	temp, err := atomicfile.Create(func() (func(), func(), error) {
		tmp, unlock, err := atomicfile.LockedDir(dest)
		// Clean, as the paths joined under it are: errors name files
		// in it without it (inBuild), "./.out.tmp-1/" included.
		if f.tmp = tmp; tmp != "" {
			f.tmp = filepath.Clean(tmp)
		}
		return f.remove, unlock, err
	})
	if err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dest, err)
	}
	f.temp = temp
	return f, nil
}

// path is where an artifact is written inside the working folder; sub
// folders are made as needed.
func (f *folder) path(rel string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return "", errors.New("the build was interrupted")
	}
	p := filepath.Join(f.tmp, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

// tmpPath is where rel is in the working folder.
func (f *folder) tmpPath(rel string) string { return filepath.Join(f.tmp, filepath.FromSlash(rel)) }

// commit renames the working folder to the destination, replacing an
// existing one when force was given.
func (f *folder) commit() error {
	return f.temp.Commit(f.rename)
}

func (f *folder) rename() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return errors.New("the build was interrupted")
	}
	f.done = true
	if err := os.Chmod(f.tmp, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(f.dest); err == nil && f.force {
		if err := atomicfile.Replace(f.tmp, f.dest); err != nil {
			os.RemoveAll(f.tmp)
			return fmt.Errorf("replacing %s: %w", f.dest, err)
		}
		return nil
	}
	if err := os.Rename(f.tmp, f.dest); err != nil {
		os.RemoveAll(f.tmp)
		return fmt.Errorf("output folder %s: %w", f.dest, err)
	}
	return nil
}

// abort removes the working folder (a no-op after commit).
func (f *folder) abort() {
	f.remove()
	f.temp.Drop()
}

func (f *folder) remove() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.done = true
		os.RemoveAll(f.tmp)
	}
}
