// Command tonpy converts the MNIST JSON digits into .npy files optc reads:
// test_images.npy [2004,1,28,28] float32, test_labels.npy [2004] int64,
// and train_images.npy / train_labels.npy likewise (7996 samples).
//
//	go run ./internal/mnist/tonpy DIGITS_DIR OUT_DIR
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"optc/data"
	"optc/graph"
	"optc/internal/mnist"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tonpy DIGITS_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := convert(os.Args[1], os.Args[2]); err != nil {
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
