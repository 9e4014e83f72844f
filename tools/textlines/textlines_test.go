package textlines

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

func TestDeterministic(t *testing.T) {
	a, err := Generate(7, 20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(7, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(floatBytes(a.Images), floatBytes(b.Images)) {
		t.Fatal("same seed rendered different images")
	}
	for i := range a.Labels {
		if a.Labels[i] != b.Labels[i] || a.Base[i] != b.Base[i] {
			t.Fatalf("sample %d: same seed gave label/base %d/%d and %d/%d", i, a.Labels[i], a.Base[i], b.Labels[i], b.Base[i])
		}
	}
	c, err := Generate(8, 20)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(floatBytes(a.Images), floatBytes(c.Images)) {
		t.Fatal("different seeds rendered the same images")
	}
	if Text(newRand(1)) != Text(newRand(1)) {
		t.Fatal("Text is not deterministic")
	}
}

func TestGenerateShapeAndRange(t *testing.T) {
	if _, err := Generate(1, 3); err == nil {
		t.Fatal("odd sample count accepted")
	}
	const n = 40
	s, err := Generate(3, n)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != n || len(s.Images) != n*Pixels || len(s.Base) != n {
		t.Fatalf("got %d labels, %d values, %d bases; want %d, %d, %d", s.Len(), len(s.Images), len(s.Base), n, n*Pixels, n)
	}
	count := map[int]int{}
	ones := 0
	for i := range n {
		if l := s.Labels[i]; l != 0 && l != 1 {
			t.Fatalf("sample %d: label %d", i, l)
		}
		ones += int(s.Labels[i])
		count[s.Base[i]] += 1 + int(s.Labels[i])*10
		img := s.Sample(i)
		for j, v := range img {
			if math.IsNaN(float64(v)) || v < -1 || v > 1 {
				t.Fatalf("sample %d value %d = %v is outside [-1,1]", i, j, v)
			}
		}
	}
	if ones != n/2 || len(count) != n/2 {
		t.Fatalf("%d rotated samples of %d lines; want %d of %d", ones, len(count), n/2, n/2)
	}
	for b, c := range count {
		if c != 12 {
			t.Fatalf("line %d does not appear once per label", b)
		}
	}
	// The padding right of the resized width is zero, as in PaddleOCR.
	for i := range n {
		img := Line(3, s.Base[i])
		rw := ResizedWidth(img.Bounds().Dx(), img.Bounds().Dy())
		x := s.Sample(i)
		for c := range Channels {
			for y := range Height {
				for xx := rw; xx < Width; xx++ {
					if v := x[(c*Height+y)*Width+xx]; v != 0 {
						t.Fatalf("sample %d: padding at c%d y%d x%d is %v", i, c, y, xx, v)
					}
				}
			}
		}
	}
}

func TestRotated(t *testing.T) {
	s, err := Generate(5, 20)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, Pixels)
	for i := range s.Len() {
		up := Line(5, s.Base[i])
		rot := Rotate180(up)
		b := up.Bounds()
		if rot.Bounds().Dx() != b.Dx() || rot.Bounds().Dy() != b.Dy() {
			t.Fatalf("rotation changed size %v to %v", b, rot.Bounds())
		}
		for y := range b.Dy() {
			for x := range b.Dx() {
				if up.RGBAAt(x, y) != rot.RGBAAt(b.Dx()-1-x, b.Dy()-1-y) {
					t.Fatalf("line %d: pixel (%d,%d) is not the rotated one", s.Base[i], x, y)
				}
			}
		}
		want := up
		if s.Labels[i] == 1 {
			want = rot
		}
		Preprocess(want, buf)
		if !bytes.Equal(floatBytes(buf), floatBytes(s.Sample(i))) {
			t.Fatalf("sample %d (label %d) is not the preprocessed line", i, s.Labels[i])
		}
	}
}

// TestPaddleCls checks the labels against the real PaddleOCR direction
// classifier: it must agree with them on nearly all samples.
func TestPaddleCls(t *testing.T) {
	ortenv.Require(t)
	model := filepath.Join(testenv.Data(t, "ocr-models"), "ch_ppocr_mobile_v2.0_cls_infer.onnx")
	if _, err := os.Stat(model); err != nil {
		t.Skip(err)
	}
	s, err := Generate(EvalSeed, paddleSamples)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	images, labels := filepath.Join(dir, "images.npy"), filepath.Join(dir, "labels.npy")
	x, err := graph.NewTensor("x", graph.Float, []int64{int64(s.Len()), Channels, Height, Width}, floatBytes(s.Images))
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(images, x); err != nil {
		t.Fatal(err)
	}
	l, err := graph.NewInt64Tensor("labels", []int64{int64(s.Len())}, s.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(labels, l); err != nil {
		t.Fatal(err)
	}
	res, err := compare.Models(compare.Options{ModelA: model, ModelB: model, Data: images,
		DataOpts: data.Options{Batch: 50}, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accuracy == nil {
		t.Fatal("no accuracy reported")
	}
	t.Logf("PaddleOCR cls accuracy on %d samples: %.2f%%", res.Samples, res.Accuracy.A)
	if res.Accuracy.A < 95 { // percent
		t.Fatalf("PaddleOCR cls agrees with %.2f%% of the labels; want >= 95%%", res.Accuracy.A)
	}
}

// paddleSamples is how many samples TestPaddleCls scores.
const paddleSamples = 200

func floatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// Page is deterministic, finite, and has both page and ink values.
func TestPage(t *testing.T) {
	const h, w = 64, 96
	a, b := make([]float32, 3*h*w), make([]float32, 3*h*w)
	Page(1, 0, h, w, a)
	Page(1, 0, h, w, b)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d differs between two renderings: %v, %v", i, a[i], b[i])
		}
		if math.IsNaN(float64(a[i])) || math.IsInf(float64(a[i]), 0) {
			t.Fatalf("value %d is %v", i, a[i])
		}
		lo, hi = min(lo, a[i]), max(hi, a[i])
	}
	// ImageNet-normalized: white is about 2.2-2.6, black about -2.1.
	if hi < 1.5 || lo > 0 {
		t.Errorf("values in [%v, %v]: no light page or no dark ink", lo, hi)
	}
}
