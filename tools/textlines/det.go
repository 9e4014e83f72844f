package textlines

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"strings"

	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"
)

// The detector sets tonpy writes: square pages of DetSize pixels (a
// multiple of 32, as PaddleOCR's DB detectors need), their seeds distinct
// from each other and from the other sets'.
const (
	DetSize         = 320
	DetEvalSeed     = 5
	DetCalibSeed    = 6
	DetSamples      = 50
	DetCalibSamples = 20
)

// Box is a text box [x0, y0, x1, y1] in pixels of the page: the ink
// covers the pixels x0 <= x < x1, y0 <= y < y1 (x1 and y1 are the far
// edges, one past the last inked column and row).
type Box [4]float32

// inkAlpha is the glyph coverage (of 255) from which a pixel counts as
// ink for a box: the faintest anti-aliased fringe does not.
const inkAlpha = 32

// PageBoxes renders page i of seed, h x w pixels, for a text detector
// and returns the box of every text item on it, in drawing order. Dark,
// upright text is drawn straight onto a light, slightly tinted page in
// rows: each row has one font and one size, its line height (ascent plus
// descent) 16 to 40 pixels, and one to a few items, each a few words of
// Text. Items on a row are at least twice the line height apart, rows at
// least 0.6 times the taller line height, and every box is the tight
// bounds of its item's ink, so that separate boxes are separate regions
// for a detector. The page gets the noise and, sometimes, the blur of
// Line, and is preprocessed as Page's (CHW, BGR, ImageNet mean and std)
// into dst (3*h*w values); its pixels are the coordinates of the boxes
// and of a detector's probability map.
func PageBoxes(seed uint64, i, h, w int, dst []float32) []Box {
	if len(dst) < 3*h*w {
		panic(fmt.Sprintf("textlines: %d values for a 3x%dx%d page", len(dst), h, w))
	}
	fs := mustFonts()
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x64657470))
	pg := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(pg, pg.Bounds(), image.NewUniform(paperColor(r)), image.Point{}, draw.Src)
	boxes := []Box{}
	const margin = 4 // no ink this close to the page's edges
	bottom, prevLH := margin, 0
	for {
		ff := fs[r.IntN(len(fs))]
		face := newFace(ff, 14+r.Float64()*21)
		m := face.Metrics()
		asc, desc := m.Ascent.Ceil(), m.Descent.Ceil()
		lh := asc + desc
		gap := r.IntN(lh/2 + 1)
		if prevLH > 0 {
			gap += int(math.Ceil(0.6 * float64(max(lh, prevLH))))
		}
		top := bottom + gap
		if top+lh > h-margin {
			face.Close()
			break
		}
		baseline := top + asc
		rowBottom := top // the lowest ink of the row
		for x := margin + r.IntN(w/4); ; {
			if r.IntN(4) == 0 { // a wider gap
				x += lh + r.IntN(w/3)
			}
			ws := strings.Fields(Text(r))
			var text string
			var bounds fixed.Rectangle26_6
			for ; len(ws) > 0; ws = ws[:len(ws)-1] {
				text = strings.Join(ws, " ")
				bounds, _ = font.BoundString(face, text)
				if x+bounds.Max.X.Ceil() <= w-margin && x+bounds.Min.X.Floor() >= margin {
					break
				}
			}
			if len(ws) == 0 {
				break
			}
			ink, ok := drawInk(pg, face, text, x, baseline, image.NewUniform(inkColor(r)))
			if ok {
				boxes = append(boxes, ink)
				rowBottom = max(rowBottom, int(ink[3]))
				x = int(ink[2])
			}
			x += 2*lh + 2 + r.IntN(lh/2+1)
		}
		face.Close()
		if rowBottom == top { // nothing fitted: an empty row
			rowBottom = top + lh
		}
		bottom, prevLH = rowBottom, lh
	}
	normalizeDet(blurNoise(r, pg), h, w, dst)
	return boxes
}

// drawInk draws text in fg onto pg with its baseline's left end at (x,
// baseline) and returns the tight box of the pixels it covers at least
// inkAlpha; ok is false when it covers none.
func drawInk(pg *image.RGBA, face font.Face, text string, x, baseline int, fg image.Image) (Box, bool) {
	bounds, _ := font.BoundString(face, text)
	dot := fixed.P(x, baseline)
	area := image.Rect((dot.X+bounds.Min.X).Floor()-1, (dot.Y+bounds.Min.Y).Floor()-1,
		(dot.X+bounds.Max.X).Ceil()+1, (dot.Y+bounds.Max.Y).Ceil()+1).Intersect(pg.Bounds())
	mask := image.NewAlpha(area)
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: dot}
	d.DrawString(text)
	x0, y0, x1, y1 := area.Max.X, area.Max.Y, area.Min.X, area.Min.Y
	for y := area.Min.Y; y < area.Max.Y; y++ {
		for x := area.Min.X; x < area.Max.X; x++ {
			if mask.AlphaAt(x, y).A >= inkAlpha {
				x0, y0 = min(x0, x), min(y0, y)
				x1, y1 = max(x1, x+1), max(y1, y+1)
			}
		}
	}
	draw.DrawMask(pg, area, fg, image.Point{}, mask, area.Min, draw.Over)
	if x0 >= x1 {
		return Box{}, false
	}
	return Box{float32(x0), float32(y0), float32(x1), float32(y1)}, true
}

// normalizeDet writes the h x w page pg into dst as PaddleOCR's text
// detectors expect: CHW, BGR, (v/255 - mean)/std with ImageNet's mean and
// std.
func normalizeDet(pg *image.RGBA, h, w int, dst []float32) {
	mean := [3]float32{0.406, 0.456, 0.485} // ImageNet's, in BGR order
	std := [3]float32{0.225, 0.224, 0.229}
	for y := range h {
		for x := range w {
			o := pg.PixOffset(x, y)
			for c := range Channels {
				v := float32(pg.Pix[o+2-c]) / 255 // BGR
				dst[(c*h+y)*w+x] = (v - mean[c]) / std[c]
			}
		}
	}
}

// DetSet is a set of preprocessed detector pages and their text boxes.
type DetSet struct {
	H, W   int
	Images []float32 // N x 3 x H x W, CHW, BGR, ImageNet-normalized
	Boxes  [][]Box   // the boxes of page i, never nil
}

// Len is the number of pages.
func (s *DetSet) Len() int { return len(s.Boxes) }

// Sample returns the preprocessed image of page i.
func (s *DetSet) Sample(i int) []float32 {
	n := 3 * s.H * s.W
	return s.Images[i*n : (i+1)*n]
}

// GenerateDet renders n pages of seed, h x w each: page i is
// PageBoxes(seed, i, h, w).
func GenerateDet(seed uint64, n, h, w int) (*DetSet, error) {
	if n <= 0 || h <= 0 || w <= 0 {
		return nil, fmt.Errorf("textlines: %d pages of %dx%d", n, h, w)
	}
	s := &DetSet{H: h, W: w, Images: make([]float32, n*3*h*w), Boxes: make([][]Box, n)}
	for i := range n {
		s.Boxes[i] = PageBoxes(seed, i, h, w, s.Sample(i))
	}
	return s, nil
}
