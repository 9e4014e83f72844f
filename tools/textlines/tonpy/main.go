// Command tonpy renders the evaluation sets of package textlines into
// files optc and its task metrics read.
//
// Direction classifier: cls_images.npy [N,3,48,192] float32 and
// cls_labels.npy [N] int64 (label 0 upright, 1 rotated by 180 degrees),
// and cls_calib.npy [200,3,48,192] float32, a calibration set rendered
// from a different seed (CALIB_N lines instead of 200 when given).
//
// Recognizer: rec_images.npy [300,3,48,320] float32 (seed 3) and
// rec_labels.txt, UTF-8, the text of sample i on line i+1, each line
// ended by "\n"; rec_calib.npy [100,3,48,320] float32 (seed 4).
//
// Detector: det_images.npy [50,3,320,320] float32 (seed 5) and
// det_boxes.json, a JSON array with one element per page, the array of
// its text boxes [x0, y0, x1, y1] in pixels of the page (the ink covers
// x0 <= x < x1, y0 <= y < y1); det_calib.npy [20,3,320,320] float32
// (seed 6).
//
// Images are CHW in BGR order: the classifier's and recognizer's scaled to
// (v/255-0.5)/0.5, resized to height 48 and padded with zeros on the
// right; the detector's (v/255-mean)/std with ImageNet's mean and std.
// The flags change the recognizer's and detector's counts.
//
//	go run ./tools/textlines/tonpy [-rec N] [-rec-calib N] [-det N] [-det-calib N] OUT_DIR [N [CALIB_N]]
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/tools/textlines"
)

func main() {
	rec := flag.Int("rec", textlines.RecSamples, "recognizer samples")
	recCalib := flag.Int("rec-calib", textlines.RecCalibSamples, "recognizer calibration samples")
	det := flag.Int("det", textlines.DetSamples, "detector pages")
	detCalib := flag.Int("det-calib", textlines.DetCalibSamples, "detector calibration pages")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tonpy [-rec N] [-rec-calib N] [-det N] [-det-calib N] OUT_DIR [N [CALIB_N]]")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) < 1 || len(args) > 3 {
		flag.Usage()
		os.Exit(2)
	}
	n, calibN := 1000, textlines.CalibSamples
	for i, p := range []*int{&n, &calibN} {
		if len(args) > 1+i {
			v, err := strconv.Atoi(args[1+i])
			if err != nil || v <= 0 {
				fmt.Fprintf(os.Stderr, "tonpy: %q is not a positive count\n", args[1+i])
				os.Exit(2)
			}
			*p = v
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"rec", *rec}, {"rec-calib", *recCalib}, {"det", *det}, {"det-calib", *detCalib}} {
		if c.v <= 0 {
			fmt.Fprintf(os.Stderr, "tonpy: -%s %d is not a positive count\n", c.name, c.v)
			os.Exit(2)
		}
	}
	out := args[0]
	err := writeCls(out, n, calibN)
	if err == nil {
		err = writeRec(out, *rec, *recCalib)
	}
	if err == nil {
		err = writeDet(out, *det, *detCalib)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tonpy:", err)
		os.Exit(1)
	}
}

func writeCls(out string, n, calibN int) error {
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

func writeRec(out string, n, calibN int) error {
	eval, err := textlines.GenerateRec(textlines.RecEvalSeed, n)
	if err != nil {
		return err
	}
	if err := writeFloats(filepath.Join(out, "rec_images.npy"), eval.Images, n, textlines.Height, textlines.RecWidth); err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range eval.Labels {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(out, "rec_labels.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	calib, err := textlines.GenerateRec(textlines.RecCalibSeed, calibN)
	if err != nil {
		return err
	}
	return writeFloats(filepath.Join(out, "rec_calib.npy"), calib.Images, calibN, textlines.Height, textlines.RecWidth)
}

func writeDet(out string, n, calibN int) error {
	const size = textlines.DetSize
	eval, err := textlines.GenerateDet(textlines.DetEvalSeed, n, size, size)
	if err != nil {
		return err
	}
	if err := writeFloats(filepath.Join(out, "det_images.npy"), eval.Images, n, size, size); err != nil {
		return err
	}
	// One page a line, so that the file reads and diffs well.
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, boxes := range eval.Boxes {
		j, err := json.Marshal(boxes)
		if err != nil {
			return err
		}
		b.Write(j)
		if i < len(eval.Boxes)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	if err := os.WriteFile(filepath.Join(out, "det_boxes.json"), b.Bytes(), 0o644); err != nil {
		return err
	}
	calib, err := textlines.GenerateDet(textlines.DetCalibSeed, calibN, size, size)
	if err != nil {
		return err
	}
	return writeFloats(filepath.Join(out, "det_calib.npy"), calib.Images, calibN, size, size)
}

func writeImages(path string, s *textlines.Set) error {
	return writeFloats(path, s.Images, s.Len(), textlines.Height, textlines.Width)
}

// writeFloats writes v as a float32 .npy of shape [n,3,h,w].
func writeFloats(path string, v []float32, n, h, w int) error {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	t, err := graph.NewTensor("x", graph.Float, []int64{int64(n), textlines.Channels, int64(h), int64(w)}, b)
	if err != nil {
		return err
	}
	return data.WriteNpy(path, t)
}
