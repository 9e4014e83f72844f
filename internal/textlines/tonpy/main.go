// Command tonpy renders the text-direction evaluation set of package
// textlines into .npy files optc reads: cls_images.npy [N,3,48,192]
// float32 and cls_labels.npy [N] int64 (label 0 upright, 1 rotated by 180
// degrees), and cls_calib.npy [200,3,48,192] float32, a calibration set
// rendered from a different seed (CALIB_N lines instead of 200 when given).
//
//	go run ./internal/textlines/tonpy OUT_DIR [N [CALIB_N]]
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/textlines"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 4 {
		fmt.Fprintln(os.Stderr, "usage: tonpy OUT_DIR [N [CALIB_N]]")
		os.Exit(2)
	}
	n, calibN := 1000, textlines.CalibSamples
	for i, p := range []*int{&n, &calibN} {
		if len(os.Args) > 2+i {
			v, err := strconv.Atoi(os.Args[2+i])
			if err != nil || v <= 0 {
				fmt.Fprintf(os.Stderr, "tonpy: %q is not a positive count\n", os.Args[2+i])
				os.Exit(2)
			}
			*p = v
		}
	}
	if err := write(os.Args[1], n, calibN); err != nil {
		fmt.Fprintln(os.Stderr, "tonpy:", err)
		os.Exit(1)
	}
}

func write(out string, n, calibN int) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	eval, err := textlines.Generate(textlines.EvalSeed, n)
	if err != nil {
		return err
	}
	calib, err := textlines.Generate(textlines.CalibSeed, calibN)
	if err != nil {
		return err
	}
	if err := writeImages(filepath.Join(out, "cls_images.npy"), eval); err != nil {
		return err
	}
	l, err := graph.NewInt64Tensor("labels", []int64{int64(eval.Len())}, eval.Labels)
	if err != nil {
		return err
	}
	if err := data.WriteNpy(filepath.Join(out, "cls_labels.npy"), l); err != nil {
		return err
	}
	return writeImages(filepath.Join(out, "cls_calib.npy"), calib)
}

func writeImages(path string, s *textlines.Set) error {
	b := make([]byte, 4*len(s.Images))
	for i, v := range s.Images {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	t, err := graph.NewTensor("x", graph.Float, []int64{int64(s.Len()), textlines.Channels, textlines.Height, textlines.Width}, b)
	if err != nil {
		return err
	}
	return data.WriteNpy(path, t)
}
