package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/optc-dev/optc/report/schema"
)

// ReadFile reads a placement.json, rejecting unknown fields so that a
// misspelt key fails instead of being ignored.
func ReadFile(path string) (*schema.Placement, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the file
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f schema.Placement
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("placement file %s: %w", path, err)
	}
	return &f, nil
}
