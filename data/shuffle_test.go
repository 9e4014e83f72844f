package data

import (
	"archive/zip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// shuffled reads the first values of every sample a source gives: sample
// i of the file holds i in all its elements.
func shuffled(t *testing.T, path string, opts Options) []float32 {
	t.Helper()
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	src, err := Open(path, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	for _, b := range readAll(t, src) {
		v, _ := b.Tensors[0].Float32s()
		for k := 0; k < len(v); k += 2 {
			if v[k] != v[k+1] {
				t.Fatalf("sample bytes mixed: %v", v)
			}
			got = append(got, v[k])
		}
	}
	return got
}

func TestShuffle(t *testing.T) {
	dir := t.TempDir()
	vals := make([]float32, 20)
	for i := range vals {
		vals[i] = float32(i / 2)
	}
	p := writeNpyFile(t, dir, "x.npy", graph.Float, []int64{10, 2}, f32(vals...))
	plain := shuffled(t, p, Options{Batch: 3, Samples: 4})
	if !slices.Equal(plain, []float32{0, 1, 2, 3}) {
		t.Errorf("without shuffle: %v", plain)
	}
	a := shuffled(t, p, Options{Batch: 3, Samples: 4, Shuffle: true, Seed: 1})
	b := shuffled(t, p, Options{Batch: 3, Samples: 4, Shuffle: true, Seed: 1})
	c := shuffled(t, p, Options{Batch: 3, Samples: 4, Shuffle: true, Seed: 2})
	if !slices.Equal(a, b) || slices.Equal(a, c) || slices.Equal(a, plain) {
		t.Errorf("seed 1: %v and %v; seed 2: %v", a, b, c)
	}
	all := shuffled(t, p, Options{Batch: 4, Shuffle: true, Seed: 1})
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	if len(all) != 10 || !slices.Equal(sorted, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("a full shuffle is not a permutation: %v", all)
	}
	// A compressed member cannot be read out of order.
	z := writeZip(t, filepath.Join(dir, "x.npz"), zipMember{"x.npy", npyBytes(t, graph.Float, []int64{10, 2}, f32(vals...)), zip.Deflate})
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	_, err := Open(z, in, Options{Shuffle: true})
	wantErr(t, err, "random access", z)
}

// Skip N reads exactly what Samples N left out, shuffled or not, so a
// calibration subset and a held-out check can share one file.
func TestSkipIsTheComplement(t *testing.T) {
	vals := make([]float32, 20)
	for i := range vals {
		vals[i] = float32(i / 2)
	}
	p := writeNpyFile(t, t.TempDir(), "x.npy", graph.Float, []int64{10, 2}, f32(vals...))
	for _, shuffle := range []bool{false, true} {
		head := shuffled(t, p, Options{Batch: 3, Samples: 4, Shuffle: shuffle, Seed: 7})
		rest := shuffled(t, p, Options{Batch: 3, Skip: 4, Shuffle: shuffle, Seed: 7})
		some := shuffled(t, p, Options{Batch: 3, Skip: 4, Samples: 2, Shuffle: shuffle, Seed: 7})
		if len(rest) != 6 || !slices.Equal(some, rest[:2]) {
			t.Fatalf("shuffle %v: rest %v, first two of it %v", shuffle, rest, some)
		}
		union := slices.Concat(head, rest)
		slices.Sort(union)
		if !slices.Equal(union, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Errorf("shuffle %v: %v and %v are not a partition", shuffle, head, rest)
		}
		if !shuffle && !slices.Equal(rest, []float32{4, 5, 6, 7, 8, 9}) {
			t.Errorf("skip without shuffle read %v", rest)
		}
	}
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	_, err := Open(p, in, Options{Skip: 10})
	wantErr(t, err, "leaves none of 10", p)
}
