package textlines

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"testing"

	"golang.org/x/image/draw"
)

func TestDetDeterministic(t *testing.T) {
	a, err := GenerateDet(11, 3, DetSize, DetSize)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateDet(11, 3, DetSize, DetSize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(floatBytes(a.Images), floatBytes(b.Images)) {
		t.Fatal("same seed rendered different pages")
	}
	for i := range a.Boxes {
		if len(a.Boxes[i]) != len(b.Boxes[i]) {
			t.Fatalf("page %d: same seed gave %d and %d boxes", i, len(a.Boxes[i]), len(b.Boxes[i]))
		}
		for j := range a.Boxes[i] {
			if a.Boxes[i][j] != b.Boxes[i][j] {
				t.Fatalf("page %d box %d: same seed gave %v and %v", i, j, a.Boxes[i][j], b.Boxes[i][j])
			}
		}
	}
	c, err := GenerateDet(12, 3, DetSize, DetSize)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(floatBytes(a.Images), floatBytes(c.Images)) {
		t.Fatal("different seeds rendered the same pages")
	}
	if _, err := GenerateDet(1, 0, DetSize, DetSize); err == nil {
		t.Fatal("zero pages accepted")
	}
}

// Boxes lie inside the page, are laid out as PageBoxes promises (items on
// a row at least twice the taller ink height apart, rows at least 0.6
// times it) and hold ink: the page under a box is darker than around it.
func TestDetBoxes(t *testing.T) {
	const n = 10
	for _, size := range [][2]int{{DetSize, DetSize}, {160, 256}} {
		h, w := size[0], size[1]
		s, err := GenerateDet(DetEvalSeed, n, h, w)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Images) != n*3*h*w {
			t.Fatalf("%d values; want %d", len(s.Images), n*3*h*w)
		}
		total := 0
		for i := range n {
			boxes := s.Boxes[i]
			if boxes == nil {
				t.Fatalf("page %d: nil boxes (JSON null)", i)
			}
			total += len(boxes)
			img := s.Sample(i)
			for _, v := range img {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < -2.2 || v > 2.7 {
					t.Fatalf("page %d: value %v", i, v)
				}
			}
			for j, b := range boxes {
				if b[0] < 0 || b[1] < 0 || b[2] > float32(w) || b[3] > float32(h) || b[0] >= b[2] || b[1] >= b[3] {
					t.Fatalf("page %d box %d %v is empty or outside the %dx%d page", i, j, b, h, w)
				}
				if bh := b[3] - b[1]; bh < 4 || bh > 48 {
					t.Fatalf("page %d box %d %v: ink height %v", i, j, b, bh)
				}
				for k, c := range boxes[:j] {
					gx := max(c[0]-b[2], b[0]-c[2]) // negative when the columns overlap
					gy := max(c[1]-b[3], b[1]-c[3])
					tall := max(b[3]-b[1], c[3]-c[1])
					if gx < 2*tall && gy < 0.6*tall {
						t.Fatalf("page %d: boxes %d %v and %d %v are %v apart across, %v down", i, k, c, j, b, gx, gy)
					}
				}
				// The box's darkest green value is ink, well below the
				// page around it (ImageNet-normalized: ink is dark).
				dark := float32(math.Inf(1))
				for y := int(b[1]); y < int(b[3]); y++ {
					for x := int(b[0]); x < int(b[2]); x++ {
						dark = min(dark, img[(1*h+y)*w+x])
					}
				}
				if dark > 0.5 {
					t.Fatalf("page %d box %d %v: no ink (darkest %v)", i, j, b, dark)
				}
			}
		}
		if total < 2*n {
			t.Fatalf("%d boxes on %d pages of %dx%d; want at least 2 a page", total, n, h, w)
		}
	}
}

// drawInk's box is tight: black text on a white page inks (covers at
// least inkAlpha) only pixels inside it, and each of its four edges.
func TestDrawInkTight(t *testing.T) {
	for k, ff := range mustFonts() {
		for _, text := range []string{"new", "Hotel 2024-05-12", "(pay) jg,", "I"} {
			face := newFace(ff, 14+3*float64(k))
			pg := image.NewRGBA(image.Rect(0, 0, 320, 64))
			draw.Draw(pg, pg.Bounds(), image.White, image.Point{}, draw.Src)
			b, ok := drawInk(pg, face, text, 10, 40, image.NewUniform(color.Black))
			face.Close()
			if !ok {
				t.Fatalf("%q: no ink", text)
			}
			ink := 255 - inkAlpha // the value of a pixel inkAlpha covers
			var edges [4]bool
			for y := range 64 {
				for x := range 320 {
					v := int(pg.RGBAAt(x, y).G)
					in := float32(x) >= b[0] && float32(x) < b[2] && float32(y) >= b[1] && float32(y) < b[3]
					if v < ink-2 && !in {
						t.Fatalf("font %d %q: ink %d at (%d,%d) outside its box %v", k, text, v, x, y, b)
					}
					if v <= ink+2 && in {
						edges[0] = edges[0] || float32(x) == b[0]
						edges[1] = edges[1] || float32(y) == b[1]
						edges[2] = edges[2] || float32(x) == b[2]-1
						edges[3] = edges[3] || float32(y) == b[3]-1
					}
				}
			}
			if edges != [4]bool{true, true, true, true} {
				t.Fatalf("font %d %q: box %v is not tight (inked edges %v)", k, text, b, edges)
			}
		}
	}
}
