package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// ReadFile reads a placement.json, rejecting unknown fields so that a
// misspelt key fails instead of being ignored.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the file
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("placement file %s: %w", path, err)
	}
	return &f, nil
}

// Marshal is the file's bytes: indented JSON with a final newline (map
// keys sorted, so the same decisions give the same bytes).
func (f *File) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// KeepFloat is the node indices of the regions kept float, for
// quantize.Options.KeepFloat.
func (f *File) KeepFloat() []int {
	var idx []int
	for _, r := range f.Regions {
		if r.Decision == Float {
			idx = append(idx, r.Index)
		}
	}
	return idx
}
