package data_test

import (
	"encoding/binary"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/mnist"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// heldOut is how many MNIST test digits the image-folder tests write.
const heldOut = 500

// mnistFolders writes the first heldOut digits of the MNIST test split
// (which the committed CNN was not trained on) as PNG and JPEG class folders
// (mnist.WriteImages), and the same digits in the order the folders are
// read as .npy images and labels.
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
	var split mnist.Split
	if split.Images, err = it.Float32s(); err != nil {
		t.Fatal(err)
	}
	if split.Labels, err = lt.Int64s(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pngDir, jpegDir = filepath.Join(tmp, "png"), filepath.Join(tmp, "jpeg")
	order, err := mnist.WriteImages(pngDir, split, heldOut, ".png")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mnist.WriteImages(jpegDir, split, heldOut, ".jpg"); err != nil {
		t.Fatal(err)
	}
	var imgBytes []byte
	var labs []int64
	for _, i := range order {
		for _, v := range split.Images[i*mnist.Pixels : (i+1)*mnist.Pixels] {
			imgBytes = binary.LittleEndian.AppendUint32(imgBytes, math.Float32bits(v))
		}
		labs = append(labs, split.Labels[i])
	}
	images, labels = filepath.Join(tmp, "images.npy"), filepath.Join(tmp, "labels.npy")
	imgT, err := graph.NewTensor("input", graph.Float, []int64{heldOut, 1, 28, 28}, imgBytes)
	if err != nil {
		t.Fatal(err)
	}
	labT, err := graph.NewInt64Tensor("labels", []int64{heldOut}, labs)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(images, imgT); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteNpy(labels, labT); err != nil {
		t.Fatal(err)
	}
	return pngDir, jpegDir, images, labels
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
	// Every PNG value is exactly the pixel byte over 255 (as float32): the
	// .npy value rounded to a byte, and so within the 3-decimal rounding of
	// the mnist package of it.
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
	accuracy := func(spec string, opts data.Options) *schema.LabelAccuracy {
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
