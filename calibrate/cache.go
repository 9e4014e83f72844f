package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// CacheVersion is the version of the cache format written.
const CacheVersion = 1

// Cache is a calibration cache file: the ranges of one model calibrated
// on one data stream with one method.
type Cache struct {
	Version int    `json:"version"`
	Model   string `json:"model"` // hex SHA-256 of the model bytes (Stats.ModelDigest)
	Data    string `json:"data"`  // Stats.DataDigest
	Samples int64  `json:"samples"`
	// Stopped: calibration ended before the data did (Options.Stop), so
	// what reuses the data must stop at Samples too.
	Stopped bool   `json:"stopped,omitempty"`
	Method  string `json:"method"`
	// Options of the method; 0 when not used.
	Percentile    float64      `json:"percentile,omitempty"`
	MovingAverage float64      `json:"moving_average,omitempty"`
	Tensors       []CacheEntry `json:"tensors"` // sorted by name
}

// CacheEntry is one tensor's range.
type CacheEntry struct {
	Name string  `json:"name"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	// Method is, for the auto method, the candidate the tensor's range
	// came from (an AutoCandidate name).
	Method string `json:"method,omitempty"`
}

// Cache computes the ranges of method and returns them as a cache.
func (s *Stats) Cache(method Method, opts Options) (*Cache, error) {
	rs, chosen, err := s.ranges(method, opts)
	if err != nil {
		return nil, err
	}
	c := &Cache{Version: CacheVersion, Model: s.ModelDigest, Data: s.DataDigest, Samples: s.Samples, Stopped: s.Stopped, Method: string(method)}
	switch method {
	case Percentile:
		c.Percentile = opts.Percentile
		if c.Percentile == 0 {
			c.Percentile = DefaultPercentile
		}
	case MinMax:
		c.MovingAverage = s.movingAverage
	}
	for n, r := range rs {
		c.Tensors = append(c.Tensors, CacheEntry{n, r.Min, r.Max, chosen[n]})
	}
	slices.SortFunc(c.Tensors, func(a, b CacheEntry) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// Choices counts, for the auto method, the tensors that chose each
// candidate.
func (c *Cache) Choices() map[string]int {
	if c.Method != string(Auto) {
		return nil
	}
	out := map[string]int{}
	for _, e := range c.Tensors {
		out[e.Method]++
	}
	return out
}

// Ranges returns the cache's ranges by tensor name.
func (c *Cache) Ranges() map[string]Range {
	out := make(map[string]Range, len(c.Tensors))
	for _, e := range c.Tensors {
		out[e.Name] = Range{e.Min, e.Max}
	}
	return out
}

func (c *Cache) validate() error {
	if c.Version != CacheVersion {
		return fmt.Errorf("cache version %d, want %d", c.Version, CacheVersion)
	}
	if !slices.Contains(Methods, Method(c.Method)) {
		return fmt.Errorf("unknown method %q", c.Method)
	}
	if c.Percentile < 0 || c.Percentile > 100 || c.MovingAverage < 0 || c.MovingAverage > 1 {
		return fmt.Errorf("options out of range (percentile %v, moving average %v)", c.Percentile, c.MovingAverage)
	}
	for i, e := range c.Tensors {
		if e.Name == "" {
			return fmt.Errorf("tensor %d has no name", i)
		}
		if i > 0 && c.Tensors[i-1].Name >= e.Name {
			return fmt.Errorf("tensors are not sorted by name without duplicates at %q", e.Name)
		}
		for _, v := range []float64{e.Min, e.Max} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("tensor %q: range bound %v is not finite", e.Name, v)
			}
		}
		if e.Min > e.Max {
			return fmt.Errorf("tensor %q: min %v > max %v", e.Name, e.Min, e.Max)
		}
		known := slices.ContainsFunc(AutoCandidates, func(a AutoCandidate) bool { return a.Name == e.Method })
		switch {
		case c.Method == string(Auto) && !known:
			return fmt.Errorf("tensor %q: unknown auto candidate %q", e.Name, e.Method)
		case c.Method != string(Auto) && e.Method != "":
			return fmt.Errorf("tensor %q: a per-tensor method %q in a %s cache (only auto records one)", e.Name, e.Method, c.Method)
		}
	}
	return nil
}

// marshal is the deterministic encoding: fixed field order, tensors
// sorted, shortest float formatting, two-space indent, final newline.
func (c *Cache) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteCache validates c and writes it to path atomically: a temporary
// file in the same folder, synced, then renamed over path.
func WriteCache(path string, c *Cache) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	b, err := c.marshal()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadCache reads and validates a cache file. Unknown fields, trailing
// data, a wrong version, unsorted or duplicate tensors and non-finite or
// inverted ranges are errors naming the file.
func ReadCache(path string) (*Cache, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	c := &Cache{}
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: not a calibration cache: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: not a calibration cache: data after the JSON object", path)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
