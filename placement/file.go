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

// Summary says in a phrase what the INT8 model the placement chose is:
// "4 of 5 regions int8", "all 5 regions int8, scheme per-tensor: ...", or
// a whole-model candidate such as dynamic INT8, which is not a placement
// of the static regions. The build's table and report.md both use it.
func (f *File) Summary() string {
	s := f.Scheme
	switch {
	case IsAlternative(f.Chosen) && s != nil && s.Activations != "dynamic":
		return fmt.Sprintf("all %d regions int8, scheme %s: %s", len(f.Regions), f.Chosen, s)
	case IsAlternative(f.Chosen):
		return fmt.Sprintf("%s, not a placement of the %d static regions", f.Chosen, len(f.Regions))
	}
	return fmt.Sprintf("%d of %d regions int8", len(f.Regions)-len(f.KeepFloat()), len(f.Regions))
}
