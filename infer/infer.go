// Package infer runs a model in ONNX Runtime over input data and writes its
// outputs, optionally with internal values exposed as extra outputs.
package infer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/ort"
)

// Options say what to run and where the outputs go.
type Options struct {
	Model    string
	Data     string
	DataOpts data.Options
	// Expose names internal values to return as well (intermediate
	// tensors); the model file is never touched, a copy in memory is run.
	Expose  []string
	OutDir  string
	Session ort.Options
	ORTLib  string
}

// Result says what was run and written.
type Result struct {
	Samples int64    `json:"samples"`
	Batches int      `json:"batches"`
	Files   []Output `json:"outputs"`
	// Skipped says, one line each, which outputs were not run: values
	// optc cannot fetch through the ORT binding (sequences, maps,
	// optionals, string tensors).
	Skipped []string `json:"skipped,omitempty"`
}

// Output is one written output.
type Output struct {
	Name  string  `json:"name"`
	File  string  `json:"file"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Run runs opts.Model over opts.Data and writes each output to
// OutDir/<name>.npy, the batches concatenated along axis 0. Files are
// written into a temporary folder and moved into OutDir only when all are
// complete, so a failure leaves no partial output.
func Run(opts Options) (*Result, error) {
	m, err := ort.LoadModel(opts.ORTLib, opts.Model)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	src := ort.Source{Path: opts.Model}
	target := m
	if len(opts.Expose) > 0 {
		if target, err = m.Clone(); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Model, err)
		}
		if err := graph.ExposeValues(target, opts.Expose); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Model, err)
		}
		if src, err = ort.SourceOf(target); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Model, err)
		}
	} else {
		src.Inputs, src.Outputs = ort.Interface(target)
	}
	res := &Result{}
	src.Outputs, res.Skipped = ort.SplitOutputs(src.Outputs)
	if len(src.Outputs) == 0 {
		return nil, fmt.Errorf("%s: no output to run: %s", opts.Model, strings.Join(res.Skipped, "; "))
	}
	sess, err := ort.NewSession(src, opts.Session)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Model, err)
	}
	defer sess.Close()
	in, err := data.Open(opts.Data, data.GraphInputs(m.Graph), opts.DataOpts)
	if err != nil {
		return nil, err
	}
	defer in.Close()

	collected := make([][]*graph.Tensor, len(src.Outputs))
	for {
		batch, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		outs, err := sess.Run(batch.Tensors)
		if err != nil {
			return nil, fmt.Errorf("%s: batch %d: %w", opts.Model, res.Batches, err)
		}
		for i, t := range outs {
			collected[i] = append(collected[i], t)
		}
		res.Batches++
		res.Samples += int64(batch.Samples)
	}
	if res.Batches == 0 {
		return nil, fmt.Errorf("%s: no samples", opts.Data)
	}
	tensors := make([]*graph.Tensor, len(collected))
	for i, parts := range collected {
		if tensors[i], err = concat(src.Outputs[i].Name, parts); err != nil {
			return nil, err
		}
	}
	if res.Files, err = writeAll(opts.OutDir, tensors); err != nil {
		return nil, err
	}
	return res, nil
}

// concat joins per-batch outputs along axis 0; a single batch is kept as
// it is (also rank-0 outputs).
func concat(name string, parts []*graph.Tensor) (*graph.Tensor, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	first := parts[0]
	dims := slices.Clone(first.Dims)
	var buf []byte
	for i, p := range parts {
		if len(p.Dims) == 0 || p.DType != first.DType || !slices.Equal(p.Dims[1:], first.Dims[1:]) {
			return nil, fmt.Errorf("output %q: batch %d has %s%v, batch 0 %s%v: cannot join along axis 0", name, i, p.DType, p.Dims, first.DType, first.Dims)
		}
		if i > 0 {
			dims[0] += p.Dims[0]
		}
		b, err := p.Bytes()
		if err != nil {
			return nil, err
		}
		buf = append(buf, b...)
	}
	return graph.NewTensor(name, first.DType, dims, buf)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// fileNames maps output names to distinct file-safe names.
func fileNames(names []string) []string {
	out := make([]string, len(names))
	used := map[string]bool{}
	for i, n := range names {
		base := unsafeChars.ReplaceAllString(n, "_")
		base = strings.TrimLeft(base, ".")
		if base == "" {
			base = "output"
		}
		f := base + ".npy"
		for k := 2; used[strings.ToLower(f)]; k++ {
			f = fmt.Sprintf("%s_%d.npy", base, k)
		}
		used[strings.ToLower(f)] = true
		out[i] = f
	}
	return out
}

// writeAll writes the tensors into a temporary folder beside dir, then
// moves the finished files into dir.
func writeAll(dir string, tensors []*graph.Tensor) ([]Output, error) {
	tmp, temp, err := atomicfile.WorkDir(dir)
	if err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dir, err)
	}
	defer func() {
		os.RemoveAll(tmp)
		temp.Drop()
	}()
	names := make([]string, len(tensors))
	for i, t := range tensors {
		names[i] = t.Name
	}
	files := fileNames(names)
	var outs []Output
	for i, t := range tensors {
		if err := data.WriteNpy(filepath.Join(tmp, files[i]), t); err != nil {
			return nil, fmt.Errorf("output %q: %w", t.Name, err)
		}
		outs = append(outs, Output{Name: t.Name, File: filepath.Join(dir, files[i]), DType: t.DType.String(), Shape: t.Dims})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dir, err)
	}
	// All files or none: an interrupt waits for the renames.
	err = temp.Commit(func() error {
		for _, f := range files {
			if err := os.Rename(filepath.Join(tmp, f), filepath.Join(dir, f)); err != nil {
				return fmt.Errorf("output folder %s: %w", dir, err)
			}
		}
		return os.Remove(tmp)
	})
	if err != nil {
		return nil, err
	}
	return outs, nil
}
