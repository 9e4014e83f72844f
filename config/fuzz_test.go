package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: any YAML is decoded or refused without a panic (deep
// nesting, aliases, huge numbers), and a config that decodes and
// validates marshals to YAML that decodes to the same marshalled bytes.
func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "testdata", "mnist", "optc.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("model: m.onnx\nshapes: {x: [1, 3, 48, 192]}\nlatency: {duration: 500ms}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("tensorrt: {profiles: {x: {min: [1], opt: [2], max: [3]}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		if err := Decode(bytes.NewReader(data), &c); err != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		out, err := Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a valid config: %v", err)
		}
		again := Default()
		if err := Decode(bytes.NewReader(out), &again); err != nil {
			t.Fatalf("Decode of what Marshal wrote: %v\n%s", err, out)
		}
		out2, err := Marshal(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("a round trip changed the config (err %v):\n%s\n%s", err, out, out2)
		}
	})
}
