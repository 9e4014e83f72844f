package data

import (
	"archive/zip"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// twoInputs is a model with an image-like input and an int64 input.
var twoInputs = []Input{
	{Name: "a", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3)}},
	{Name: "b", DType: graph.Int64, Shape: graph.Shape{dyn("N")}},
}

func TestNpzStoredAndDeflated(t *testing.T) {
	dir := t.TempDir()
	aData := seqF32(21)
	bData := i64(10, 11, 12, 13, 14, 15, 16)
	for _, c := range []struct {
		name   string
		method uint16
	}{{"stored", zip.Store}, {"deflated", zip.Deflate}} {
		t.Run(c.name, func(t *testing.T) {
			// Members in the other order than the inputs: keys, not order, map them.
			p := writeZip(t, filepath.Join(dir, c.name+".npz"),
				zipMember{"b.npy", npyBytes(t, graph.Int64, []int64{7}, bData), c.method},
				zipMember{"a.npy", npyBytes(t, graph.Float, []int64{7, 3}, aData), c.method},
			)
			src, err := Open(p, twoInputs, Options{Batch: 3})
			if err != nil {
				t.Fatal(err)
			}
			// Stored members are read by offset, deflated ones streamed.
			for _, m := range src.(*sampleSource).members {
				if (c.method == zip.Store) != (m.at != nil) || (c.method == zip.Deflate) != (m.stream != nil) {
					t.Errorf("member %s: by offset %v, streamed %v", m.where, m.at != nil, m.stream != nil)
				}
			}
			batches := readAll(t, src)
			wantN := []int{3, 3, 1}
			if len(batches) != 3 {
				t.Fatalf("%d batches, want 3", len(batches))
			}
			first := 0
			for i, b := range batches {
				n := wantN[i]
				if b.Samples != n || len(b.Tensors) != 2 {
					t.Fatalf("batch %d: %d samples, %d tensors", i, b.Samples, len(b.Tensors))
				}
				ta, tb := b.Tensors[0], b.Tensors[1]
				if ta.Name != "a" || !dimsEqual(ta.Dims, []int64{int64(n), 3}) || tb.Name != "b" || !dimsEqual(tb.Dims, []int64{int64(n)}) {
					t.Fatalf("batch %d: %s%v %s%v", i, ta.Name, ta.Dims, tb.Name, tb.Dims)
				}
				if !bytes.Equal(tensorBytes(t, ta), aData[first*12:(first+n)*12]) || !bytes.Equal(tensorBytes(t, tb), bData[first*8:(first+n)*8]) {
					t.Errorf("batch %d: contents differ", i)
				}
				first += n
			}
		})
	}
}

// TestNpzDeflatedChecksum corrupts a deflated member's CRC: the last batch
// must fail rather than pass corrupt data silently.
func TestNpzDeflatedChecksum(t *testing.T) {
	dir := t.TempDir()
	p := writeZip(t, filepath.Join(dir, "c.npz"),
		zipMember{"x.npy", npyBytes(t, graph.Float, []int64{4, 2}, seqF32(8)), zip.Deflate})
	raw, _ := os.ReadFile(p)
	// The CRC-32 sits at offset 16 of the central directory entry.
	cd := bytes.LastIndex(raw, []byte("PK\x01\x02"))
	raw[cd+16] ^= 0xff
	// And in the data descriptor Go's writer puts after the data.
	if dd := bytes.LastIndex(raw[:cd], []byte("PK\x07\x08")); dd >= 0 {
		raw[dd+4] ^= 0xff
	}
	os.WriteFile(p, raw, 0o644)
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	src, err := Open(p, in, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Next()
	wantErr(t, err, p, "x.npy", `input "x"`, "checksum")
}

func TestNpzSampleLimitAndStaticBatch(t *testing.T) {
	dir := t.TempDir()
	p := writeZip(t, filepath.Join(dir, "s.npz"),
		zipMember{"a.npy", npyBytes(t, graph.Float, []int64{8, 3}, seqF32(24)), zip.Deflate},
		zipMember{"b.npy", npyBytes(t, graph.Int64, []int64{8}, i64(0, 1, 2, 3, 4, 5, 6, 7)), zip.Store},
	)
	src, err := Open(p, twoInputs, Options{Batch: 2, Samples: 5})
	if err != nil {
		t.Fatal(err)
	}
	bs := readAll(t, src)
	if len(bs) != 3 || bs[2].Samples != 1 || !bytes.Equal(tensorBytes(t, bs[2].Tensors[1]), i64(4)) {
		t.Fatalf("Samples 5 in batches of 2: %d batches", len(bs))
	}
	static := []Input{
		{Name: "a", DType: graph.Float, Shape: graph.StaticShape(4, 3)},
		{Name: "b", DType: graph.Int64, Shape: graph.Shape{dyn("N")}},
	}
	src, err = Open(p, static, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bs := readAll(t, src); len(bs) != 2 || bs[1].Samples != 4 {
		t.Fatalf("static batch 4: %d batches", len(bs))
	}
}

// TestMalformedNpzNoPanic feeds byte flips of valid .npz files (stored and
// deflated) to Open and Next: they must fail cleanly or succeed.
func TestMalformedNpzNoPanic(t *testing.T) {
	dir := t.TempDir()
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		p := writeZip(t, filepath.Join(dir, "good.npz"),
			zipMember{"a.npy", npyBytes(t, graph.Float, []int64{4, 3}, seqF32(12)), method},
			zipMember{"b.npy", npyBytes(t, graph.Int64, []int64{4}, i64(1, 2, 3, 4)), method})
		good, _ := os.ReadFile(p)
		rng := rand.New(rand.NewPCG(5, uint64(method)))
		for i := range 1500 {
			b := append([]byte{}, good...)
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
			if i%10 == 0 {
				b = b[:rng.IntN(len(b))]
			}
			q := filepath.Join(dir, fmt.Sprintf("m%d_%d.npz", method, i))
			if err := os.WriteFile(q, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if src, err := Open(q, twoInputs, Options{Batch: 3}); err == nil {
				for {
					if _, err := src.Next(); err != nil {
						break
					}
				}
				src.Close()
			}
			os.Remove(q)
		}
	}
}
