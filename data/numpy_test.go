package data

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// numpyScript writes fixtures with numpy itself: every dtype, versions 2.0
// and 3.0, savez and savez_compressed, a big-endian and a Fortran-order
// array.
const numpyScript = `
import sys, numpy as np
d = sys.argv[1]
for name in ['float32', 'float64', 'float16', 'int8', 'int16', 'int32', 'int64',
             'uint8', 'uint16', 'uint32', 'uint64', 'bool']:
    a = np.arange(30) % 2 if name == 'bool' else np.arange(30)
    np.save(f'{d}/{name}.npy', a.astype(name).reshape(5, 2, 3))
np.save(f'{d}/vec.npy', np.arange(7, dtype='<i4'))
np.save(f'{d}/scalar.npy', np.float32(2.5))
np.save(f'{d}/big_batch.npy', np.zeros((123456789012, 0), dtype='<f4'))
for v in [(2, 0), (3, 0)]:
    with open(f'{d}/v{v[0]}.npy', 'wb') as f:
        np.lib.format.write_array(f, np.arange(6, dtype='<i8').reshape(3, 2), version=v)
img = np.arange(7 * 3 * 4, dtype='float32').reshape(7, 3, 4)
ids = np.arange(7, dtype='int64') * 10
np.savez(f'{d}/stored.npz', img=img, ids=ids)
np.savez_compressed(f'{d}/deflated.npz', img=img, ids=ids)
np.save(f'{d}/big.npy', np.arange(6, dtype='>f4').reshape(3, 2))
np.save(f'{d}/fortran.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(3, 2)))
`

// arangeBytes is numpy's arange(n).astype(dt) (mod 2 for bool) as bytes.
func arangeBytes(dt graph.DataType, n int) []byte {
	var out []byte
	le := binary.LittleEndian
	for i := range n {
		switch dt {
		case graph.Float:
			out = le.AppendUint32(out, math.Float32bits(float32(i)))
		case graph.Double:
			out = le.AppendUint64(out, math.Float64bits(float64(i)))
		case graph.Float16:
			out = le.AppendUint16(out, float64ToHalf(float64(i)))
		case graph.Bool:
			out = append(out, byte(i%2))
		case graph.Int8, graph.Uint8:
			out = append(out, byte(i))
		case graph.Int16, graph.Uint16:
			out = le.AppendUint16(out, uint16(i))
		case graph.Int32, graph.Uint32:
			out = le.AppendUint32(out, uint32(i))
		default:
			out = le.AppendUint64(out, uint64(i))
		}
	}
	return out
}

// TestNumpyFixtures reads files numpy wrote, and checks that WriteNpy
// writes the same bytes numpy does. Skipped when numpy is not installed.
func TestNumpyFixtures(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("numpy is not available (%s -c 'import numpy': %v)", py, err)
	}
	dir := t.TempDir()
	if out, err := exec.Command(py, "-c", numpyScript, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy script: %v\n%s", err, out)
	}
	out := t.TempDir()
	sameAsNumpy := func(name string, tt *graph.Tensor) {
		t.Helper()
		p := filepath.Join(out, name)
		if err := WriteNpy(p, tt); err != nil {
			t.Fatal(err)
		}
		ours, _ := os.ReadFile(p)
		theirs, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s: WriteNpy bytes differ from numpy's:\nours   %q\nnumpy  %q", name, ours[:min(len(ours), 128)], theirs[:min(len(theirs), 128)])
		}
	}
	for _, dt := range npyTypes {
		name := dt.String() + ".npy"
		tt, err := ReadNpy(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if tt.DType != dt || !dimsEqual(tt.Dims, []int64{5, 2, 3}) {
			t.Fatalf("%s: %s%v", name, tt.DType, tt.Dims)
		}
		if !bytes.Equal(tensorBytes(t, tt), arangeBytes(dt, 30)) {
			t.Errorf("%s: values differ from arange(30)", name)
		}
		sameAsNumpy(name, tt)
		// And batches of 2 from the numpy file.
		in := []Input{{Name: "x", DType: dt, Shape: graph.Shape{dyn("N"), st(2), st(3)}}}
		src, err := Open(filepath.Join(dir, name), in, Options{Batch: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, b := range readAll(t, src) {
			got = append(got, tensorBytes(t, b.Tensors[0])...)
		}
		if !bytes.Equal(got, arangeBytes(dt, 30)) {
			t.Errorf("%s: batched values differ", name)
		}
	}
	for _, name := range []string{"vec.npy", "scalar.npy", "big_batch.npy"} {
		tt, err := ReadNpy(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sameAsNumpy(name, tt)
	}
	for _, name := range []string{"v2.npy", "v3.npy"} {
		tt, err := ReadNpy(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !dimsEqual(tt.Dims, []int64{3, 2}) || !bytes.Equal(tensorBytes(t, tt), arangeBytes(graph.Int64, 6)) {
			t.Errorf("%s: %v", name, tt.Dims)
		}
	}
	inputs := []Input{
		{Name: "img", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(3), st(4)}},
		{Name: "ids", DType: graph.Int64, Shape: graph.Shape{dyn("N")}},
	}
	for _, name := range []string{"stored.npz", "deflated.npz"} {
		src, err := Open(filepath.Join(dir, name), inputs, Options{Batch: 3})
		if err != nil {
			t.Fatal(err)
		}
		var img, ids []byte
		var counts []int
		for _, b := range readAll(t, src) {
			counts = append(counts, b.Samples)
			img = append(img, tensorBytes(t, b.Tensors[0])...)
			ids = append(ids, tensorBytes(t, b.Tensors[1])...)
		}
		wantIDs := i64(0, 10, 20, 30, 40, 50, 60)
		if len(counts) != 3 || counts[2] != 1 || !bytes.Equal(img, seqF32(84)) || !bytes.Equal(ids, wantIDs) {
			t.Errorf("%s: batches %v, values differ", name, counts)
		}
	}
	in := []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2)}}}
	_, err := Open(filepath.Join(dir, "big.npy"), in, Options{})
	wantErr(t, err, "big.npy", `input "x"`, "big-endian")
	_, err = Open(filepath.Join(dir, "fortran.npy"), in, Options{})
	wantErr(t, err, "fortran.npy", `input "x"`, "Fortran")
}
