package textlines

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every character Text can draw, and so every character of a recognizer
// label, is in PaddleOCR's dictionary (or is a space, the rec model's last
// class).
func TestVocabularyInDictionary(t *testing.T) {
	dict := map[string]bool{}
	for _, k := range dictionary(t) {
		dict[k] = true
	}
	vocab := strings.Join(words, "") + strings.Join(caps, "") + strings.Join(puncts, "") +
		letters + strings.ToUpper(strings.Join(words, "")+letters) + "0123456789.-()"
	for _, c := range vocab {
		if !dict[string(c)] {
			t.Errorf("%q is not in ppocr_keys_v1.txt", c)
		}
	}
	s, err := GenerateRec(RecEvalSeed, 30)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range s.Labels {
		for _, c := range l {
			if c != ' ' && !dict[string(c)] {
				t.Errorf("label %d %q: %q is not in ppocr_keys_v1.txt", i, l, c)
			}
		}
	}
}

func TestRecDeterministic(t *testing.T) {
	a, err := GenerateRec(11, 12)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateRec(11, 12)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(floatBytes(a.Images), floatBytes(b.Images)) {
		t.Fatal("same seed rendered different images")
	}
	if strings.Join(a.Labels, "\n") != strings.Join(b.Labels, "\n") {
		t.Fatalf("same seed drew different labels:\n%q\n%q", a.Labels, b.Labels)
	}
	c, err := GenerateRec(12, 12)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(floatBytes(a.Images), floatBytes(c.Images)) {
		t.Fatal("different seeds rendered the same images")
	}
	if _, err := GenerateRec(1, 0); err == nil {
		t.Fatal("zero samples accepted")
	}
}

// Labels are non-empty, single-spaced printable ASCII; every line fits
// the recognizer's width unsqueezed; the preprocessed samples are the
// lines resized to height 48, values in [-1,1], padded with zeros on the
// right.
func TestRecSamples(t *testing.T) {
	const n = 30
	s, err := GenerateRec(RecEvalSeed, n)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != n || len(s.Images) != n*RecPixels || RecPixels != 3*48*320 {
		t.Fatalf("%d labels, %d values; want %d, %d", s.Len(), len(s.Images), n, n*3*48*320)
	}
	buf := make([]float32, RecPixels)
	for i := range n {
		img, text := RecLine(RecEvalSeed, i)
		if text != s.Labels[i] {
			t.Fatalf("sample %d: label %q, RecLine's text %q", i, s.Labels[i], text)
		}
		if text == "" || text != strings.Join(strings.Fields(text), " ") || !utf8.ValidString(text) {
			t.Fatalf("sample %d: label %q is empty or not single-spaced", i, text)
		}
		for _, c := range text {
			if c < ' ' || c > '~' {
				t.Fatalf("sample %d: label %q has %q", i, text, c)
			}
		}
		b := img.Bounds()
		rw := RecResizedWidth(b.Dx(), b.Dy())
		if exact := math.Ceil(48 * float64(b.Dx()) / float64(b.Dy())); float64(rw) != exact {
			t.Fatalf("sample %d: %dx%d resizes to width %v, squeezed to %d", i, b.Dx(), b.Dy(), exact, rw)
		}
		PreprocessRec(img, buf)
		if !bytes.Equal(floatBytes(buf), floatBytes(s.Sample(i))) {
			t.Fatalf("sample %d is not its line preprocessed", i)
		}
		x := s.Sample(i)
		for c := range Channels {
			for y := range Height {
				for xx := range RecWidth {
					v := x[(c*Height+y)*RecWidth+xx]
					if xx >= rw && v != 0 {
						t.Fatalf("sample %d: padding at c%d y%d x%d is %v", i, c, y, xx, v)
					}
					if math.IsNaN(float64(v)) || v < -1 || v > 1 {
						t.Fatalf("sample %d: value %v at c%d y%d x%d", i, v, c, y, xx)
					}
				}
			}
		}
	}
	// A line wider than 320/48 of its height is squeezed to 320.
	if got := RecResizedWidth(1000, 48); got != RecWidth {
		t.Fatalf("RecResizedWidth(1000, 48) = %d; want %d", got, RecWidth)
	}
	if got := RecResizedWidth(100, 24); got != 200 {
		t.Fatalf("RecResizedWidth(100, 24) = %d; want 200", got)
	}
}

// LineText returns Line's image and the text Text draws from Line's
// stream.
func TestLineText(t *testing.T) {
	for i := range 5 {
		img, text := LineText(EvalSeed, i)
		if !bytes.Equal(img.Pix, Line(EvalSeed, i).Pix) {
			t.Fatalf("line %d: LineText's image is not Line's", i)
		}
		if text == "" {
			t.Fatalf("line %d: empty text", i)
		}
	}
}
