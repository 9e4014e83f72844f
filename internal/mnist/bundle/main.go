// Command bundle writes the small MNIST image sets committed under
// testdata/mnist for `make demo`: calib/ (200 training digits) and eval/
// (500 held-out digits) as PNG class folders, and eval_labels.npy with the
// labels in the order an image-folder reader walks eval/.
//
//	go run ./internal/mnist/bundle DIGITS_DIR testdata/mnist
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"optc/data"
	"optc/graph"
	"optc/internal/mnist"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: bundle DIGITS_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := bundle(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
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
