package data

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// fuzzBatchLimit bounds how many batches a fuzz input may yield, so an
// input whose header claims millions of samples is read only far enough
// to reach its end or its error.
const fuzzBatchLimit = 64

// drain reads up to fuzzBatchLimit batches of src and closes it. Errors are
// expected (the input is hostile); panics and hangs are the bugs.
func drain(src Source) {
	defer src.Close()
	for range fuzzBatchLimit {
		if _, err := src.Next(); err != nil {
			return
		}
	}
}

// FuzzReadNpy writes each input to a .npy file and reads it as the tools
// do: whole (ReadNpy, for labels) and as a batched sample stream (Open).
// What ReadNpy accepts writes back (WriteNpy) and reads again the same.
func FuzzReadNpy(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "testdata", "mnist", "eval_labels.npy")); err == nil {
		f.Add(b)
	}
	f.Add(npyBytes(f, graph.Float, []int64{4, 1, 2, 2}, seqF32(16)))
	f.Add(npyBytes(f, graph.Uint8, []int64{3, 2}, []byte{1, 2, 3, 4, 5, 6}))
	f.Add(npyBytes(f, graph.Float16, []int64{}, []byte{0, 0x3c}))
	f.Add([]byte("\x93NUMPY\x01\x00\x46\x00{'descr': '>f4', 'fortran_order': False, 'shape': (2, 0, 3), }      \n"))
	dir := f.TempDir()
	path, back := filepath.Join(dir, "x.npy"), filepath.Join(dir, "back.npy")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		dt := graph.Float
		if h, err := readNpyHeader(bytes.NewReader(b), int64(len(b))); err == nil {
			dt = h.dtype
		}
		for _, shuffle := range []bool{false, true} {
			if src, err := Open(path, []Input{{Name: "x", DType: dt}}, Options{Batch: 3, Samples: 100, Shuffle: shuffle, Seed: 1}); err == nil {
				drain(src)
			}
		}
		tn, err := ReadNpy(path)
		if err != nil {
			return
		}
		if err := WriteNpy(back, tn); err != nil {
			t.Fatalf("WriteNpy of a tensor ReadNpy accepted: %v", err)
		}
		again, err := ReadNpy(back)
		if err != nil {
			t.Fatalf("ReadNpy of what WriteNpy wrote: %v", err)
		}
		if again.DType != tn.DType || !dimsEqual(again.Dims, tn.Dims) || !bytes.Equal(tensorBytes(t, again), tensorBytes(t, tn)) {
			t.Fatalf("round trip changed %s%v into %s%v", tn.DType, tn.Dims, again.DType, again.Dims)
		}
	})
}

// FuzzOpenNpz writes each input to a .npz file and streams it. The inputs
// fed are the file's own .npy members (at most four), typed by their
// headers where those parse, so that mutations reach the sample reader and
// not only the key check.
func FuzzOpenNpz(f *testing.F) {
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		f.Add(zipBytes(f,
			zipMember{"x.npy", npyBytes(f, graph.Float, []int64{5, 2}, seqF32(10)), method},
			zipMember{"y.npy", npyBytes(f, graph.Int64, []int64{5}, i64(1, 2, 3, 4, 5)), method},
		))
	}
	path := filepath.Join(f.TempDir(), "x.npz")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs := npzInputs(b)
		if len(inputs) == 0 {
			inputs = []Input{{Name: "x", DType: graph.Float}}
		}
		for _, shuffle := range []bool{false, true} {
			if src, err := Open(path, inputs, Options{Batch: 2, Samples: 100, Shuffle: shuffle, Seed: 1}); err == nil {
				drain(src)
			}
		}
	})
}

// npzInputs returns an input for each .npy member of a zip, typed by the
// member's header when it parses.
func npzInputs(b []byte) []Input {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil
	}
	var inputs []Input
	for _, zf := range zr.File {
		name, ok := strings.CutSuffix(zf.Name, ".npy")
		if !ok || len(inputs) == 4 {
			continue
		}
		in := Input{Name: name, DType: graph.Float}
		if rc, err := zf.Open(); err == nil {
			if h, err := readNpyHeader(io.LimitReader(rc, 1<<16), 1<<16); err == nil {
				in.DType = h.dtype
			}
			rc.Close()
		}
		inputs = append(inputs, in)
	}
	return inputs
}

// TestDrawOrderHuge: drawing from more samples than drawOrder permutes in
// full gives distinct in-range indices, the same for the same seed.
func TestDrawOrderHuge(t *testing.T) {
	for _, n := range []int{maxPermutation + 1, 1 << 40} {
		a, b := drawOrder(7, n, 1000), drawOrder(7, n, 1000)
		seen := map[int]bool{}
		for i, v := range a {
			if v < 0 || v >= n || seen[v] || v != b[i] {
				t.Fatalf("n=%d: draw %d is %d (again: %d), seen before: %v", n, i, v, b[i], seen[v])
			}
			seen[v] = true
		}
	}
}
