package graph

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// parses counts the models decoded since the program started: what one
// `optc build` costs in parses is a figure its tests hold down.
var parses atomic.Int64

// Parses is the number of models decoded (LoadFile, Parse) so far in this
// process.
func Parses() int64 { return parses.Load() }

// LoadFile reads the model at path. The file is memory-mapped and
// initializer data is used where it lies, not copied; external data is
// mapped when first read. Call Close on the model when done with it.
// Errors name the file.
func LoadFile(path string) (*Model, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, unwrapPathError(err))
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("load %s: is a folder, not a model file", path)
	}
	if fi.Size() == 0 {
		return nil, fmt.Errorf("load %s: the file is empty", path)
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, unwrapPathError(err))
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		unmap()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	m, err := parse(data, dir)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	m.Path = path
	m.closers = append(m.closers, unmap)
	return m, nil
}

// Parse decodes a model held in memory. The model's tensors alias data,
// which must stay unchanged while the model is used. dir is the folder
// external data is read from ("" refuses external data).
func Parse(data []byte, dir string) (*Model, error) {
	if len(data) == 0 {
		return nil, errors.New("no data: an empty model")
	}
	return parse(data, dir)
}

// recoverInvalid, deferred by a decoder, turns a panic on malformed input
// into the error "not a valid ONNX <what>" and no result.
func recoverInvalid[T any](what string, result *T, err *error) {
	if r := recover(); r != nil {
		var none T
		*result, *err = none, fmt.Errorf("not a valid ONNX %s: %v", what, r)
	}
}

func parse(data []byte, dir string) (m *Model, err error) {
	parses.Add(1)
	// A malformed file must give an error, never a crash of the caller.
	defer recoverInvalid("model", &m, &err)
	mp, raws, err := unmarshalModel(data)
	if err != nil {
		return nil, fmt.Errorf("not a valid ONNX model: %w", err)
	}
	src := newExternalSource(dir)
	m, err = decodeModel(mp, raws, src)
	if err != nil {
		return nil, err
	}
	src.model = m
	return m, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// LoadValid is LoadFile followed by Verify, for commands that hand the
// model to a runtime: a broken model fails with a message naming the node
// or tensor at fault, not with the runtime's.
func LoadValid(path string) (*Model, error) {
	m, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if err := m.Verify(); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: invalid model: %w", path, err)
	}
	return m, nil
}
