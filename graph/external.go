package graph

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/optc-dev/optc/onnxpb"
)

// externalSource opens the side files of one loaded model, each mapped once
// and only when a tensor in it is first read.
type externalSource struct {
	dir   string // the model's folder; "" when loaded from bytes
	mu    sync.Mutex
	files map[string][]byte
	model *Model
}

func newExternalSource(dir string) *externalSource {
	return &externalSource{dir: dir, files: map[string][]byte{}}
}

// decodeExternal reads a tensor's external_data entries and checks, without
// reading the data, that the file exists inside the model's folder and is
// long enough.
func decodeExternal(t *Tensor, kvs []*onnxpb.StringStringEntryProto, src *externalSource) (*External, error) {
	e := &External{Length: -1, src: src}
	for _, kv := range kvs {
		var err error
		switch kv.GetKey() {
		case "location":
			e.Location = kv.GetValue()
		case "offset":
			e.Offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			e.Length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "checksum":
			e.Checksum = kv.GetValue()
		}
		if err != nil || e.Offset < 0 || (kv.GetKey() == "length" && e.Length < 0) {
			return nil, fmt.Errorf("external data: bad %s %q", kv.GetKey(), kv.GetValue())
		}
	}
	if e.Location == "" {
		return nil, errors.New("external data: no location")
	}
	if src == nil || src.dir == "" {
		return nil, fmt.Errorf("external data %q: the model was not loaded from a file, so there is no folder to find it in", e.Location)
	}
	if !filepath.IsLocal(filepath.FromSlash(e.Location)) {
		return nil, fmt.Errorf("external data %q: refused: the path leaves the model's folder", e.Location)
	}
	want := t.ByteSize()
	if t.DType != String {
		// A size the dtype and dims do not fix would be read as "the rest of
		// the file", which is no tensor of those dims.
		count, err := t.NumElements()
		if err != nil {
			return nil, fmt.Errorf("external data %q: %s%v: %w", e.Location, t.DType, t.Dims, err)
		}
		if _, ok := t.DType.ByteSize(count); !ok {
			return nil, fmt.Errorf("external data %q: %s%v has no fixed size in bytes", e.Location, t.DType, t.Dims)
		}
	}
	if e.Length >= 0 && t.DType != String && e.Length != want {
		return nil, fmt.Errorf("external data %q: length %d, but %s%v needs %d bytes", e.Location, e.Length, t.DType, t.Dims, want)
	}
	path, err := src.path(e.Location)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	if e.Offset > fi.Size() || want > fi.Size()-e.Offset {
		return nil, fmt.Errorf("external data %q: %d bytes at offset %d run past the end of the file (%d bytes)", e.Location, want, e.Offset, fi.Size())
	}
	return e, nil
}

// path resolves a location inside the model's folder, refusing symbolic
// links that lead out of it.
func (s *externalSource) path(location string) (string, error) {
	p := filepath.Join(s.dir, filepath.FromSlash(location))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("external data: %w", err)
	}
	dir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return "", fmt.Errorf("external data: %w", err)
	}
	if rel, err := filepath.Rel(dir, real); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("external data %q: refused: it links outside the model's folder", location)
	}
	return real, nil
}

// read returns t's bytes from its mapped side file: Length bytes at Offset,
// or, when the file gives no length, as many as t's dtype and dims need
// (the rest of the file when they do not say). The file may have changed
// since the model was loaded.
func (e *External) read(t *Tensor) ([]byte, error) {
	b, err := e.src.mapped(e.Location)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	n := e.Length
	if n < 0 {
		if count, err := t.NumElements(); err == nil {
			if size, ok := t.DType.ByteSize(count); ok {
				n = size
			}
		}
	}
	avail := int64(len(b)) - e.Offset
	if avail < 0 || n > avail {
		return nil, fmt.Errorf("tensor %q: external data %q is shorter than offset+length", t.Name, e.Location)
	}
	if n < 0 {
		n = avail
	}
	return b[e.Offset : e.Offset+n : e.Offset+n], nil
}

func (s *externalSource) mapped(location string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.files[location]; ok {
		return b, nil
	}
	path, err := s.path(location)
	if err != nil {
		return nil, err
	}
	b, unmap, err := mapShared(path)
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	s.files[location] = b
	if s.model != nil {
		s.model.closers = append(s.model.closers, unmap)
	}
	return b, nil
}

// externalLocation is the default side-file name for a model saved at path.
func externalLocation(path string) string {
	return filepath.Base(path) + ".data"
}
