package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
)

// pathKey is a key whose value is a file or folder: resolved against the
// config file's folder when relative, and, when it is read (input),
// checked before the build starts. Words holds the values that are not
// paths (calibration data "random"); a key's owner can add more
// (placement's "auto", Owner.Words).
type pathKey struct {
	key   string
	value func(*Config) *string
	input bool
	words []string
}

// pathKeys are the config's paths, in the order of the reference.
var pathKeys = []pathKey{
	{key: "model", value: func(c *Config) *string { return &c.Model }, input: true},
	{key: "output", value: func(c *Config) *string { return &c.Output }},
	{key: "replay", value: func(c *Config) *string { return &c.Replay }, input: true},
	{key: "calibration.data", value: func(c *Config) *string { return &c.Calibration.Data }, input: true, words: []string{"random"}},
	{key: "calibration.cache", value: func(c *Config) *string { return &c.Calibration.Cache }},
	{key: "quantize.placement", value: func(c *Config) *string { return &c.Quantize.Placement }, input: true}, // words: placement's
	{key: "eval.data", value: func(c *Config) *string { return &c.Eval.Data }, input: true, words: []string{"random"}},
	{key: "eval.labels", value: func(c *Config) *string { return &c.Eval.Labels }, input: true},
	{key: "eval.dict", value: func(c *Config) *string { return &c.Eval.Dict }, input: true},
	{key: "runtime.ort_lib", value: func(c *Config) *string { return &c.Runtime.ORTLib }, input: true},
}

// source records where a loaded config's paths came from: the file, its
// folder, and each path key's line and resolved value.
type source struct {
	file  string
	lines map[string]int
	paths map[string]string
}

// resolvePaths rewrites the relative paths c read from file against
// file's folder (an absolute path stays as it is) and remembers each
// one's line for CheckPaths.
func (c *Config) resolvePaths(file string, doc []byte) {
	dir := filepath.Dir(file)
	src := &source{file: file, lines: keyLines(doc), paths: map[string]string{}}
	for _, k := range pathKeys {
		if _, set := src.lines[k.key]; !set {
			continue
		}
		p := k.value(c)
		if *p == "" || slices.Contains(Words(k.key), *p) {
			continue
		}
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
		src.paths[k.key] = *p
	}
	c.src = src
}

// CheckPaths checks that every input path the config file gave, and no
// flag replaced, exists: a missing one is an error naming the file, the
// line and the key. Paths from flags and defaults are not its business
// (the stage that reads them names them).
func (c Config) CheckPaths() error {
	if c.src == nil {
		return nil
	}
	for _, k := range pathKeys {
		want, ok := c.src.paths[k.key]
		if !ok || !k.input || *k.value(&c) != want {
			continue
		}
		if _, err := os.Stat(want); err != nil {
			return fmt.Errorf("config %s: line %d: %s: %w (relative paths in a config resolve against its folder)",
				c.src.file, c.src.lines[k.key], k.key, err)
		}
	}
	return nil
}

// keyLines maps each key of a YAML document, dotted (eval.labels), to
// its line.
func keyLines(doc []byte) map[string]int {
	lines := map[string]int{}
	var root yaml.Node
	if yaml.Unmarshal(doc, &root) != nil || len(root.Content) == 0 {
		return lines
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := prefix + n.Content[i].Value
			lines[key] = n.Content[i].Line
			walk(n.Content[i+1], key+".")
		}
	}
	walk(root.Content[0], "")
	return lines
}
