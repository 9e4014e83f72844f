package data

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// ShapesFromData fills in what random data cannot shape: for each input
// with a dynamic dim other than its batch axis that neither opts.Shapes
// nor a dim shared by name fixes, the dims of the first sample of the
// data at path (its batch axis left dynamic), so that a model with a
// dynamic sequence length is measured at the length its calibration data
// has, as a runtime would see it, instead of asking for --shape. It
// returns opts.Shapes with those added and the names of the inputs it
// shaped (nil when none needed it); path "" or "random" adds nothing.
func ShapesFromData(path string, inputs []Input, opts Options) (map[string][]int64, []string, error) {
	if path == "" || path == "random" {
		return opts.Shapes, nil, nil
	}
	bind := symbolBindings(inputs, opts)
	var open []int
	for i, in := range inputs {
		if _, err := resolveShape(in, opts, bind); err != nil {
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
		dims := slices.Clone(b.Tensors[i].Dims)
		if k := batchAxis(in, opts); k >= 0 && k < len(dims) {
			dims[k] = -1
		}
		shapes[in.Name] = dims
		named = append(named, in.Name)
	}
	return shapes, named, nil
}
