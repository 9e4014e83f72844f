// Package ort runs models in ONNX Runtime. It is the only package of optc
// that imports onnxruntime_go (and so cgo); everything else sees sessions
// that take and return *graph.Tensor.
package ort

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ortgo "github.com/yalue/onnxruntime_go"
)

// LibraryVersion is the ONNX Runtime release optc is built and tested
// against; onnxruntime_go v1.27.0 needs C API 24, so at least 1.24.
const LibraryVersion = "1.24.1"

// FetchCommand fetches the library into the cache folder.
const FetchCommand = "scripts/fetch-onnxruntime.sh (or: make ort)"

var (
	initOnce    sync.Mutex
	initialized bool
	loadedFrom  string
)

// candidate is one place the library may be.
type candidate struct {
	source   string // what pointed there
	path     string
	explicit bool // named by the user: a failure there is final
}

// candidates lists where the library is looked for, in order: the
// --ort-lib flag, OPTC_ORT_LIB, ONNXRUNTIME_SHARED_LIBRARY_PATH, optc's
// cache folder, then the system library path.
func candidates(flag string) []candidate {
	var cs []candidate
	if flag != "" {
		cs = append(cs, candidate{"--ort-lib", flag, true})
	}
	for _, env := range []string{"OPTC_ORT_LIB", "ONNXRUNTIME_SHARED_LIBRARY_PATH"} {
		if p := os.Getenv(env); p != "" {
			cs = append(cs, candidate{"$" + env, p, true})
		}
	}
	cs = append(cs,
		candidate{"optc cache", filepath.Join(CacheDir(), "onnxruntime", LibraryVersion, "libonnxruntime.so.1"), false},
		candidate{"system library path", "libonnxruntime.so.1", false},
		candidate{"system library path", "libonnxruntime.so", false},
	)
	return cs
}

// CacheDir is optc's cache folder: $OPTC_CACHE, else optc under the user's
// cache folder.
func CacheDir() string {
	if d := os.Getenv("OPTC_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "optc")
	}
	return filepath.Join(os.TempDir(), "optc-cache")
}

// Init loads the ONNX Runtime library (once per process) and returns where
// it came from. flag is the --ort-lib value ("" when not given).
func Init(flag string) (string, error) {
	initOnce.Lock()
	defer initOnce.Unlock()
	if initialized {
		return loadedFrom, nil
	}
	var tried []string
	for _, c := range candidates(flag) {
		if strings.ContainsRune(c.path, os.PathSeparator) {
			if _, err := os.Stat(c.path); err != nil {
				tried = append(tried, fmt.Sprintf("%s (%s): not found", c.path, c.source))
				if c.explicit {
					return "", libraryError(tried)
				}
				continue
			}
		}
		// Errors come back to optc as values; ORT's own log would add
		// lines of its own to stderr.
		ortgo.SetSharedLibraryPath(c.path)
		err := ortgo.InitializeEnvironment(ortgo.WithLogLevelFatal())
		if err == nil {
			initialized, loadedFrom = true, c.path
			return c.path, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s): %s", c.path, c.source, explainInitError(err)))
		if c.explicit {
			return "", libraryError(tried)
		}
	}
	return "", libraryError(tried)
}

func explainInitError(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "ORT API base") {
		return "the library is too old: onnxruntime_go v1.27.0 needs ONNX Runtime >= 1.24 (C API 24)"
	}
	return strings.Join(strings.Fields(msg), " ")
}

func libraryError(tried []string) error {
	return fmt.Errorf("ONNX Runtime library not found or not usable; looked at: %s. Fetch ONNX Runtime %s with: %s, or point --ort-lib or OPTC_ORT_LIB at libonnxruntime.so",
		strings.Join(tried, "; "), LibraryVersion, FetchCommand)
}

// Version returns the loaded library's version string.
func Version() (string, error) {
	initOnce.Lock()
	defer initOnce.Unlock()
	if !initialized {
		return "", errors.New("ONNX Runtime is not initialized")
	}
	return ortgo.GetVersion(), nil
}
