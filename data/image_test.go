package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// writeImage encodes img as PNG or JPEG (by the extension of name) under
// dir, creating sub-folders.
func writeImage(t testing.TB, dir, name string, img image.Image) string {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if filepath.Ext(name) == ".png" {
		err = png.Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 100})
	}
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// imageInput is a float32 image input [N,c,h,w] (NCHW) or [N,h,w,c].
func imageInput(dims ...graph.Dim) []Input {
	return []Input{{Name: "x", DType: graph.Float, Shape: append(graph.Shape{dyn("N")}, dims...)}}
}

// readImages opens dir and returns all its values and the dims of the
// first batch.
func readImages(t *testing.T, dir string, inputs []Input, opts Options) ([]float32, []int64) {
	t.Helper()
	src, err := Open(dir, inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	var vals []float32
	var dims []int64
	for _, b := range readAll(t, src) {
		v, err := b.Tensors[0].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if dims == nil {
			dims = b.Tensors[0].Dims
		}
		vals = append(vals, v...)
	}
	return vals, dims
}

// pixels123 is a 2x3 RGB image whose pixel (x, y) is
// (10x+100y+1, 10x+100y+2, 10x+100y+3).
func pixels123() *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	for y := range 2 {
		for x := range 3 {
			v := uint8(10*x + 100*y)
			img.SetNRGBA(x, y, color.NRGBA{v + 1, v + 2, v + 3, 255})
		}
	}
	return img
}

func TestImageLayoutColorNormalisation(t *testing.T) {
	dir := t.TempDir()
	writeImage(t, dir, "a.png", pixels123())
	in := imageInput(st(3), st(2), st(3))
	one := func(vals ...float32) []float32 { return vals }

	// NCHW, rgb, scale 1: the channel planes as stored.
	got, dims := readImages(t, dir, in, Options{Image: ImageOptions{Scale: 1}})
	want := one(1, 11, 21, 101, 111, 121, 2, 12, 22, 102, 112, 122, 3, 13, 23, 103, 113, 123)
	if !slices.Equal(got, want) || !slices.Equal(dims, []int64{1, 3, 2, 3}) {
		t.Errorf("NCHW rgb: %v %v, want %v", dims, got, want)
	}
	// NHWC, bgr: each pixel's channels reversed, interleaved.
	got, dims = readImages(t, dir, imageInput(st(2), st(3), st(3)), Options{Image: ImageOptions{Scale: 1, Layout: "NHWC", Color: "bgr"}})
	want = one(3, 2, 1, 13, 12, 11, 23, 22, 21, 103, 102, 101, 113, 112, 111, 123, 122, 121)
	if !slices.Equal(got, want) || !slices.Equal(dims, []int64{1, 2, 3, 3}) {
		t.Errorf("NHWC bgr: %v %v, want %v", dims, got, want)
	}
	// The default scale is 1/255; mean and std per channel, in rgb order.
	got, _ = readImages(t, dir, in, Options{Image: ImageOptions{Mean: []float64{0.5, 0, 1}, Std: []float64{2, 1, 0.5}}})
	for i, w := range []float64{1, 11, 21, 101, 111, 121} {
		for c, f := range []func(float64) float64{
			func(v float64) float64 { return (v/255 - 0.5) / 2 },
			func(v float64) float64 { return v / 255 },
			func(v float64) float64 { return (v/255 - 1) / 0.5 },
		} {
			if g, e := got[c*6+i], float32(f(w+float64(c))); g != e {
				t.Errorf("normalised channel %d value %d: %v, want %v", c, i, g, e)
			}
		}
	}
	// Gray: ITU-R 601 luma of the colour pixels.
	got, dims = readImages(t, dir, imageInput(st(1), st(2), st(3)), Options{Image: ImageOptions{Scale: 1, Color: "gray"}})
	if !slices.Equal(dims, []int64{1, 1, 2, 3}) {
		t.Fatalf("gray dims %v", dims)
	}
	for i, w := range []float64{1, 11, 21, 101, 111, 121} {
		if e := float32(0.299*w + 0.587*(w+1) + 0.114*(w+2)); got[i] != e {
			t.Errorf("gray value %d: %v, want %v", i, got[i], e)
		}
	}
}

func TestImageAlphaAnd16Bit(t *testing.T) {
	// Alpha is dropped, not composited: a transparent pixel keeps its colour.
	dir := t.TempDir()
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.SetNRGBA(0, 0, color.NRGBA{200, 100, 50, 0})
	writeImage(t, dir, "a.png", img)
	got, _ := readImages(t, dir, imageInput(st(3), st(1), st(1)), Options{Image: ImageOptions{Scale: 1}})
	if !slices.Equal(got, []float32{200, 100, 50}) {
		t.Errorf("transparent pixel: %v, want its colour", got)
	}
	// A 16-bit PNG keeps its precision: 1000/65535, not a byte over 255.
	dir = t.TempDir()
	g16 := image.NewGray16(image.Rect(0, 0, 3, 2))
	for i := range g16.Pix {
		g16.Pix[i] = []uint8{0x03, 0xe8}[i%2]
	}
	writeImage(t, dir, "a.png", g16)
	got, _ = readImages(t, dir, imageInput(st(1), st(2), st(2)), Options{Image: ImageOptions{Color: "gray", Resize: 2}})
	for _, v := range got {
		if math.Abs(float64(v)-1000.0/65535) > 1e-7 {
			t.Fatalf("16-bit gray: %v, want %v", got, 1000.0/65535)
		}
	}
}

// band is a w x h gray image, black but for the columns [from, to), white.
func band(w, h, from, to int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := from; x < to; x++ {
			img.SetGray(x, y, color.Gray{255})
		}
	}
	return img
}

func TestImageResizeAndCrop(t *testing.T) {
	dir := t.TempDir()
	// 40x10, white in columns 10..29. The shorter side resized to 5 makes
	// it 20x5, white in columns 5..14.
	writeImage(t, dir, "band.png", band(40, 10, 10, 30))
	gray := imageInput(st(1), dyn("H"), dyn("W"))
	opts := func(resize, h, w int) Options {
		return Options{Image: ImageOptions{Color: "gray", Resize: resize, Height: h, Width: w}}
	}
	// A 5x2 center crop takes columns 9 and 10: white, whatever the filter.
	got, dims := readImages(t, dir, gray, opts(5, 5, 2))
	if !slices.Equal(dims, []int64{1, 1, 5, 2}) {
		t.Fatalf("dims %v", dims)
	}
	for _, v := range got {
		if v != 1 {
			t.Fatalf("center crop is not white: %v", got)
		}
	}
	// The whole 20-wide row fits: black at the edges, white in the middle.
	got, _ = readImages(t, dir, gray, opts(5, 5, 20))
	if got[0] != 0 || got[19] != 0 || got[9] != 1 || got[10] != 1 {
		t.Errorf("full-width crop row: %v", got[:20])
	}
	// One column more does not fit the resized width.
	src, err := Open(dir, gray, opts(5, 5, 21))
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Next()
	wantErr(t, err, "band.png", "10x40 (HxW) resized to 5x20", "5x21 crop")

	// Crop without resizing: a 10x20 window of the 40-wide image starts at
	// column 10, all white.
	got, _ = readImages(t, dir, gray, opts(10, 10, 20))
	for _, v := range got {
		if v != 1 {
			t.Fatalf("unresized center crop is not white: %v", got)
		}
	}
	// Without Resize the image is resized straight to the crop size,
	// squashing it; the crop size comes from the static dims.
	got, dims = readImages(t, dir, imageInput(st(1), st(4), st(4)), Options{Image: ImageOptions{Color: "gray"}})
	if !slices.Equal(dims, []int64{1, 1, 4, 4}) || got[0] >= 0.5 || got[1] <= 0.5 || got[2] <= 0.5 || got[3] >= 0.5 {
		t.Errorf("squashed to 4x4: %v %v (want dark, light, light, dark per row)", dims, got)
	}
}

func TestImageConstantSurvivesResize(t *testing.T) {
	dir := t.TempDir()
	img := image.NewNRGBA(image.Rect(0, 0, 37, 23))
	for i := range img.Pix {
		img.Pix[i] = []uint8{51, 102, 204, 255}[i%4]
	}
	writeImage(t, dir, "c.png", img)
	for _, o := range []ImageOptions{{Resize: 8, Height: 7, Width: 7}, {Height: 64, Width: 50}, {Resize: 100, Height: 90, Width: 99}} {
		got, _ := readImages(t, dir, imageInput(st(3), dyn("H"), dyn("W")), Options{Image: o})
		n := o.Height * o.Width
		for c, want := range []float32{0.2, 0.4, 0.8} {
			for _, v := range got[c*n : (c+1)*n] {
				if v != want {
					t.Fatalf("%+v: channel %d holds %v, want %v", o, c, v, want)
				}
			}
		}
	}
}

func TestImageFloat16(t *testing.T) {
	dir := t.TempDir()
	writeImage(t, dir, "a.png", pixels123())
	in := []Input{{Name: "x", DType: graph.Float16, Shape: graph.Shape{dyn("N"), st(3), st(2), st(3)}}}
	src, err := Open(dir, in, Options{Image: ImageOptions{Scale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, src)
	if len(b) != 1 || b[0].Tensors[0].DType != graph.Float16 {
		t.Fatalf("batches %v", b)
	}
	raw := tensorBytes(t, b[0].Tensors[0])
	for i, w := range []float64{1, 11, 21, 101, 111, 121} {
		if g := halfToFloat64(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8); g != w {
			t.Errorf("float16 value %d: %v, want %v", i, g, w)
		}
	}
}

// grayFolder writes n 2x2 images, image i all of value 10i, spread over
// class sub-folders, with files that are not images beside them.
func grayFolder(t *testing.T, n int) string {
	dir := t.TempDir()
	for i := range n {
		img := image.NewGray(image.Rect(0, 0, 2, 2))
		for k := range img.Pix {
			img.Pix[k] = uint8(10 * i)
		}
		writeImage(t, dir, filepath.Join([]string{"a", "b"}[i*2/n], fmt.Sprintf("img%02d.png", i)), img)
	}
	for _, junk := range []string{"notes.txt", "a/.hidden.png", ".git/x.png", "b/labels.csv"} {
		p := filepath.Join(dir, junk)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("not an image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// firstValues reads the value of each image (each is uniform) in the
// order a source gives them.
func firstValues(t *testing.T, dir string, opts Options) []float32 {
	t.Helper()
	opts.Image = ImageOptions{Color: "gray", Scale: 0.1}
	vals, _ := readImages(t, dir, imageInput(st(1), st(2), st(2)), opts)
	var out []float32
	for i := 0; i < len(vals); i += 4 {
		out = append(out, vals[i])
	}
	return out
}

func TestImageOrderShuffleSamples(t *testing.T) {
	dir := grayFolder(t, 10)
	all := firstValues(t, dir, Options{Batch: 3})
	if !slices.Equal(all, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("path order: %v", all)
	}
	if got := firstValues(t, dir, Options{Batch: 3, Samples: 4}); !slices.Equal(got, all[:4]) {
		t.Errorf("4 samples: %v", got)
	}
	a := firstValues(t, dir, Options{Batch: 3, Samples: 4, Shuffle: true, Seed: 1})
	b := firstValues(t, dir, Options{Batch: 2, Samples: 4, Shuffle: true, Seed: 1})
	c := firstValues(t, dir, Options{Batch: 3, Samples: 4, Shuffle: true, Seed: 2})
	if !slices.Equal(a, b) || slices.Equal(a, c) || slices.Equal(a, all[:4]) || len(a) != 4 {
		t.Errorf("seed 1: %v and %v; seed 2: %v", a, b, c)
	}
	whole := firstValues(t, dir, Options{Batch: 4, Shuffle: true, Seed: 1})
	if sorted := slices.Sorted(slices.Values(whole)); !slices.Equal(sorted, all) || !slices.Equal(whole[:4], a) {
		t.Errorf("a full shuffle is not a permutation starting as the subset: %v", whole)
	}

	// Batches of 3 over 10 images: 3, 3, 3, 1.
	src, err := Open(dir, imageInput(st(1), st(2), st(2)), Options{Batch: 3, Image: ImageOptions{Color: "gray"}})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range readAll(t, src) {
		sizes = append(sizes, b.Samples)
	}
	if !slices.Equal(sizes, []int{3, 3, 3, 1}) {
		t.Errorf("batch sizes %v", sizes)
	}
}

func TestImageFolderIsNotPBFolder(t *testing.T) {
	// A folder with input_0.pb stays an ONNX data set, images or not.
	dir := grayFolder(t, 2)
	writePB(t, filepath.Join(dir, "input_0.pb"), mustTensor(t, "x", graph.Float, []int64{1, 1, 2, 2}, f32(7, 7, 7, 7)))
	got := firstValues(t, dir, Options{})
	if !slices.Equal(got, []float32{7}) {
		t.Errorf("read %v, want the .pb tensor", got)
	}
}

func TestImageErrors(t *testing.T) {
	good := grayFolder(t, 2)
	rgbDir := t.TempDir()
	writeImage(t, rgbDir, "a.png", pixels123())
	gray := imageInput(st(1), st(2), st(2))
	rgb := imageInput(st(3), st(2), st(2))
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "readme.txt"), []byte("x"), 0o644)

	for _, c := range []struct {
		name   string
		dir    string
		inputs []Input
		opts   ImageOptions
		want   []string
	}{
		{"no images", empty, gray, ImageOptions{}, []string{empty, "no input_<i>.pb files", "no images (.png, .jpg, .jpeg)"}},
		{"gray into 3 channels", good, rgb, ImageOptions{Color: "gray"}, []string{good, `input "x"`, "float32[N,3,2,2]", "3 channels on axis 1", "color gray gives 1"}},
		{"rgb into 1 channel", good, gray, ImageOptions{}, []string{`input "x"`, "1 channels on axis 1", "color rgb gives 3"}},
		{"NHWC channels", good, gray, ImageOptions{Layout: "NHWC", Color: "gray"}, []string{"float32[N,1,2,2]", "2 channels on axis 3 (NHWC)"}},
		{"rank 3", good, []Input{{Name: "x", DType: graph.Float, Shape: graph.Shape{dyn("N"), st(2), st(2)}}}, ImageOptions{},
			[]string{`input "x" expects float32[N,2,2]`, "rank-4"}},
		{"int input", good, []Input{{Name: "x", DType: graph.Int64, Shape: graph.Shape{dyn("N"), st(1), st(2), st(2)}}}, ImageOptions{Color: "gray"},
			[]string{`input "x" is int64[N,1,2,2]`, "float32 or float16"}},
		{"dynamic size", good, imageInput(st(1), dyn("H"), st(2)), ImageOptions{Color: "gray"},
			[]string{`input "x" float32[N,1,H,2]`, "dim 2 (height) is H", "image size"}},
		{"size vs static dims", good, gray, ImageOptions{Color: "gray", Height: 3, Width: 3},
			[]string{`input "x" expects float32[N,1,2,2]`, "float32[2,1,3,3]", "dim 2 is 3, want 2"}},
		{"two inputs", good, append(gray, Input{Name: "y", DType: graph.Float}), ImageOptions{}, []string{"one input", `"x", "y"`}},
		{"layout", good, gray, ImageOptions{Layout: "CHW"}, []string{good, `image layout "CHW"`, "NCHW or NHWC"}},
		{"color", good, gray, ImageOptions{Color: "hsv"}, []string{`image color "hsv"`, "rgb, bgr or gray"}},
		{"mean length", good, rgb, ImageOptions{Mean: []float64{0.5}}, []string{"image mean has 1 values", "rgb has 3 channels"}},
		{"std length", good, gray, ImageOptions{Color: "gray", Std: []float64{1, 1, 1}}, []string{"image std has 3 values", "gray has 1 channels"}},
		{"std zero", good, rgb, ImageOptions{Std: []float64{1, 0, 1}}, []string{"image std [1 0 1]", "channel 1 is 0"}},
		{"negative size", good, rgb, ImageOptions{Height: -1}, []string{"must not be negative"}},
		{"huge size", good, rgb, ImageOptions{Resize: 100000}, []string{"image resize 100000", "at most 16384 pixels a side"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(c.dir, c.inputs, Options{Image: c.opts})
			wantErr(t, err, c.want...)
		})
	}
}

func TestImageDecodeErrors(t *testing.T) {
	dir := grayFolder(t, 4)
	// A truncated PNG among good ones: the error names it when its batch
	// is read, and the source stays failed.
	p := filepath.Join(dir, "b", "img03.png")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)-20], 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "a", "img01.jpg") // sorts before img01.png
	if err := os.WriteFile(bad, []byte("\xff\xd8\xff\xe0 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := imageInput(st(1), st(2), st(2))
	src, err := Open(dir, in, Options{Batch: 2, Image: ImageOptions{Color: "gray"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Next()
	wantErr(t, err, bad, "decoding JPEG")
	if _, err := src.Next(); err == nil {
		t.Error("a failed source yields batches again")
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	err = secondBatchErr(t, dir, in, Options{Batch: 2, Image: ImageOptions{Color: "gray"}})
	wantErr(t, err, p, "decoding PNG", "unexpected EOF")
}

// BenchmarkImageDecode measures one ImageNet-style sample: a 500x375 JPEG,
// shorter side resized to 256, 224x224 center crop, normalised.
func BenchmarkImageDecode(b *testing.B) {
	dir := b.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 500, 375))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7 % 251)
	}
	writeImage(b, dir, "a.jpg", img)
	in := imageInput(st(3), st(224), st(224))
	opts := Options{Image: ImageOptions{Resize: 256, Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}}}
	for b.Loop() {
		src, err := Open(dir, in, opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := src.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
