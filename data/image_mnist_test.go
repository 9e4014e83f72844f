package data_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"optc/compare"
	"optc/data"
	"optc/graph"
	"optc/internal/ortenv"
	"optc/internal/testenv"
)

// heldOut is how many MNIST test digits the image-folder tests write.
const heldOut = 500

// mnistFolders writes the first heldOut digits of the MNIST test split
// (which the committed CNN was not trained on) as 8-bit gray PNG and JPEG
// files in class folders (<label>/<index>.png), and the same digits, in the
// order the folders are read (by class, then index), as .npy images and
// labels. The mnist package's values are the pixel bytes divided by 255 and
// rounded to 3 decimals, so the bytes are recovered as round(255 v).
func mnistFolders(t *testing.T) (pngDir, jpegDir, images, labels string) {
	t.Helper()
	it, err := data.ReadNpy(testenv.Data(t, "mnist/test_images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := data.ReadNpy(testenv.Data(t, "mnist/test_labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := it.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	labs, err := lt.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	const px = 28 * 28
	tmp := t.TempDir()
	pngDir, jpegDir = filepath.Join(tmp, "png"), filepath.Join(tmp, "jpeg")
	order := make([]int, heldOut)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(labs[a] - labs[b]) })
	var imgBytes []byte
	var labBytes []int64
	for _, i := range order {
		img := image.NewGray(image.Rect(0, 0, 28, 28))
		for k, v := range vals[i*px : (i+1)*px] {
			p := math.Round(255 * float64(v))
			if math.Abs(p/255-float64(v)) > 0.0005+1e-6 {
				t.Fatalf("digit %d pixel %d: %v is not a byte over 255 to 3 decimals", i, k, v)
			}
			img.Pix[k] = uint8(p)
		}
		name := filepath.Join(fmt.Sprint(labs[i]), fmt.Sprintf("%04d", i))
		encodeFile(t, filepath.Join(pngDir, name+".png"), func(w io.Writer) error { return png.Encode(w, img) })
		encodeFile(t, filepath.Join(jpegDir, name+".jpg"), func(w io.Writer) error { return jpeg.Encode(w, img, &jpeg.Options{Quality: 95}) })
		for _, v := range vals[i*px : (i+1)*px] {
			imgBytes = binary.LittleEndian.AppendUint32(imgBytes, math.Float32bits(v))
		}
		labBytes = append(labBytes, labs[i])
	}
	images, labels = filepath.Join(tmp, "images.npy"), filepath.Join(tmp, "labels.npy")
	itSub, err := graph.NewTensor("input", graph.Float, []int64{heldOut, 1, 28, 28}, imgBytes)
	if err != nil {
		t.Fatal(err)
	}
	ltSub, err := graph.NewInt64Tensor("labels", []int64{heldOut}, labBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(images, itSub); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(labels, ltSub); err != nil {
		t.Fatal(err)
	}
	return pngDir, jpegDir, images, labels
}

func encodeFile(t *testing.T, path string, encode func(io.Writer) error) {
	t.Helper()
	var buf bytes.Buffer
	if err := encode(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mnistInputs are the MNIST CNN's inputs, float32[N,1,28,28].
func mnistInputs(t *testing.T) []data.Input {
	t.Helper()
	m, err := graph.LoadFile(testenv.Model("mnist_cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return data.GraphInputs(m.Graph)
}

// readFloats reads every batch of spec as one float32 slice.
func readFloats(t *testing.T, spec string, inputs []data.Input, opts data.Options) []float32 {
	t.Helper()
	src, err := data.Open(spec, inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out []float32
	for {
		b, err := src.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := b.Tensors[0].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v...)
	}
}

// mnistImageOpts is the MNIST CNN's preprocessing: gray, pixel/255.
var mnistImageOpts = data.Options{Batch: 64, Image: data.ImageOptions{Color: "gray", Scale: 1.0 / 255}}

func TestMNISTImageFolderTensors(t *testing.T) {
	pngDir, jpegDir, images, _ := mnistFolders(t)
	in := mnistInputs(t)
	fromNpy := readFloats(t, images, in, data.Options{Batch: 64})
	fromPNG := readFloats(t, pngDir, in, mnistImageOpts)
	if len(fromPNG) != len(fromNpy) || len(fromNpy) != heldOut*28*28 {
		t.Fatalf("%d values from PNG, %d from .npy", len(fromPNG), len(fromNpy))
	}
	// Every PNG value is exactly the pixel byte over 255 (as float32), and
	// so within the 3-decimal rounding of the mnist package of the .npy.
	for i, v := range fromPNG {
		p := math.Round(255 * float64(fromNpy[i]))
		if v != float32(p/255) || math.Abs(float64(v-fromNpy[i])) > 0.0005+1e-6 {
			t.Fatalf("value %d: %v from PNG, %v from .npy (byte %v)", i, v, fromNpy[i], p)
		}
	}
	// JPEG is lossy: close on average, not equal.
	fromJPEG := readFloats(t, jpegDir, in, mnistImageOpts)
	var sum float64
	for i, v := range fromJPEG {
		sum += math.Abs(float64(v - fromPNG[i]))
	}
	mean := sum / float64(len(fromJPEG))
	t.Logf("JPEG (quality 95) differs from PNG by %.4f on average", mean)
	if mean > 0.02 || mean == 0 {
		t.Errorf("JPEG mean absolute difference %.4f from PNG, want (0, 0.02]", mean)
	}
}

func TestMNISTAccuracyFromImageFolder(t *testing.T) {
	ortenv.Require(t)
	pngDir, jpegDir, images, labels := mnistFolders(t)
	model := testenv.Model("mnist_cnn.onnx")
	accuracy := func(spec string, opts data.Options) *compare.Accuracy {
		t.Helper()
		r, err := compare.Models(compare.Options{ModelA: model, ModelB: model, Data: spec, DataOpts: opts, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		if r.Samples != heldOut || r.Accuracy == nil {
			t.Fatalf("%s: %d samples, accuracy %v", spec, r.Samples, r.Accuracy)
		}
		return r.Accuracy
	}
	npy := accuracy(images, data.Options{Batch: 64})
	png := accuracy(pngDir, mnistImageOpts)
	jpg := accuracy(jpegDir, mnistImageOpts)
	t.Logf("MNIST CNN on %d held-out digits: .npy %.2f%%, PNG %.2f%%, JPEG %.2f%%", heldOut, npy.A, png.A, jpg.A)
	if npy.A < 95 {
		t.Errorf(".npy accuracy %.2f%%: the model or labels are off", npy.A)
	}
	if png.A != npy.A {
		t.Errorf("PNG accuracy %.2f%%, .npy %.2f%%", png.A, npy.A)
	}
	if math.Abs(jpg.A-npy.A) > 1 {
		t.Errorf("JPEG accuracy %.2f%%, .npy %.2f%%: more than a point apart", jpg.A, npy.A)
	}
}
