// Package ort runs models in ONNX Runtime. It is the only package of optc
// that imports onnxruntime_go (and so cgo); everything else sees sessions
// that take and return *graph.Tensor.
package ort

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort/install"
)

// LibraryVersion is the ONNX Runtime release optc is built and tested
// against; onnxruntime_go v1.27.0 needs C API 24, so at least 1.24.
const LibraryVersion = install.DefaultVersion

// FetchCommand fetches the library into the cache folder.
const FetchCommand = "optc runtime install"

// NoDownloadEnv, set to 1, stops Init from fetching a missing library.
const NoDownloadEnv = "OPTC_NO_DOWNLOAD"

// Notice gets the one line Init prints before it fetches the library.
var Notice io.Writer = os.Stderr

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
	if p, ok := install.LibraryPath(install.CacheDir(), LibraryVersion, install.Current()); ok {
		cs = append(cs, candidate{"optc cache", p, false})
	}
	if runtime.GOOS == "darwin" {
		return append(cs, candidate{"system library path", "libonnxruntime.dylib", false})
	}
	return append(cs,
		candidate{"system library path", "libonnxruntime.so.1", false},
		candidate{"system library path", "libonnxruntime.so", false},
	)
}

// CacheDir is optc's cache folder (install.CacheDir, where the layout is
// defined).
func CacheDir() string { return install.CacheDir() }

// Init loads the ONNX Runtime library (once per process) and returns where
// it came from. flag is the --ort-lib value ("" when not given). When the
// library is nowhere and nothing names one explicitly, it is fetched into
// the cache first (install.Install, one line on Notice), unless
// OPTC_NO_DOWNLOAD=1.
func Init(flag string) (string, error) {
	return initLib(flag, os.Getenv(NoDownloadEnv) != "1")
}

// InitLocal is Init without the download: what `optc version` and the
// tests use.
func InitLocal(flag string) (string, error) {
	return initLib(flag, false)
}

func initLib(flag string, fetch bool) (string, error) {
	initOnce.Lock()
	defer initOnce.Unlock()
	if initialized {
		return loadedFrom, nil
	}
	boundMallocHeap()
	path, tried, explicit := load(candidates(flag))
	if path != "" {
		return path, nil
	}
	if explicit || !fetch {
		return "", libraryError(tried)
	}
	p, err := fetchLibrary()
	if err != nil {
		return "", fmt.Errorf("%w; fetching it failed: %v", libraryError(tried), err)
	}
	path, tried2, _ := load([]candidate{{"optc runtime install", p, true}})
	if path == "" {
		return "", libraryError(append(tried, tried2...))
	}
	return path, nil
}

// fetchLibrary installs this platform's library into the cache.
func fetchLibrary() (string, error) {
	reg, err := install.Registry()
	if err != nil {
		return "", err
	}
	u, err := install.TarballURL(reg, LibraryVersion)
	if err != nil {
		return "", err
	}
	if _, ok := install.LibraryPath(install.CacheDir(), LibraryVersion, install.Current()); ok {
		fmt.Fprintf(Notice, "optc: ONNX Runtime %s not found; fetching it once from %s into %s (%s=1 turns this off)\n",
			LibraryVersion, u, install.RuntimeDir(install.CacheDir()), NoDownloadEnv)
	}
	in, err := install.Install(context.Background(), install.Options{Version: LibraryVersion, Registry: reg})
	if err != nil {
		return "", err
	}
	return in[0].Path, nil
}

// load tries the candidates in order and returns the path of the first
// that loads, or what each attempt gave and whether it stopped at an
// explicit one.
func load(cs []candidate) (path string, tried []string, explicit bool) {
	for _, c := range cs {
		if strings.ContainsRune(c.path, os.PathSeparator) {
			if _, err := os.Stat(c.path); err != nil {
				tried = append(tried, fmt.Sprintf("%s (%s): not found", c.path, c.source))
				if c.explicit {
					return "", tried, true
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
			return c.path, tried, false
		}
		tried = append(tried, fmt.Sprintf("%s (%s): %s", c.path, c.source, explainInitError(err)))
		if c.explicit {
			return "", tried, true
		}
	}
	return "", tried, false
}

func explainInitError(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "ORT API base") {
		return "the library is too old: onnxruntime_go v1.27.0 needs ONNX Runtime >= 1.24 (C API 24)"
	}
	return strings.Join(strings.Fields(msg), " ")
}

func libraryError(tried []string) error {
	return fmt.Errorf("ONNX Runtime library not found or not usable; looked at: %s. Install ONNX Runtime %s with: %s, or point --ort-lib or OPTC_ORT_LIB at libonnxruntime",
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

// LoadModel is how a command that runs a model in ONNX Runtime starts
// (infer, ptq, weightonly): it loads the runtime (Init with ortLib),
// then the model at path, checked (graph.LoadValid). The errors are
// theirs, unwrapped; the caller closes the model.
func LoadModel(ortLib, path string) (*graph.Model, error) {
	if _, err := Init(ortLib); err != nil {
		return nil, err
	}
	return graph.LoadValid(path)
}
