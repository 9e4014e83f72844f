package calibrate

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func testCache() *Cache {
	return &Cache{
		Version: CacheVersion, Model: strings.Repeat("ab", 32), Data: strings.Repeat("cd", 32),
		Samples: 512, Method: "percentile", Percentile: 99.99,
		Tensors: []CacheEntry{{Name: "a", Min: -1.5, Max: 2.25}, {Name: "b", Max: 0.1 + 0.2}, {Name: "c/relu", Max: 1e-30}},
	}
}

func TestCacheRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "calib.json")
	c := testCache()
	if err := WriteCache(p, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCache(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip: %+v, want %+v", got, c)
	}
	// Deterministic: writing again, or what was read, gives the same bytes.
	b1, _ := os.ReadFile(p)
	p2 := filepath.Join(dir, "again.json")
	if err := WriteCache(p2, got); err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("not deterministic:\n%s\n%s", b1, b2)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("temporary files left: %v", ents)
	}
	if r := got.Ranges(); r["a"] != (Range{-1.5, 2.25}) || len(r) != 3 {
		t.Errorf("Ranges %v", r)
	}
}

func TestCacheStrict(t *testing.T) {
	dir := t.TempDir()
	good, err := testCache().marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"unknown field": strings.Replace(string(good), `"version"`, `"bogus": 1, "version"`, 1),
		"trailing":      string(good) + "{}",
		"inverted":      strings.Replace(string(good), `"min": -1.5`, `"min": 3`, 1),
		"version":       strings.Replace(string(good), `"version": 1`, `"version": 2`, 1),
		"method":        strings.Replace(string(good), `"percentile",`, `"magic",`, 1),
		"unsorted":      strings.Replace(string(good), `"name": "a"`, `"name": "z"`, 1),
		"not json":      "TRT-8600-EntropyCalibration2\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadCache(p)
		t.Logf("%s: %v", name, err)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming %s", name, err, p)
		}
	}
	p := filepath.Join(dir, "x.json")
	for name, mutate := range map[string]func(*Cache){
		"nan":      func(c *Cache) { c.Tensors[0].Max = math.NaN() },
		"inf":      func(c *Cache) { c.Tensors[0].Min = math.Inf(-1) },
		"inverted": func(c *Cache) { c.Tensors[1].Min = 1 },
		"dup":      func(c *Cache) { c.Tensors[1].Name = "a" },
	} {
		c := testCache()
		mutate(c)
		if err := WriteCache(p, c); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("a rejected cache left a file: %v", err)
	}
}

func TestStatsCache(t *testing.T) {
	s := newStats(t, Options{}, "z", []float32{-1, 3})
	s2, _ := NewStats([]string{"b", "a"}, Options{})
	s2.Observe("a", []float32{1})
	s2.Observe("b", []float32{-2, 0})
	c, err := s2.Cache(Percentile, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Percentile != DefaultPercentile || c.Tensors[0].Name != "a" || c.Tensors[1].Name != "b" {
		t.Errorf("cache %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Error(err)
	}
	if c, err := s.Cache(MinMax, Options{}); err != nil || c.Tensors[0] != (CacheEntry{Name: "z", Min: -1, Max: 3}) {
		t.Errorf("minmax cache %+v %v", c, err)
	}
}
