package ort

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	ortgo "github.com/yalue/onnxruntime_go"
)

// Some models crash ONNX Runtime while it optimizes them: ORT 1.24.1 dies
// with SIGSEGV creating a session at level all for a float16 Transpose that
// moves a batch axis into a MatMul (the float16 artifact of a GRU model).
// A crash inside cgo ends the process with a Go stack dump and no word on
// which model did it, so a model is opened once in a child process (this
// executable again, see init) before this process opens it, and a child
// that dies becomes an ordinary error. The child serves one request after
// another, so a probe costs one more session creation, not a process.

// probeEnv names the library the child loads; its presence makes a
// process a probe server.
const probeEnv = "OPTC_ORT_PROBE_LIBRARY"

// ErrCrashed is what a *CrashError is (errors.Is).
var ErrCrashed = errors.New("ONNX Runtime crashed")

// CrashError is NewSession's error when ONNX Runtime crashed opening the
// model in the probe.
type CrashError struct {
	Signal string // as the Go runtime or the kernel named it
	Level  Level
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("%s (%s) opening the model at level %s; a lower --level may avoid the optimization that crashes", ErrCrashed, e.Signal, e.Level)
}

func (e *CrashError) Is(target error) bool { return target == ErrCrashed }

// probeRequest is one model to open. On the wire: its JSON and the model
// bytes (none for a file), each after its length (uint64, little-endian);
// the answer is one byte.
type probeRequest struct {
	Path        string   `json:"path,omitempty"`
	ExternalDir string   `json:"external_dir,omitempty"`
	Level       Level    `json:"level"`
	Provider    string   `json:"provider"`
	Inputs      []string `json:"inputs"`
	Outputs     []string `json:"outputs"`
}

func init() {
	if lib, ok := os.LookupEnv(probeEnv); ok {
		os.Exit(serveProbes(lib))
	}
}

// serveProbes opens each model the parent sends and answers once the
// session is open or has failed with an error (the parent then reports
// that error itself). It returns when the parent closes the pipe.
func serveProbes(lib string) int {
	if _, err := Init(lib); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 3
	}
	in, out := bufio.NewReader(os.Stdin), os.Stdout
	for {
		spec, err := readFrame(in)
		if err != nil {
			return 0
		}
		var req probeRequest
		if err := json.Unmarshal(spec, &req); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			return 3
		}
		model, err := readFrame(in)
		if err != nil {
			return 0
		}
		src := Source{Path: req.Path, Bytes: model, ExternalDir: req.ExternalDir}
		if s, err := openSession(src, req.Inputs, req.Outputs, Options{Level: req.Level, Provider: req.Provider}); err == nil {
			s.Destroy()
		}
		if _, err := out.Write([]byte{1}); err != nil {
			return 0
		}
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w io.Writer, b []byte) error {
	if err := binary.Write(w, binary.LittleEndian, uint64(len(b))); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// prober is the parent's side: the running child, started on first use
// and again after one dies.
type prober struct {
	mu     sync.Mutex
	seen   map[string]error
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *bytes.Buffer
}

var probes = prober{seen: map[string]error{}}

// Probe opens src in the probe child, as NewSession does first, and
// returns a *CrashError when ONNX Runtime crashed there. A caller that
// times session creation (cold start) probes before it starts the clock.
func Probe(src Source, opts Options) error {
	names := func(ios []IO) []string {
		out := make([]string, len(ios))
		for i, io := range ios {
			out[i] = io.Name
		}
		return out
	}
	return probe(src, names(src.Inputs), names(src.Outputs), opts)
}

// probe opens src in the child once per model content, level and
// provider (the answer is remembered), and returns a *CrashError when
// ONNX Runtime crashed there. When no child can be started it says
// nothing: the session is then opened without a probe.
func probe(src Source, ins, outs []string, opts Options) error {
	key, err := probeKey(src, opts)
	if err != nil {
		return nil // the load itself will name what cannot be read
	}
	p := &probes
	p.mu.Lock()
	defer p.mu.Unlock()
	if err, ok := p.seen[key]; ok {
		return err
	}
	if p.cmd == nil && !p.start() {
		return nil
	}
	spec, err := json.Marshal(probeRequest{Path: src.Path, ExternalDir: src.ExternalDir,
		Level: opts.Level, Provider: opts.Provider, Inputs: ins, Outputs: outs})
	if err != nil {
		return nil
	}
	var model []byte
	if src.Path == "" {
		model = src.Bytes
	}
	var answer [1]byte
	if writeFrame(p.stdin, spec) == nil && writeFrame(p.stdin, model) == nil {
		if _, err := io.ReadFull(p.stdout, answer[:]); err == nil {
			p.seen[key] = nil
			return nil
		}
	}
	// The child is gone: it crashed on this model, or could not start.
	_ = p.stdin.Close()
	waitErr := p.cmd.Wait()
	stderr := p.stderr.String()
	p.cmd = nil
	var exit *exec.ExitError
	if !errors.As(waitErr, &exit) || exit.ExitCode() == 3 {
		return nil // nothing learnt about the model
	}
	// Go's runtime turns a fault in C code into exit status 2 after
	// naming the signal on the first line of its dump.
	what, _, _ := strings.Cut(stderr, "\n")
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL, syscall.SIGHUP:
			return nil // stopped from outside, not by the model
		}
		what = ws.Signal().String()
	}
	crash := &CrashError{Signal: strings.TrimSpace(what), Level: opts.Level}
	p.seen[key] = crash
	return crash
}

// start runs this executable as a probe server on the library this
// process loaded.
func (p *prober) start() bool {
	exe, err := os.Executable()
	if err != nil {
		return false
	}
	initOnce.Lock()
	lib := loadedFrom
	initOnce.Unlock()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+lib)
	p.stderr = &bytes.Buffer{}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return false
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return false
	}
	if err := cmd.Start(); err != nil {
		return false
	}
	p.cmd = cmd
	return true
}

// probeKey names what a probe learns about: the model's content (or, for a
// file, its name, size and time), the level and the provider.
func probeKey(src Source, opts Options) (string, error) {
	h := sha256.New()
	if src.Path != "" {
		fi, err := os.Stat(src.Path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %s %d %d", src.Path, fi.Size(), fi.ModTime().UnixNano())
	} else {
		h.Write(src.Bytes)
		fmt.Fprintf(h, "dir %s", src.ExternalDir)
	}
	fmt.Fprintf(h, " level %d provider %s", opts.Level, strings.ToLower(opts.Provider))
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// openSession creates the ORT session itself; NewSession probes first.
func openSession(src Source, ins, outs []string, opts Options) (*ortgo.DynamicAdvancedSession, error) {
	so, err := ortgo.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer so.Destroy()
	if err := configure(so, opts); err != nil {
		return nil, err
	}
	if src.Path == "" && src.ExternalDir != "" {
		if err := so.AddSessionConfigEntry("session.model_external_initializers_file_folder_path", src.ExternalDir); err != nil {
			return nil, err
		}
	}
	var s *ortgo.DynamicAdvancedSession
	if src.Path != "" {
		s, err = ortgo.NewDynamicAdvancedSession(src.Path, ins, outs, so)
	} else {
		s, err = ortgo.NewDynamicAdvancedSessionWithONNXData(src.Bytes, ins, outs, so)
	}
	if err != nil {
		return nil, fmt.Errorf("ONNX Runtime cannot load the model: %s", oneLine(err))
	}
	return s, nil
}
