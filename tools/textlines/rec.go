package textlines

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"strings"
)

// The recognizer input: 3 x 48 x 320, PaddleOCR's rec_image_shape for
// PP-OCRv4.
const (
	RecWidth = 320
	// RecPixels is the number of float32 values of one preprocessed
	// recognizer sample.
	RecPixels = Channels * Height * RecWidth
)

// The seeds and sizes of the recognizer sets tonpy writes; the seeds
// differ from each other and from the classifier's.
const (
	RecEvalSeed     = 3
	RecCalibSeed    = 4
	RecSamples      = 300
	RecCalibSamples = 100
)

// RecLine renders text line i of seed for a recognizer: a crop like Line's
// (same fonts, colors, margins, noise), with the text it shows. Its text
// is cut short, a word at a time, until the crop's width is at most 320/48
// times its height, so that PreprocessRec never squeezes it: the label
// stays readable at the recognizer's resolution. Every character is
// printable ASCII from Text's vocabulary, all in PaddleOCR's
// ppocr_keys_v1.txt, or a space.
func RecLine(seed uint64, i int) (*image.RGBA, string) {
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x7265636c))
	for range 1000 {
		ws := strings.Fields(Text(r))
		for ; len(ws) > 0; ws = ws[:len(ws)-1] {
			text := strings.Join(ws, " ")
			img := render(r, text)
			if b := img.Bounds(); recFits(b.Dx(), b.Dy()) {
				return img, text
			}
		}
	}
	// Every single word fits at some style; a thousand misses in a row
	// would be a bug.
	panic(fmt.Sprintf("textlines: no text line of seed %d, %d fits the recognizer", seed, i))
}

// recFits says whether a w x h crop resizes to height 48 at a width of at
// most RecWidth.
func recFits(w, h int) bool {
	return int(math.Ceil(Height*float64(w)/float64(h))) <= RecWidth
}

// RecResizedWidth is the width PaddleOCR's rec preprocessing scales a w x h
// image to: the height becomes 48 and the width keeps the aspect ratio,
// up to 320.
func RecResizedWidth(w, h int) int { return resizedWidth(w, h, RecWidth) }

// PreprocessRec writes img into dst (3 x 48 x 320 float32) as PaddleOCR's
// RecResizeImg does for PP-OCRv4 (rec_image_shape 3,48,320): resize
// (bilinear) to height 48 and width min(320, ceil(48*w/h)), scale to
// (v/255 - 0.5)/0.5, channels in BGR order, the right side padded with
// zeros.
func PreprocessRec(img *image.RGBA, dst []float32) { resizeNorm(img, dst, RecWidth) }

// RecSet is a set of preprocessed recognizer samples and their text.
type RecSet struct {
	Images []float32 // N x 3 x 48 x 320, CHW, BGR, values in [-1,1]
	Labels []string  // sample i shows Labels[i]
}

// Len is the number of samples.
func (s *RecSet) Len() int { return len(s.Labels) }

// Sample returns the preprocessed image of sample i.
func (s *RecSet) Sample(i int) []float32 { return s.Images[i*RecPixels : (i+1)*RecPixels] }

// GenerateRec renders n recognizer samples of seed: sample i is
// RecLine(seed, i), preprocessed by PreprocessRec.
func GenerateRec(seed uint64, n int) (*RecSet, error) {
	if n <= 0 {
		return nil, fmt.Errorf("textlines: sample count %d is not positive", n)
	}
	s := &RecSet{Images: make([]float32, n*RecPixels), Labels: make([]string, n)}
	for i := range n {
		img, text := RecLine(seed, i)
		PreprocessRec(img, s.Sample(i))
		s.Labels[i] = text
	}
	return s, nil
}
