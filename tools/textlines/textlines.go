// Package textlines renders a labelled evaluation set for text-direction
// classifiers such as PaddleOCR's ch_ppocr_mobile_v2.0_cls: synthetic but
// realistic Latin text lines, drawn with the Go fonts of golang.org/x/image
// and cropped like a detected text box, each once upright (label 0) and
// once rotated by 180 degrees (label 1), preprocessed exactly as PaddleOCR's
// ClsResizeImg does. It also renders labelled sets for PaddleOCR's
// PP-OCRv4 recognizer (RecLine: lines with the text they show, rec.go)
// and detector (PageBoxes: pages with the box of every text item,
// det.go). Everything is seeded: the same seed gives the same bytes.
package textlines

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/gobolditalic"
	"golang.org/x/image/font/gofont/goitalic"
	"golang.org/x/image/font/gofont/gomedium"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/gomonobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// The classifier input: 3 x 48 x 192, as PaddleOCR's cls_image_shape.
const (
	Channels = 3
	Height   = 48
	Width    = 192
	// Pixels is the number of float32 values of one preprocessed sample.
	Pixels = Channels * Height * Width
)

// Set is a labelled set of preprocessed samples.
type Set struct {
	Images []float32 // N x 3 x 48 x 192, CHW, BGR, values in [-1,1]
	Labels []int64   // 0: upright, 1: rotated by 180 degrees
	// Base is, per sample, the index of the text line it shows (Line(seed,
	// Base[i])); each line appears twice, once per label.
	Base []int
}

// Len is the number of samples.
func (s *Set) Len() int { return len(s.Labels) }

// Sample returns the preprocessed image of sample i.
func (s *Set) Sample(i int) []float32 { return s.Images[i*Pixels : (i+1)*Pixels] }

// Generate renders n/2 text lines from seed and returns n samples: every
// line upright and rotated, in an order shuffled with the same seed. n must
// be even and positive.
func Generate(seed uint64, n int) (*Set, error) {
	if n <= 0 || n%2 != 0 {
		return nil, fmt.Errorf("textlines: sample count %d is not a positive even number", n)
	}
	lines := n / 2
	s := &Set{Images: make([]float32, n*Pixels), Labels: make([]int64, n), Base: make([]int, n)}
	order := rand.New(rand.NewPCG(seed, 0x6f72646572)).Perm(n)
	for b := range lines {
		img := Line(seed, b)
		for label, im := range []*image.RGBA{img, Rotate180(img)} {
			k := order[2*b+label]
			Preprocess(im, s.Images[k*Pixels:(k+1)*Pixels])
			s.Labels[k] = int64(label)
			s.Base[k] = b
		}
	}
	return s, nil
}

type fontFace struct {
	name string
	font *opentype.Font
}

var (
	fontsOnce sync.Once
	fonts     []fontFace
	fontsErr  error
)

func loadFonts() ([]fontFace, error) {
	fontsOnce.Do(func() {
		for _, f := range []struct {
			name string
			ttf  []byte
		}{
			{"goregular", goregular.TTF},
			{"gomedium", gomedium.TTF},
			{"gobold", gobold.TTF},
			{"goitalic", goitalic.TTF},
			{"gobolditalic", gobolditalic.TTF},
			{"gomono", gomono.TTF},
			{"gomonobold", gomonobold.TTF},
		} {
			p, err := opentype.Parse(f.ttf)
			if err != nil {
				fontsErr = fmt.Errorf("textlines: font %s: %w", f.name, err)
				return
			}
			fonts = append(fonts, fontFace{f.name, p})
		}
	})
	return fonts, fontsErr
}

// Line renders text line i of seed, upright, as a tight crop around the
// text like a detector's box: dark text on a light, slightly tinted
// background with mild noise and, sometimes, a slight blur.
func Line(seed uint64, i int) *image.RGBA {
	img, _ := LineText(seed, i)
	return img
}

// LineText is Line together with the text it shows.
func LineText(seed uint64, i int) (*image.RGBA, string) {
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x6c696e65))
	text := Text(r)
	return render(r, text), text
}

// mustFonts returns the fonts, which are compiled in and always parse.
func mustFonts() []fontFace {
	fs, err := loadFonts()
	if err != nil {
		panic(err)
	}
	return fs
}

// render draws text as Line does, its style drawn from r.
func render(r *rand.Rand, text string) *image.RGBA {
	fs := mustFonts()
	ff := fs[r.IntN(len(fs))]
	face := newFace(ff, 24+r.Float64()*24)
	defer face.Close()

	// The box a detector would find: the line's ascent-to-descent band
	// (so that upright and rotated lines differ by where the ink sits in
	// it, as in real crops), with a small random margin.
	bounds, adv := font.BoundString(face, text)
	m := face.Metrics()
	top := min(bounds.Min.Y, -m.Ascent*7/10)
	bot := max(bounds.Max.Y, m.Descent*6/10)
	left, right := min(bounds.Min.X, 0), max(bounds.Max.X, adv)
	inkH := float64(bot-top) / 64
	mt := int(inkH * (0.04 + 0.16*r.Float64()))
	mb := int(inkH * (0.04 + 0.16*r.Float64()))
	ml := int(inkH * (0.05 + 0.3*r.Float64()))
	mr := int(inkH * (0.05 + 0.3*r.Float64()))
	w := (right - left).Ceil() + ml + mr
	h := (bot - top).Ceil() + mt + mb

	bg := paperColor(r)
	fg := inkColor(r)

	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(bg), image.Point{}, draw.Src)
	d := font.Drawer{Dst: img, Src: image.NewUniform(fg), Face: face,
		Dot: fixed.Point26_6{X: fixed.I(ml) - left, Y: fixed.I(mt) - top}}
	d.DrawString(text)

	return blurNoise(r, img)
}

// newFace is ff at size pixels per em.
func newFace(ff fontFace, size float64) font.Face {
	face, err := opentype.NewFace(ff.font, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingNone})
	if err != nil {
		panic(err) // only a size or DPI out of range fails
	}
	return face
}

// paperColor draws a light background, slightly tinted.
func paperColor(r *rand.Rand) color.RGBA {
	bg := color.RGBA{uint8(200 + r.IntN(56)), uint8(200 + r.IntN(56)), uint8(200 + r.IntN(56)), 255}
	// A mild tint: pull the channels towards a common light gray.
	g := (int(bg.R) + int(bg.G) + int(bg.B)) / 3
	bg.R = uint8((int(bg.R) + 2*g) / 3)
	bg.G = uint8((int(bg.G) + 2*g) / 3)
	bg.B = uint8((int(bg.B) + 2*g) / 3)
	return bg
}

// inkColor draws a dark, nearly gray text color.
func inkColor(r *rand.Rand) color.RGBA {
	ink := uint8(r.IntN(90))
	return color.RGBA{ink + uint8(r.IntN(20)), ink + uint8(r.IntN(20)), ink + uint8(r.IntN(20)), 255}
}

// blurNoise blurs img slightly one time in three and adds gray Gaussian
// noise of a random strength.
func blurNoise(r *rand.Rand, img *image.RGBA) *image.RGBA {
	if r.IntN(3) == 0 {
		img = boxBlur(img)
	}
	sigma := 2 + 6*r.Float64()
	for p := 0; p < len(img.Pix); p += 4 {
		n := r.NormFloat64() * sigma
		for c := range 3 {
			img.Pix[p+c] = clamp8(float64(img.Pix[p+c]) + n)
		}
	}
	return img
}

func clamp8(v float64) uint8 {
	return uint8(max(0, min(255, math.Round(v))))
}

// boxBlur is a 3x3 mean filter with edges clamped.
func boxBlur(src *image.RGBA) *image.RGBA {
	b := src.Bounds()
	dst := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var s [3]int
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx := min(max(x+dx, b.Min.X), b.Max.X-1)
					yy := min(max(y+dy, b.Min.Y), b.Max.Y-1)
					o := src.PixOffset(xx, yy)
					for c := range 3 {
						s[c] += int(src.Pix[o+c])
					}
				}
			}
			o := dst.PixOffset(x, y)
			for c := range 3 {
				dst.Pix[o+c] = uint8((s[c] + 4) / 9)
			}
			dst.Pix[o+3] = 255
		}
	}
	return dst
}

var (
	words = strings.Fields(`the of and to in is for on that with as by at from this be are
		was or an it not have has can will all new more one about your our
		price total date name time page order number account address phone
		email invoice receipt payment customer service amount balance store
		open daily market street city road station north south east west
		model version system data table figure report section chapter note
		quality water coffee green house river light paper office school
		library window garden simple student morning evening weather travel
		ticket hotel airport flight gate seat train platform exit entrance
		warning caution please thank welcome member discount offer limited`)
	caps    = strings.Fields(`USA EU UK ID OK TV PDF USB LED GPS CPU API FAQ VAT`)
	puncts  = []string{",", ".", ":", ";", "!", "?", ")", "-"}
	letters = "abcdefghijklmnopqrstuvwxyz"
)

// Text draws a random line of text: real and made-up words, numbers and
// some punctuation, in mixed case.
func Text(r *rand.Rand) string {
	n := 1 + r.IntN(6)
	var parts []string
	for range n {
		parts = append(parts, word(r))
	}
	if r.IntN(3) == 0 {
		parts[0] = strings.ToUpper(parts[0][:1]) + parts[0][1:]
	}
	return strings.Join(parts, " ")
}

// word draws one of Text's words, with its case and punctuation.
func word(r *rand.Rand) string {
	var w string
	switch k := r.IntN(20); {
	case k < 11:
		w = words[r.IntN(len(words))]
	case k < 14:
		b := make([]byte, 2+r.IntN(8))
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		w = string(b)
	case k < 16:
		w = fmt.Sprint(r.IntN(10000))
	case k < 17:
		w = fmt.Sprintf("%d.%02d", r.IntN(1000), r.IntN(100))
	case k < 18:
		w = fmt.Sprintf("%04d-%02d-%02d", 1990+r.IntN(40), 1+r.IntN(12), 1+r.IntN(28))
	case k < 19:
		w = caps[r.IntN(len(caps))]
	default:
		w = fmt.Sprintf("(%s)", words[r.IntN(len(words))])
	}
	switch c := r.IntN(10); {
	case c < 2:
		w = strings.ToUpper(w[:1]) + w[1:]
	case c < 3:
		w = strings.ToUpper(w)
	}
	if r.IntN(6) == 0 {
		w += puncts[r.IntN(len(puncts))]
	}
	return w
}

// Rotate180 returns img rotated by 180 degrees.
func Rotate180(img *image.RGBA) *image.RGBA {
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	w, h := b.Dx(), b.Dy()
	for y := range h {
		for x := range w {
			s := img.PixOffset(b.Min.X+x, b.Min.Y+y)
			d := out.PixOffset(w-1-x, h-1-y)
			copy(out.Pix[d:d+4], img.Pix[s:s+4])
		}
	}
	return out
}

// ResizedWidth is the width PaddleOCR's cls preprocessing scales a w x h
// image to: the height becomes 48 and the width keeps the aspect ratio,
// up to 192.
func ResizedWidth(w, h int) int { return resizedWidth(w, h, Width) }

func resizedWidth(w, h, maxW int) int {
	rw := int(math.Ceil(Height * float64(w) / float64(h)))
	return max(1, min(maxW, rw))
}

// Preprocess writes img into dst (3 x 48 x 192 float32) as PaddleOCR's
// ClsResizeImg does: resize (bilinear) to height 48 and width
// min(192, ceil(48*w/h)), scale to (v/255 - 0.5)/0.5, channels in BGR
// order, the right side padded with zeros.
func Preprocess(img *image.RGBA, dst []float32) { resizeNorm(img, dst, Width) }

// resizeNorm is Preprocess to a width of width instead of 192.
func resizeNorm(img *image.RGBA, dst []float32, width int) {
	b := img.Bounds()
	rw := resizedWidth(b.Dx(), b.Dy(), width)
	rs := image.NewRGBA(image.Rect(0, 0, rw, Height))
	draw.BiLinear.Scale(rs, rs.Bounds(), img, b, draw.Src, nil)
	clear(dst[:Channels*Height*width])
	for y := range Height {
		for x := range rw {
			o := rs.PixOffset(x, y)
			for c := range Channels {
				v := rs.Pix[o+2-c] // BGR
				dst[(c*Height+y)*width+x] = (float32(v)/255 - 0.5) / 0.5
			}
		}
	}
}

// The seeds and size of the sets tonpy writes. The calibration set's seed
// differs, so it shares no text line with the evaluation set.
const (
	EvalSeed     = 1
	CalibSeed    = 2
	CalibSamples = 200
)
