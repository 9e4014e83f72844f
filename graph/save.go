package graph

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// ExternalMode says where Save puts tensor data.
type ExternalMode uint8

const (
	// ExternalAuto writes everything into the model file unless that would
	// pass protobuf's 2 GiB limit; then large tensors go to a side file.
	ExternalAuto ExternalMode = iota
	// ExternalAlways writes every tensor of at least SizeThreshold bytes to
	// the side file.
	ExternalAlways
	// ExternalNever writes everything inline and fails past 2 GiB.
	ExternalNever
)

// SaveOptions controls how a model is written.
type SaveOptions struct {
	External ExternalMode
	// SizeThreshold is the smallest tensor, in bytes, that goes to the side
	// file (default 1024).
	SizeThreshold int64
	// Location is the side file's name, relative to the model's folder
	// (default: the model's file name plus ".data").
	Location string
}

// protobufLimit is the largest message protobuf implementations accept.
// OPTC_PROTOBUF_LIMIT lowers it (bytes), so that tests can take the paths
// of models over 2 GiB with small ones.
var protobufLimit = limitFromEnv()

func limitFromEnv() int64 {
	if n, err := strconv.ParseInt(os.Getenv("OPTC_PROTOBUF_LIMIT"), 10, 64); err == nil && n > 0 && n < math.MaxInt32 {
		return n
	}
	return math.MaxInt32
}

// sideAlign is the alignment of large tensors in side files, so that a
// runtime can map them directly.
const (
	sideAlign        = 4096
	sideAlignMinSize = 64 << 10
)

// Save writes m to path atomically: into a temporary file in the same
// folder that is renamed into place only when complete, so a failure
// leaves no partial file and an existing file untouched. The same model and
// options always give the same bytes.
func Save(m *Model, path string, opts SaveOptions) (err error) {
	if opts.SizeThreshold <= 0 {
		opts.SizeThreshold = 1024
	}
	if opts.Location == "" {
		opts.Location = externalLocation(path)
	}
	if !filepath.IsLocal(opts.Location) {
		return fmt.Errorf("save %s: external data location %q must be a plain path inside the model's folder", path, opts.Location)
	}
	e := &encoder{threshold: opts.SizeThreshold}
	var out *pieces
	if opts.External != ExternalAlways {
		if out, err = e.model(m); err != nil {
			return fmt.Errorf("save %s: %w", path, err)
		}
	}
	var side *atomicFile
	defer func() {
		if err != nil && side != nil {
			side.abort()
		}
	}()
	if out == nil || (out.size > protobufLimit && opts.External == ExternalAuto) {
		if side, err = newAtomicFile(filepath.Join(filepath.Dir(path), opts.Location)); err != nil {
			return fmt.Errorf("save %s: %w", path, err)
		}
		e.side = &sideWriter{w: side.w, location: filepath.ToSlash(opts.Location)}
		if out, err = e.model(m); err != nil {
			return fmt.Errorf("save %s: %w", path, err)
		}
	}
	if out.size > protobufLimit {
		return fmt.Errorf("save %s: the model is %d bytes, over protobuf's 2 GiB limit: save it with external data", path, out.size)
	}
	f, err := newAtomicFile(path)
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	for _, part := range out.parts {
		if _, err = f.w.Write(part); err != nil {
			f.abort()
			return fmt.Errorf("save %s: %w", path, err)
		}
	}
	if err = f.finish(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	temps := []*atomicfile.Temp{f.tmp}
	if side != nil {
		if err = side.finish(); err != nil {
			f.abort()
			return fmt.Errorf("save %s: %w", path, err)
		}
		temps = append(temps, side.tmp)
	}
	// The side file goes into place first: a model file never refers to
	// data that is not there. Both renames are one commit, so that an
	// interrupt leaves both files or neither.
	err = atomicfile.CommitAll(func() error {
		if side != nil {
			if err := os.Rename(side.f.Name(), side.path); err != nil {
				return err
			}
		}
		return os.Rename(f.f.Name(), f.path)
	}, temps...)
	if err != nil {
		f.abort()
		return fmt.Errorf("save %s: %w", path, unwrapPathError(err))
	}
	return nil
}

// Marshal returns the serialized model with all data inline.
func Marshal(m *Model) ([]byte, error) {
	out, err := (&encoder{}).model(m)
	if err != nil {
		return nil, err
	}
	if out.size > protobufLimit {
		return nil, fmt.Errorf("the model is %d bytes, %w", out.size, ErrTooLarge)
	}
	return out.join(), nil
}

// ErrTooLarge is the error of Marshal for a model over protobuf's 2 GiB
// limit.
var ErrTooLarge = errors.New("over protobuf's 2 GiB limit")

// Serialized is a model's protobuf bytes and the folder of the side files
// they refer to ("" when the bytes hold every tensor).
type Serialized struct {
	Bytes []byte
	Dir   string
}

// Parse decodes the bytes, reading side files from Dir.
func (s Serialized) Parse() (*Model, error) { return Parse(s.Bytes, s.Dir) }

// MarshalReferencing is Marshal for models of any size: when the model
// does not fit in one protobuf message, the tensors that still lie in the
// side file they were loaded from are referenced there, not copied, and Dir
// is the folder those files are in (what a runtime needs to read them).
// Tensors made or changed since loading are always inline, so they must fit.
func MarshalReferencing(m *Model) (Serialized, error) {
	b, err := Marshal(m)
	if !errors.Is(err, ErrTooLarge) {
		return Serialized{Bytes: b}, err
	}
	e := &encoder{keepExternal: true}
	out, err := e.model(m)
	if err != nil {
		return Serialized{}, err
	}
	if out.size > protobufLimit {
		return Serialized{}, fmt.Errorf("the model is %d bytes with its side-file tensors left where they are: tensors made by optc alone are %w", out.size, ErrTooLarge)
	}
	return Serialized{Bytes: out.join(), Dir: e.externalDir}, nil
}

// Digest is the hex SHA-256 of m serialized with every tensor inline (what
// Marshal gives), computed without that size limit or a copy.
func Digest(m *Model) (string, error) {
	out, err := (&encoder{}).model(m)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range out.parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sideWriter appends tensor data to a side file and says where it went.
type sideWriter struct {
	w        io.Writer
	off      int64
	location string
}

func (s *sideWriter) write(data []byte) (int64, error) {
	if len(data) >= sideAlignMinSize && s.off%sideAlign != 0 {
		pad := sideAlign - s.off%sideAlign
		if _, err := s.w.Write(make([]byte, pad)); err != nil {
			return 0, err
		}
		s.off += pad
	}
	off := s.off
	if _, err := s.w.Write(data); err != nil {
		return 0, err
	}
	s.off += int64(len(data))
	return off, nil
}

// atomicFile is a temporary file that becomes path on commit.
type atomicFile struct {
	f    *os.File
	w    *bufio.Writer
	path string
	tmp  *atomicfile.Temp // removed if the process is interrupted
}

func newAtomicFile(path string) (*atomicFile, error) {
	f, tmp, err := atomicfile.CreateTemp(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	return &atomicFile{f: f, w: bufio.NewWriterSize(f, 1<<20), path: path, tmp: tmp}, nil
}

// finish writes the file out and closes it, ready to be renamed; on
// failure it is removed.
func (a *atomicFile) finish() error {
	err := a.w.Flush()
	if err == nil {
		err = a.f.Chmod(0o644)
	}
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		a.abort()
		return unwrapPathError(err)
	}
	return nil
}

func (a *atomicFile) abort() {
	a.f.Close()
	os.Remove(a.f.Name())
	a.tmp.Drop()
}
