package data

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// dyn is a symbolic dim for test inputs.
func dyn(name string) graph.Dim { return graph.SymbolicDim(name) }

func st(n int64) graph.Dim { return graph.StaticDim(n) }

// f32 returns the little-endian bytes of vals.
func f32(vals ...float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// seqF32 returns n float32 values 0, 1, 2, ... as bytes.
func seqF32(n int) []byte {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i)
	}
	return f32(vals...)
}

func i64(vals ...int64) []byte {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

func mustTensor(t testing.TB, name string, dt graph.DataType, dims []int64, data []byte) *graph.Tensor {
	t.Helper()
	tt, err := graph.NewTensor(name, dt, dims, data)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// writeNpyFile writes a .npy file with WriteNpy and returns its path.
func writeNpyFile(t testing.TB, dir, name string, dt graph.DataType, dims []int64, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := WriteNpy(p, mustTensor(t, strings.TrimSuffix(name, ".npy"), dt, dims, data)); err != nil {
		t.Fatal(err)
	}
	return p
}

// npyBytes returns the bytes WriteNpy writes for a tensor.
func npyBytes(t testing.TB, dt graph.DataType, dims []int64, data []byte) []byte {
	t.Helper()
	h, err := npyHeaderBytes(dt, dims)
	if err != nil {
		t.Fatal(err)
	}
	return append(h, data...)
}

// zipMember is one member of a test .npz file.
type zipMember struct {
	name   string
	data   []byte
	method uint16
}

// writeZip writes a zip file of the members.
func writeZip(t testing.TB, path string, members ...zipMember) string {
	t.Helper()
	if err := os.WriteFile(path, zipBytes(t, members...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// zipBytes is a zip file of the members.
func zipBytes(t testing.TB, members ...zipMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// firstBatch opens spec and reads its first batch.
func firstBatch(t testing.TB, spec string, inputs []Input, opts Options) *Batch {
	t.Helper()
	src, err := Open(spec, inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Next()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// secondBatchErr opens spec, reads its first batch and returns the error
// reading the second gives: for a source whose fault lies past its first
// batch.
func secondBatchErr(t testing.TB, spec string, inputs []Input, opts Options) error {
	t.Helper()
	src, err := Open(spec, inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = src.Next()
	return err
}

// readAll reads every batch of src and closes it.
func readAll(t testing.TB, src Source) []*Batch {
	t.Helper()
	defer src.Close()
	var out []*Batch
	for {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		if len(out) > 1e6 {
			t.Fatal("too many batches")
		}
	}
}

func tensorBytes(t testing.TB, tt *graph.Tensor) []byte {
	t.Helper()
	b, err := tt.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dimsEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// wantErr checks that err is set and mentions every one of subs.
func wantErr(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
