package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// checkOutputs fails before any work when a command could not write what
// it is asked to: each file (written beside it, in a folder that must
// exist) and each folder (made with its parents, so checked in the
// nearest folder that exists). "" is skipped. A command that writes only
// after minutes of calibration or timing must not fail then.
func checkOutputs(files, dirs []string) error {
	for _, f := range files {
		if f == "" {
			continue
		}
		if err := atomicfile.CheckWritable(f); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		at := filepath.Clean(d)
		for {
			st, err := os.Stat(at)
			if err == nil {
				if !st.IsDir() {
					return fmt.Errorf("cannot write into %s: %s is not a folder", d, at)
				}
				break
			}
			if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(at) == at {
				return fmt.Errorf("cannot write into %s: %w", d, err)
			}
			at = filepath.Dir(at)
		}
		if err := atomicfile.CheckWritable(filepath.Join(at, ".optc-write-check")); err != nil {
			return fmt.Errorf("cannot write into %s: %w", d, errors.Unwrap(err))
		}
	}
	return nil
}
