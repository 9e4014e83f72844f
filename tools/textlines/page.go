package textlines

import (
	"image"
	"image/color"
	"math/rand/v2"

	"golang.org/x/image/draw"
)

// Page renders page i of seed: a light page of h x w pixels with rows of
// text lines (Line crops scaled to 16-40 pixels high, some rotated by 180
// degrees) at random offsets, preprocessed as PaddleOCR's text detectors
// (DetResizeForTest, NormalizeImage) expect: CHW, BGR,
// (v/255 - mean)/std with ImageNet's mean and std, written into dst
// (3*h*w values). It stands in for the scanned pages and photos a
// detector sees, so that its probability map has text to find.
func Page(seed uint64, i, h, w int, dst []float32) {
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x70616765))
	pg := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := uint8(200 + r.IntN(56))
	draw.Draw(pg, pg.Bounds(), &image.Uniform{color.RGBA{bg, bg, bg, 255}}, image.Point{}, draw.Src)
	line := 0
	for y := 4 + r.IntN(12); y < h-16; {
		lh := 16 + r.IntN(25)
		for x := r.IntN(w / 4); x < w-32; {
			if r.IntN(4) == 0 { // a gap
				x += 16 + r.IntN(w/3)
				continue
			}
			img := Line(seed^0x9e3779b97f4a7c15, i*64+line)
			line++
			if r.IntN(4) == 0 {
				img = Rotate180(img)
			}
			b := img.Bounds()
			lw := min(b.Dx()*lh/b.Dy(), w-x)
			src := image.Rect(b.Min.X, b.Min.Y, b.Min.X+lw*b.Dy()/lh, b.Max.Y)
			draw.BiLinear.Scale(pg, image.Rect(x, y, x+lw, min(y+lh, h)), img, src, draw.Src, nil)
			x += lw + 8 + r.IntN(40)
		}
		y += lh + 4 + r.IntN(24)
	}
	normalizeDet(pg, h, w, dst)
}
