package calibrate

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzReadCache: any file is read or refused without a panic, and a cache
// ReadCache accepts writes back (WriteCache) and reads again equal.
func FuzzReadCache(f *testing.F) {
	b, err := testCache().marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":1,"model":"","data":"","samples":0,"method":"minmax","moving_average":0.01,"tensors":[]}`))
	f.Add([]byte(`{"version":1,"method":"entropy","tensors":[{"name":"x","min":-1e308,"max":1e308}]} `))
	dir := f.TempDir()
	path, back := filepath.Join(dir, "cache.json"), filepath.Join(dir, "back.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ReadCache(path)
		if err != nil {
			return
		}
		if err := WriteCache(back, c); err != nil {
			t.Fatalf("WriteCache of a cache ReadCache accepted: %v", err)
		}
		again, err := ReadCache(back)
		if err != nil {
			t.Fatalf("ReadCache of what WriteCache wrote: %v", err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the cache:\n%+v\n%+v", c, again)
		}
	})
}
