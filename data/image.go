package data

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/draw"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
)

// ImageOptions says how image files become an input tensor (image folders
// only). The defaults are the common ImageNet-style preprocessing without
// normalisation: RGB, NCHW, pixel values scaled to [0,1].
type ImageOptions struct {
	// Resize is the length the shorter side is resized to, keeping the
	// aspect ratio (the longer side truncated, as torchvision does), before
	// the center crop; 0 resizes straight to the crop size.
	Resize int
	// Height and Width are the crop size (center crop, offsets rounded
	// down); 0 takes each from the model input's static dims.
	Height, Width int
	// Layout is "NCHW" (default) or "NHWC".
	Layout string
	// Color is "rgb" (default), "bgr" or "gray" (ITU-R 601 luma, as PIL's
	// convert("L")). Alpha is dropped, as PIL's convert("RGB") does.
	Color string
	// Scale multiplies the pixel value (0..255; 16-bit images keep their
	// precision as fractions) first; 0 means 1/255.
	Scale float64
	// Mean and Std then normalise each channel, in the order of Color:
	// (x - Mean[c]) / Std[c]. Empty: 0 and 1.
	Mean, Std []float64
}

// imageFormats maps the extensions read (lower case) to their decoders;
// files with other extensions are ignored.
var imageFormats = map[string]struct {
	name   string
	decode func(io.Reader) (image.Image, error)
}{
	".png":  {"PNG", png.Decode},
	".jpg":  {"JPEG", jpeg.Decode},
	".jpeg": {"JPEG", jpeg.Decode},
}

const imageExtList = ".png, .jpg, .jpeg"

// maxImageSide bounds the resize and crop sizes, so that a typo cannot ask
// for gigabytes per image.
const maxImageSide = 1 << 14

// Channels is the number of channels Color gives: 1 for gray, else 3.
func (o ImageOptions) Channels() int {
	if o.Color == "gray" {
		return 1
	}
	return 3
}

// ImageLayouts and ImageColors are the values of ImageOptions' Layout and
// Color (the first is the default).
var (
	ImageLayouts = []string{"NCHW", "NHWC"}
	ImageColors  = []string{"rgb", "bgr", "gray"}
)

// colorHint suggests the color (and, for a channel count of 3 or 1 on the
// other axis, the layout) that gives an input its channels.
func colorHint(channels int64, layout string) string {
	switch channels {
	case 1:
		return "; for grayscale images use --image-color gray (image.color: gray in a config)"
	case 3:
		return "; use --image-color rgb or bgr (image.color in a config)"
	}
	other := "NHWC"
	if layout == "NHWC" {
		other = "NCHW"
	}
	return fmt.Sprintf("; if the channels are on another axis, try --image-layout %s", other)
}

// Validate checks the options on their own (the model is checked when an
// image folder is opened); errors name the option.
func (o ImageOptions) Validate() error {
	if o.Layout != "" && !slices.Contains(ImageLayouts, o.Layout) {
		return fmt.Errorf("image layout %q: want %s", o.Layout, choice.Or(ImageLayouts))
	}
	if o.Color != "" && !slices.Contains(ImageColors, o.Color) {
		return fmt.Errorf("image color %q: want %s", o.Color, choice.Or(ImageColors))
	}
	if o.Resize < 0 || o.Height < 0 || o.Width < 0 {
		return fmt.Errorf("image resize %d and size %dx%d must not be negative", o.Resize, o.Height, o.Width)
	}
	if max(o.Resize, o.Height, o.Width) > maxImageSide {
		return fmt.Errorf("image resize %d and size %dx%d: at most %d pixels a side", o.Resize, o.Height, o.Width, maxImageSide)
	}
	if math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		return fmt.Errorf("image scale %v is not a finite number", o.Scale)
	}
	c := o.Channels()
	for _, list := range []struct {
		name string
		vals []float64
	}{{"mean", o.Mean}, {"std", o.Std}} {
		if len(list.vals) != 0 && len(list.vals) != c {
			return fmt.Errorf("image %s has %d values; color %s has %d channels", list.name, len(list.vals), o.color(), c)
		}
		for _, v := range list.vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("image %s %v: not a finite number", list.name, list.vals)
			}
		}
	}
	for i, s := range o.Std {
		if s == 0 {
			return fmt.Errorf("image std %v: channel %d is 0", o.Std, i)
		}
	}
	return nil
}

func (o ImageOptions) color() string {
	if o.Color == "" {
		return "rgb"
	}
	return o.Color
}

// imageFiles lists the images under dir in path order: each folder's
// entries sorted by name, sub-folders walked where they sort (as
// torchvision's ImageFolder orders class folders). Names starting with a
// dot (.DS_Store, macOS "._x.jpg" files) are skipped.
func imageFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", path, unwrapPathError(err))
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if _, ok := imageFormats[strings.ToLower(filepath.Ext(path))]; ok && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// imageSource decodes one batch of image files at a time.
type imageSource struct {
	input Input
	img   ImageOptions // with defaults filled in
	dtype graph.DataType
	files []string
	first int   // without Shuffle: the file of sample 0 (Skip)
	order []int // with Shuffle: the file read at each position
	batching
	height int
	width  int
}

// openImages checks the image options against the single input they feed
// and returns a source over files.
func openImages(dir string, files []string, inputs []Input, opts Options) (Source, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%s: an image folder feeds one input, but the model has %d (%s)", dir, len(inputs), inputNames(inputs))
	}
	img := opts.Image
	if err := img.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	img.Layout, img.Color = cmp.Or(img.Layout, "NCHW"), img.color()
	if img.Scale == 0 {
		img.Scale = 1.0 / 255
	}
	in := inputs[0]
	s := &imageSource{input: in, img: img, files: files, dtype: in.DType}
	switch in.DType {
	case graph.Undefined:
		s.dtype = graph.Float
	case graph.Float, graph.Float16:
	default:
		return nil, fmt.Errorf("%s: input %q is %s; images feed float32 or float16 inputs", dir, in.Name, in)
	}
	eff, overridden, err := effectiveShape(in, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if eff != nil && len(eff) != 4 {
		return nil, fmt.Errorf("%s: input %q expects %s: images feed rank-4 inputs (%s)", dir, in.Name, expects(in, eff, overridden, opts), img.Layout)
	}
	c, h, w := 1, 2, 3 // axes of channels, height, width
	if img.Layout == "NHWC" {
		c, h, w = 3, 1, 2
	}
	if eff != nil && eff[c].Kind == graph.DimStatic && eff[c].Value != int64(img.Channels()) {
		return nil, fmt.Errorf("%s: input %q expects %s: %d channels on axis %d (%s), but color %s gives %d%s", dir, in.Name, expects(in, eff, overridden, opts), eff[c].Value, c, img.Layout, img.Color, img.Channels(), colorHint(eff[c].Value, img.Layout))
	}
	if s.height, err = cropSide(dir, in, eff, h, img.Height, "height"); err != nil {
		return nil, err
	}
	if s.width, err = cropSide(dir, in, eff, w, img.Width, "width"); err != nil {
		return nil, err
	}
	dims := s.dims(len(files))
	if err := checkData(dir, in, opts, s.dtype, dims, true); err != nil {
		return nil, err
	}
	if s.first, s.order, s.total, err = pick(dir, len(files), opts); err != nil {
		return nil, err
	}
	batch, fixedBy, err := batchSize(dir, inputs, opts, false)
	if err != nil {
		return nil, err
	}
	if s.total, err = fitSampleCount(dir, s.total, batch, fixedBy); err != nil {
		return nil, err
	}
	s.batch = batch
	return s, nil
}

// cropSide is the crop height or width: the option when given, else the
// input's static dim on axis.
func cropSide(dir string, in Input, eff graph.Shape, axis, opt int, side string) (int, error) {
	if opt > 0 {
		return opt, nil
	}
	if eff != nil && eff[axis].Kind == graph.DimStatic && eff[axis].Value > 0 && eff[axis].Value <= maxImageSide {
		return int(eff[axis].Value), nil
	}
	what := "the rank is unknown"
	if eff != nil {
		what = fmt.Sprintf("dim %d (%s) is %s", axis, side, eff[axis])
	}
	return 0, fmt.Errorf("%s: input %q %s: %s; give the image size (HxW) to crop to", dir, in.Name, in, what)
}

// dims is the shape of n preprocessed images.
func (s *imageSource) dims(n int) []int64 {
	c, h, w := int64(s.img.Channels()), int64(s.height), int64(s.width)
	if s.img.Layout == "NHWC" {
		return []int64{int64(n), h, w, c}
	}
	return []int64{int64(n), c, h, w}
}

// Next decodes the next batch of images.
func (s *imageSource) Next() (*Batch, error) {
	return s.nextBatch(1, func(_, n int) (*graph.Tensor, error) { return s.decodeBatch(n) })
}

// decodeBatch decodes the next n images into the input's tensor.
func (s *imageSource) decodeBatch(n int) (*graph.Tensor, error) {
	per := s.img.Channels() * s.height * s.width * s.dtype.BitSize() / 8 // bytes per image
	buf := make([]byte, n*per)
	for k := range n {
		i := s.first + s.next + k
		if s.order != nil { // a drawn order lists the samples itself (first is 0)
			i = s.order[s.next+k]
		}
		if err := s.decode(s.files[i], buf[k*per:(k+1)*per]); err != nil {
			return nil, err
		}
	}
	t, err := graph.NewTensor(s.input.Name, s.dtype, s.dims(n), buf)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", s.input.Name, err)
	}
	return t, nil
}

// Close ends the source; it holds no open files between batches.
func (s *imageSource) Close() error {
	if s.err == nil {
		s.err = fmt.Errorf("data source is closed")
	}
	return nil
}

// decode reads one image, resizes and crops it, and writes its normalised
// values into dst in the source's layout and element type.
func (s *imageSource) decode(path string, dst []byte) error {
	rgb, err := s.crop(path)
	if err != nil {
		return err
	}
	o := s.img
	c := o.Channels()
	vals := make([]float64, c)
	for y := range s.height {
		for x := range s.width {
			r, g, b := rgb(x, y)
			switch o.Color {
			case "rgb":
				vals[0], vals[1], vals[2] = r, g, b
			case "bgr":
				vals[0], vals[1], vals[2] = b, g, r
			case "gray":
				vals[0] = r
				if r != g || g != b {
					vals[0] = 0.299*r + 0.587*g + 0.114*b
				}
			}
			for ch, v := range vals {
				v *= o.Scale
				if len(o.Mean) > 0 {
					v -= o.Mean[ch]
				}
				if len(o.Std) > 0 {
					v /= o.Std[ch]
				}
				i := (ch*s.height+y)*s.width + x
				if o.Layout == "NHWC" {
					i = (y*s.width+x)*c + ch
				}
				s.put(dst, i, v)
			}
		}
	}
	return nil
}

// put stores v as element i of dst.
func (s *imageSource) put(dst []byte, i int, v float64) {
	if s.dtype == graph.Float16 {
		binary.LittleEndian.PutUint16(dst[2*i:], float64ToHalf(v))
		return
	}
	binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(float32(v)))
}

// crop decodes path, resizes and crops it, and returns the pixel values
// (0..255) of the crop at x, y (from its top-left corner).
func (s *imageSource) crop(path string) (func(x, y int) (r, g, b float64), error) {
	src, err := decodeImage(path)
	if err != nil {
		return nil, err
	}
	w0, h0 := src.Bounds().Dx(), src.Bounds().Dy()
	if w0 <= 0 || h0 <= 0 {
		return nil, fmt.Errorf("%s: the image is empty (%dx%d)", path, w0, h0)
	}
	// Resized size: the crop size, or the shorter side at Resize.
	w1, h1 := s.width, s.height
	if r := s.img.Resize; r > 0 {
		if w0 <= h0 {
			w1, h1 = r, int(int64(r)*int64(h0)/int64(w0))
		} else {
			w1, h1 = int(int64(r)*int64(w0)/int64(h0)), r
		}
		if w1 < s.width || h1 < s.height {
			return nil, fmt.Errorf("%s: %dx%d (HxW) resized to %dx%d is smaller than the %dx%d crop", path, h0, w0, h1, w1, s.height, s.width)
		}
	}
	px := opaque(src)
	if w1 != w0 || h1 != h0 {
		scaled := newLike(px, image.Rect(0, 0, w1, h1))
		draw.CatmullRom.Scale(scaled, scaled.Bounds(), px, px.Bounds(), draw.Src, nil)
		px = scaled
	}
	x0, y0 := (w1-s.width)/2, (h1-s.height)/2
	switch p := px.(type) {
	case *image.RGBA:
		return func(x, y int) (r, g, b float64) {
			i := p.PixOffset(x0+x, y0+y)
			return float64(p.Pix[i]), float64(p.Pix[i+1]), float64(p.Pix[i+2])
		}, nil
	default:
		p64 := px.(*image.RGBA64)
		// 16-bit channels back to 0..255 keep their precision as fractions.
		return func(x, y int) (r, g, b float64) {
			c := p64.RGBA64At(x0+x, y0+y)
			return float64(c.R) / 257, float64(c.G) / 257, float64(c.B) / 257
		}, nil
	}
}

// opaque copies src into an opaque image at the origin that the scaler has
// fast paths for: *image.RGBA for 8-bit sources, *image.RGBA64 for 16-bit
// ones (their precision kept). Alpha is dropped, not composited, as PIL's
// convert("RGB") does: transparent pixels keep their stored colour.
func opaque(src image.Image) draw.Image {
	b := src.Bounds()
	var dst draw.Image
	switch src.(type) {
	case *image.Gray16, *image.RGBA64, *image.NRGBA64:
		dst = image.NewRGBA64(image.Rect(0, 0, b.Dx(), b.Dy()))
	default:
		dst = image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	}
	if o, ok := src.(interface{ Opaque() bool }); ok && o.Opaque() {
		draw.Draw(dst, dst.Bounds(), src, b.Min, draw.Src)
		return dst
	}
	for y := range b.Dy() {
		for x := range b.Dx() {
			dst.Set(x, y, straight(src.At(b.Min.X+x, b.Min.Y+y)))
		}
	}
	return dst
}

// straight is c's stored (not alpha-premultiplied) colour, made opaque.
// Colours stored premultiplied lose what full transparency hid.
func straight(c color.Color) color.RGBA64 {
	var n color.NRGBA64
	switch c := c.(type) {
	case color.NRGBA:
		n = color.NRGBA64{R: uint16(c.R) * 257, G: uint16(c.G) * 257, B: uint16(c.B) * 257}
	case color.NRGBA64:
		n = c
	default:
		n = color.NRGBA64Model.Convert(c).(color.NRGBA64)
	}
	return color.RGBA64{R: n.R, G: n.G, B: n.B, A: 0xffff}
}

// newLike returns an empty image of r of the same kind as img (one opaque
// returned).
func newLike(img draw.Image, r image.Rectangle) draw.Image {
	if _, ok := img.(*image.RGBA); ok {
		return image.NewRGBA(r)
	}
	return image.NewRGBA64(r)
}

// decodeImage decodes a file by its extension; errors name the file.
func decodeImage(path string) (image.Image, error) {
	format := imageFormats[strings.ToLower(filepath.Ext(path))]
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	img, err := format.decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding %s: %w", path, format.name, err)
	}
	return img, nil
}
