package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

var npyTypes = []graph.DataType{
	graph.Float, graph.Double, graph.Float16, graph.Int8, graph.Int16, graph.Int32, graph.Int64,
	graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64, graph.Bool,
}

func TestNpyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	shapes := [][]int64{{}, {1}, {7}, {2, 3}, {3, 1, 4, 2}, {0, 5}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range npyTypes {
		for _, dims := range shapes {
			name := fmt.Sprintf("%s_%d_%v", dt, len(dims), dims)
			t.Run(name, func(t *testing.T) {
				n := int64(1)
				for _, d := range dims {
					n *= d
				}
				size, _ := dt.ByteSize(n)
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(rng.Uint32())
					if dt == graph.Bool {
						data[i] &= 1
					}
				}
				p := filepath.Join(dir, "rt.npy")
				if err := WriteNpy(p, mustTensor(t, "x", dt, dims, data)); err != nil {
					t.Fatal(err)
				}
				raw, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				// Version 1.0 header, 64-byte aligned, ending in a newline.
				if !bytes.HasPrefix(raw, []byte("\x93NUMPY\x01\x00")) {
					t.Fatalf("prefix %q", raw[:8])
				}
				hlen := int(binary.LittleEndian.Uint16(raw[8:10]))
				if (10+hlen)%64 != 0 || raw[10+hlen-1] != '\n' {
					t.Fatalf("header of %d bytes is not aligned or does not end in a newline: %q", hlen, raw[:10+hlen])
				}
				descr, _ := descrOf(dt)
				if !bytes.Contains(raw[:10+hlen], []byte("'descr': '"+descr+"'")) {
					t.Errorf("header %q lacks descr %s", raw[10:10+hlen], descr)
				}
				if !bytes.Equal(raw[10+hlen:], data) {
					t.Errorf("data section differs")
				}
				got, err := ReadNpy(p)
				if err != nil {
					t.Fatal(err)
				}
				if got.DType != dt || !dimsEqual(got.Dims, dims) || got.Name != "rt" {
					t.Fatalf("read %q %s%v, want rt %s%v", got.Name, got.DType, got.Dims, dt, dims)
				}
				if !bytes.Equal(tensorBytes(t, got), data) {
					t.Fatalf("data differs after the round trip")
				}
				// Deterministic: the same tensor gives the same bytes.
				if err := WriteNpy(p, got); err != nil {
					t.Fatal(err)
				}
				again, _ := os.ReadFile(p)
				if !bytes.Equal(again, raw) {
					t.Fatalf("second write differs")
				}
			})
		}
	}
	// Atomic writes leave no temporary files behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries after the writes, want 1", len(entries))
	}
}

func TestWriteNpyErrors(t *testing.T) {
	dir := t.TempDir()
	bf := mustTensor(t, "x", graph.BFloat16, []int64{2}, make([]byte, 4))
	wantErr(t, WriteNpy(filepath.Join(dir, "x.npy"), bf), "x.npy", "bfloat16")
	ok := mustTensor(t, "x", graph.Float, []int64{2}, f32(1, 2))
	wantErr(t, WriteNpy(filepath.Join(dir, "missing", "x.npy"), ok), "missing/x.npy")
	// A failed write leaves an existing file untouched.
	p := writeNpyFile(t, dir, "keep.npy", graph.Float, []int64{2}, f32(1, 2))
	before, _ := os.ReadFile(p)
	if err := WriteNpy(p, bf); err == nil {
		t.Fatal("no error")
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Error("failed write changed the file")
	}
}

func TestNpyHeaderVersions(t *testing.T) {
	dir := t.TempDir()
	dict := "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
	for _, c := range []struct {
		name string
		pre  []byte
	}{
		{"v1", append([]byte("\x93NUMPY\x01\x00"), binary.LittleEndian.AppendUint16(nil, uint16(len(dict)+1))...)},
		{"v2", append([]byte("\x93NUMPY\x02\x00"), binary.LittleEndian.AppendUint32(nil, uint32(len(dict)+1))...)},
		{"v3", append([]byte("\x93NUMPY\x03\x00"), binary.LittleEndian.AppendUint32(nil, uint32(len(dict)+1))...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".npy")
			raw := append(append(c.pre, dict+"\n"...), i64(5, -6, 7)...)
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadNpy(p)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := got.Int64s()
			if fmt.Sprint(v) != "[5 -6 7]" || got.DType != graph.Int64 {
				t.Fatalf("got %s %v", got.DType, v)
			}
		})
	}
	// Header spellings numpy and others write.
	for _, dict := range []string{
		`{"descr": "<i8", "fortran_order": False, "shape": (3,)}`,
		`{'shape': (3L,), 'fortran_order': False, 'descr': '<i8'}`,
		"{ 'descr' : '<i8' ,\t'fortran_order' : False , 'shape' : ( 3 , ) , }   ",
	} {
		h, err := parseNpyDict(dict)
		if err != nil || h.descr != "<i8" || len(h.shape) != 1 || h.shape[0] != 3 || h.fortran {
			t.Errorf("parse %q: %+v, %v", dict, h, err)
		}
	}
	for _, spelling := range []string{"|i1", "<i1", ">i1", "|u1", "<u1", "|b1"} {
		if _, err := parseDescr(spelling); err != nil {
			t.Errorf("descr %q: %v", spelling, err)
		}
	}
}

// TestNpyBatching reads a [10,2,3] array in batches of 4: 4, 4, 2 samples
// with exactly the file's contents.
func TestNpyBatching(t *testing.T) {
	dir := t.TempDir()
	p := writeNpyFile(t, dir, "x.npy", graph.Float, []int64{10, 2, 3}, seqF32(60))
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2), st(3)}}}

	src, err := Open(p, in, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	batches := readAll(t, src)
	wantN := []int{4, 4, 2}
	if len(batches) != len(wantN) {
		t.Fatalf("%d batches, want 3", len(batches))
	}
	first := 0
	for i, b := range batches {
		if b.Samples != wantN[i] || len(b.Tensors) != 1 {
			t.Fatalf("batch %d: %d samples, %d tensors", i, b.Samples, len(b.Tensors))
		}
		tt := b.Tensors[0]
		if tt.Name != "x" || tt.DType != graph.Float || !dimsEqual(tt.Dims, []int64{int64(wantN[i]), 2, 3}) {
			t.Fatalf("batch %d: %s %s%v", i, tt.Name, tt.DType, tt.Dims)
		}
		want := seqF32(60)[first*24 : (first+wantN[i])*24]
		if !bytes.Equal(tensorBytes(t, tt), want) {
			t.Errorf("batch %d: contents differ", i)
		}
		first += wantN[i]
	}

	// Samples limits the count; Batch 0 means 1.
	src, err = Open(p, in, Options{Batch: 4, Samples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 2 || bs[0].Samples != 4 || bs[1].Samples != 1 {
		t.Errorf("Samples 5: got %d batches", len(bs))
	}
	src, err = Open(p, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 10 || bs[9].Samples != 1 || !bytes.Equal(tensorBytes(t, bs[9].Tensors[0]), seqF32(60)[9*24:]) {
		t.Errorf("Batch 0: got %d batches", len(bs))
	}

	// A static batch of 5 fixes the batch size; 0 means 5.
	in5 := []Input{{Name: "x", DType: graph.Float, Shape: graph.StaticShape(5, 2, 3)}}
	src, err = Open(p, in5, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 2 || bs[0].Samples != 5 || bs[1].Samples != 5 {
		t.Errorf("static batch 5: got %d batches", len(bs))
	}
	// --shape fixes it the same way.
	src, err = Open(p, in, Options{Spec: Spec{Shapes: map[string][]int64{"x": {2, 2, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 5 || bs[4].Samples != 2 {
		t.Errorf("--shape x:2,2,3: got %d batches", len(bs))
	}
	// A batch larger than the file gives one batch of everything.
	src, err = Open(p, in, Options{Batch: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 1 || bs[0].Samples != 10 {
		t.Errorf("huge batch: got %d batches", len(bs))
	}
	// Next after the end keeps returning io.EOF; after Close it fails.
	src, _ = Open(p, in, Options{Batch: 10})
	src.Next()
	if _, err := src.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
	src.Close()
	if _, err := src.Next(); err == nil || err == io.EOF {
		t.Errorf("after Close: %v", err)
	}
}

// TestNpyTruncatedWhileReading covers data that shrinks after Open: the
// error names the file and the sample.
func TestNpyTruncatedWhileReading(t *testing.T) {
	dir := t.TempDir()
	p := writeNpyFile(t, dir, "x.npy", graph.Float, []int64{10, 2}, seqF32(20))
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	src, err := Open(p, in, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Next(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if err := os.Truncate(p, fi.Size()-3*8-4); err != nil { // samples 0..5 and half of 6 remain
		t.Fatal(err)
	}
	_, err = src.Next()
	wantErr(t, err, p, `input "x"`, "truncated", "sample 6 of 10")
}

// TestNpyStreamingMemory reads a 206 MB .npy in batches of 8 and checks
// that memory per batch stays near the batch size, not the file size.
func TestNpyStreamingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB file")
	}
	const (
		samples   = 1100
		perSample = 3 * 128 * 128 // float32: 192 KiB per sample
		batch     = 8
	)
	dir := t.TempDir()
	p := filepath.Join(dir, "big.npy")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := npyHeaderBytes(graph.Float, []int64{samples, 3, 128, 128})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(hdr)
	// Sample i holds the value i everywhere, written a sample at a time.
	chunk := make([]byte, 4*perSample)
	for i := range samples {
		copy(chunk, f32(float32(i)))
		for j := 4; j < len(chunk); j *= 2 {
			copy(chunk[j:], chunk[:j])
		}
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if fi.Size() < 190<<20 {
		t.Fatalf("file is %d bytes", fi.Size())
	}

	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), st(128), st(128)}}}
	batchBytes := uint64(batch * 4 * perSample)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse
	src, err := Open(p, in, Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var maxHeap, maxAlloc uint64
	n := 0
	for {
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		b, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		maxAlloc = max(maxAlloc, ms.TotalAlloc-before)
		maxHeap = max(maxHeap, ms.HeapInuse)
		data := tensorBytes(t, b.Tensors[0])
		for _, s := range []int{0, b.Samples - 1} {
			off := s * 4 * perSample
			want := f32(float32(n + s))
			if !bytes.Equal(data[off:off+4], want) || !bytes.Equal(data[off+4*perSample-4:off+4*perSample], want) {
				t.Fatalf("batch at sample %d: sample %d has wrong contents", n, n+s)
			}
		}
		n += b.Samples
	}
	if n != samples {
		t.Fatalf("read %d samples, want %d", n, samples)
	}
	t.Logf("file %d MB, batch %d KB: max allocated per batch %d KB, max heap in use %d MB (baseline %d MB)",
		fi.Size()>>20, batchBytes>>10, maxAlloc>>10, maxHeap>>20, baseHeap>>20)
	if maxAlloc > batchBytes+64<<10 {
		t.Errorf("a batch allocated %d bytes, want about %d", maxAlloc, batchBytes)
	}
	if maxHeap > baseHeap+32<<20 {
		t.Errorf("heap in use reached %d MB (baseline %d MB) reading a %d MB file", maxHeap>>20, baseHeap>>20, fi.Size()>>20)
	}
}

// TestMalformedNpyNoPanic feeds truncations and byte flips of valid files
// to ReadNpy and Open: they must fail cleanly or succeed, never panic.
func TestMalformedNpyNoPanic(t *testing.T) {
	dir := t.TempDir()
	good := npyBytes(t, graph.Float, []int64{4, 3}, seqF32(12))
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3)}}}
	p := filepath.Join(dir, "m.npy")
	count := 0
	try := func(b []byte) {
		// A fresh file each time: rewriting one file in place is slow on
		// some file systems (ext4 flushes on truncate).
		count++
		p := filepath.Join(dir, fmt.Sprintf("m%d.npy", count))
		defer os.Remove(p)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ReadNpy(p)
		if src, err := Open(p, in, Options{Batch: 3}); err == nil {
			for {
				if _, err := src.Next(); err != nil {
					break
				}
			}
			src.Close()
		}
	}
	for n := 0; n <= len(good); n++ {
		try(good[:n])
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		b := append([]byte{}, good...)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(128)] = byte(rng.Uint32())
		}
		try(b)
	}
	// Absurd shapes are refused before any allocation.
	for _, shape := range []string{"(4611686018427387904, 4)", "(99999999999, 3)", "(-1, 3)", "(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)"} {
		dict := "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n"
		b := append([]byte("\x93NUMPY\x01\x00"), binary.LittleEndian.AppendUint16(nil, uint16(len(dict)))...)
		b = append(append(b, dict...), seqF32(12)...)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadNpy(p); err == nil {
			t.Errorf("shape %s: ReadNpy accepted it", shape)
		}
		_, err := Open(p, in, Options{})
		if err == nil {
			t.Errorf("shape %s: Open accepted it", shape)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("shape %s: error %q does not name the file", shape, err)
		}
	}
}

func FuzzReadNpyHeader(f *testing.F) {
	f.Add(npyBytes(f, graph.Float, []int64{4, 3}, seqF32(12)))
	f.Add(npyBytes(f, graph.Bool, []int64{}, []byte{1}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<i8'}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := readNpyHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if h.size < 0 || h.dataOff > int64(len(b)) {
			t.Fatalf("header %+v from %d bytes", h, len(b))
		}
		_ = h.sampleBytes()
	})
}
