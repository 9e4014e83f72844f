package data

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// ShapesFromData shapes random data as the data at path is shaped: for
// each input with a dynamic dim other than its batch axis that
// opts.Shapes does not fix, the dims of the first sample of the data (its
// batch axis left dynamic), so that a model with a dynamic sequence
// length is measured at the length its calibration data has, as a
// runtime would see it, instead of asking for --shape. Every such input
// is shaped, not only those random data could not shape at all: a KV
// cache's past length resolves to 0 on its own, and a mask over past and
// new tokens from the data would then disagree with it. It returns
// opts.Shapes with those added and the names of the inputs it shaped
// (nil when none needed it); path "" or "random" adds nothing.
func ShapesFromData(path string, inputs []Input, opts Options) (map[string][]int64, []string, error) {
	if path == "" || path == "random" {
		return opts.Shapes, nil, nil
	}
	bind := symbolBindings(inputs, opts)
	var open []int
	for i, in := range inputs {
		_, err := resolveShape(in, opts, bind)
		if _, given := opts.Shapes[in.Name]; err != nil || !given && dynamicBeyondBatch(in, opts) {
			open = append(open, i)
		}
	}
	if len(open) == 0 {
		return opts.Shapes, nil, nil
	}
	read := opts
	read.Shapes, read.Samples, read.Shuffle = nil, 1, false
	if read.Batch <= 0 {
		read.Batch = 1
	}
	src, err := Open(path, inputs, read)
	if err != nil {
		return nil, nil, err
	}
	defer src.Close()
	b, err := src.Next()
	if errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%s: no samples", path)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(b.Tensors) != len(inputs) {
		return nil, nil, fmt.Errorf("%s: %d tensors for %d inputs", path, len(b.Tensors), len(inputs))
	}
	shapes := maps.Clone(opts.Shapes)
	if shapes == nil {
		shapes = map[string][]int64{}
	}
	var named []string
	for _, i := range open {
		in := inputs[i]
		if !fedByData(b, i) {
			continue
		}
		dims := slices.Clone(b.Tensors[i].Dims)
		if k := batchAxis(in, opts); k >= 0 && k < len(dims) {
			dims[k] = -1
		}
		shapes[in.Name] = dims
		named = append(named, in.Name)
	}
	return shapes, named, nil
}

// dynamicBeyondBatch reports whether in has a dim that is not static
// other than its batch axis.
func dynamicBeyondBatch(in Input, opts Options) bool {
	k := batchAxis(in, opts)
	for j, d := range in.Shape {
		if j != k && d.Kind != graph.DimStatic {
			return true
		}
	}
	return false
}

// fedByData reports whether the batch holds a tensor for input i.
func fedByData(b *Batch, i int) bool { return i < len(b.Tensors) && b.Tensors[i] != nil }
